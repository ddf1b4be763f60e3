"""The steady state of a GPU entry's call with host arguments (issue 17 item 3).

Why: the H200 measured a host-input call of a small MLP (0.5 MiB ``x`` from numpy) at 66 us
of host time against 29 us for the same call fed a device ``x``: the call took the entry's
general path (each argument looked up and imported again, the host array read through
``host_array``, a ``Tensor`` built for it, the graph found by its address tuple, ~7 driver calls
through cuda-python's bindings) and then copied 0.5 MiB into the pinned block (~17 us). This
path is what a call costs once its form is known, like :mod:`~kinac.rt.cuda.entry_hot` for
device arguments:

- the device arguments are the last general call's (by identity, each still at its address,
  found through the entry's imports once and then compared as one id tuple);
- each host argument is a numpy array of its parameter's exact shape and dtype, or a contiguous
  CPU torch tensor of them (not bf16, not requiring grad; a pinned one, ``pin_memory()``, is
  DMA'd where it is, as a ``pinned_empty`` array); anything else (a cast, a strided tensor)
  takes the general path, which reads and casts it;
- the output blocks are the dropped outputs' (:func:`~kinac.rt.cuda.entry_hot.outputs`), and a
  graph is bound to this turn's slot addresses and these outputs.

Then the call is: the copy into the pinned block, and two ``cuGraphLaunch`` (the copy graph:
the wait for the turn's last compute, one DMA per host argument, *copied*, the turn's flag;
the compute wrapper: the wait for *copied*, the captured compute, *consumed*), the host's wait
for the turn's last DMAs a read of its flag (:mod:`~kinac.rt.cuda.staging_graphs`). Where a
graph could not be built, or a host argument is a ``pinned_empty`` array or a pinned tensor
(DMA'd where it is: no staging copy): the turn's two waits, one DMA per host argument, one
*copied* event, the compute's wait for it, one ``cuGraphLaunch``, one *consumed* event; every
driver call through ``ctypes``.

The memo is dropped when an argument is not the memo's (rebuilt at the next call), and emptied
by the weak reference of any device argument that dies, before its id can name another object.

The copy into the pinned block is the plan's: ``numpy.copyto`` below ``stager.stream_min`` (a
third of the core's L2), streaming stores from there (:mod:`~kinac.rt.cuda.staging_nt`), split
across the copier's threads from its threshold. ``kinac.compile``'s memo calls the bound call of
:mod:`~kinac.rt.cuda.staging_bound`, which skips the entry's layers and the checks the memo made
(2026-12-02c round 2, ``docs/runtime.md``).
"""

from __future__ import annotations

import operator
import sys
import weakref
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from kinac.rt.cuda import driver, staging_graphs
from kinac.rt.cuda.entry_hot import hot_key, outputs
from kinac.rt.cuda.entry_support import DL_NAMES, is_dense
from kinac.rt.cuda.pinned import HANDED
from kinac.rt.cuda.staging import FLAG_STRIDE, SLOTS, Param
from kinac.rt.cuda.tensor import KDL_CUDA, Tensor

if TYPE_CHECKING:
    from kinac.rt.cuda.staging import HostStager


class Memo:
    """What a hot call compares and uses: the device arguments' positions, ids, addresses
    (and torch's ``data_ptr`` of each, to notice a tensor moved in place), the host params,
    and the input address tuple of each turn."""

    __slots__ = (
        "n", "get", "ids", "dp", "dps", "host", "tdtypes", "torch", "nbytes", "in_ptrs",
        "stream", "refs", "nd", "plans", "checks",
    )  # fmt: skip

    n: int
    get: Callable[[tuple[Any, ...]], tuple[Any, ...]]
    ids: tuple[int, ...]
    dp: Any
    dps: tuple[int, ...] | None
    host: tuple[tuple[int, Param], ...]
    tdtypes: tuple[Any, ...]  # per host param: the torch dtype a CPU tensor may have, or None
    torch: Any  # torch.Tensor when torch is loaded, else None
    nbytes: int
    in_ptrs: list[tuple[int, ...]]
    stream: Any
    refs: list[Any]
    nd: Any  # numpy.ndarray
    plans: list[Any]  # per turn: staging_graphs.plan's (its compute graph, copy, compute, fills)
    checks: tuple[tuple[int, Param, Any], ...]  # per host param: (position, param, torch dtype)


def _getter(pos: tuple[int, ...]) -> Callable[[tuple[Any, ...]], tuple[Any, ...]]:
    if len(pos) >= 2:
        return operator.itemgetter(*pos)  # type: ignore[return-value]
    if len(pos) == 1:
        i = pos[0]
        return lambda a: (a[i],)
    return lambda a: ()


def _usable(entry: Any, i: int, t: Tensor) -> bool:
    """A kinac CUDA tensor the general path would use in place for parameter ``i``."""
    spec = entry.lowered.params[i]
    return (
        t.device == (KDL_CUDA, entry.ordinal)
        and t.dtype.name == DL_NAMES[spec.dtype]
        and t.shape == spec.shape
        and is_dense(t)
        and t.ptr % 16 == 0
    )


def build(st: HostStager, entry: Any, arrays: tuple[Any, ...]) -> Memo | None:
    """The memo for ``arrays`` when the last general call staged host arguments at the
    positions these have and imported every other one (alive, at its address); else None."""
    staged = st.staged_positions
    n = len(entry.lowered.params)
    if not staged or len(arrays) != n:
        return None
    dev_pos = tuple(i for i in range(n) if i not in staged)
    devs = [arrays[i] for i in dev_pos]
    kinds = set(map(type, devs))
    dp = getattr(next(iter(kinds)), "data_ptr", None) if len(kinds) == 1 else None
    if dp is None and any(hasattr(k, "data_ptr") for k in kinds):
        return None  # torch tensors among other kinds: moved ones would go unnoticed
    ptrs: dict[int, int] = {}
    for i, a in zip(dev_pos, devs, strict=True):
        if type(a) is Tensor:  # kinac's own: used in place, never imported; checked here
            if not _usable(entry, i, a):
                return None
            ptrs[i] = a.ptr
            continue
        hit = entry._imports.get((i, id(a)))
        if hit is None or hit[0]() is not a:
            return None
        if dp is not None and dp(a) != hit[1].ptr:
            return None
        ptrs[i] = hit[1].ptr
    box = st.memo

    def gone(_: Any) -> None:
        box[0] = None

    m = Memo()
    try:
        m.refs = [weakref.ref(a, gone) for a in devs]
    except TypeError:
        return None
    m.n = n
    m.get = _getter(dev_pos)
    m.ids = tuple(map(id, devs))
    m.dp = dp
    m.dps = tuple(map(dp, devs)) if dp is not None else None
    m.host = tuple((i, st.params[i]) for i in staged)
    m.nbytes = sum(p.nbytes for _, p in m.host)
    torch = sys.modules.get("torch")  # the caller's: loaded when a torch tensor exists
    m.torch = getattr(torch, "Tensor", None)
    m.tdtypes = tuple(
        getattr(torch, p.dtype.name, None) if torch is not None and p.dtype.name != "uint16"
        else None
        for _, p in m.host
    )  # fmt: skip
    m.checks = tuple((i, p, tdt) for (i, p), tdt in zip(m.host, m.tdtypes, strict=True))
    m.in_ptrs = [
        tuple(ptrs[i] if i in ptrs else st.params[i].dev[j] for i in range(n)) for j in range(SLOTS)
    ]
    m.stream = st.arg(entry.stream)
    import numpy as np

    m.nd = np.ndarray
    m.plans = [None] * SLOTS
    box[0] = m
    return m


def hot_call(st: HostStager, entry: Any, arrays: tuple[Any, ...]) -> Any:
    """The call, or None (nothing queued) for the general path."""
    m: Memo | None = st.memo[0]
    if m is None:
        m = build(st, entry, arrays)
        if m is None:
            return None
    if not entry.use_graphs or entry.volatile or entry.status or st._pending:
        return None
    if len(arrays) != m.n:
        return None
    devs = m.get(arrays)
    if tuple(map(id, devs)) != m.ids or (m.dp is not None and tuple(map(m.dp, devs)) != m.dps):
        st.memo[0] = None  # other arguments: the next call builds the memo again
        return None
    return steady_call(st, entry, m, arrays)


def steady_call(
    st: HostStager,
    entry: Any,
    m: Memo,
    arrays: tuple[Any, ...],
    turns: list[Any] | None = None,
    direct: list[Any] | None = None,
) -> Any:
    """The call once the device arguments are known to be the memo's: the host arguments'
    form checked, then queued (see the module docstring); None (nothing queued) else. The bound
    call's records of this turn go to ``turns`` (a numpy input copied into the turn's block:
    :func:`~kinac.rt.cuda.staging_bound._turn_call`) and ``direct`` (a caller's pinned array:
    :func:`~kinac.rt.cuda.staging_direct.direct_call`)."""
    nd, tt = m.nd, m.torch
    for i, p, tdt in m.checks:
        a = arrays[i]
        if type(a) is nd:
            if a.shape == p.shape and a.dtype == p.dtype:
                continue
        elif (
            type(a) is tt
            and a.dtype is tdt
            and not a.is_cuda
            and a.shape == p.shape
            and a.is_contiguous()
            and not a.requires_grad
        ):
            continue
        st.memo[0] = None
        return None
    outs = outputs(entry)
    j = st.turn
    ptrs = m.in_ptrs[j] + ((outs[0].ptr,) if len(outs) == 1 else tuple([t.ptr for t in outs]))
    hit = entry._bound.get(ptrs)
    graph = hit[2] if hit is not None else None
    fast = graph.fast_launch if graph is not None else None
    if fast is None:
        return None  # not captured at these addresses yet: the general path captures it
    entry._bound.move_to_end(ptrs)
    t = st.turns[j]
    if t.copy_pending:  # the host's wait for the turn's last DMAs: none if the flag is set
        if t.flagged and st.flags[j * FLAG_STRIDE]:
            t.copy_pending = t.flagged = False
        else:
            st.begin_host(t)
    if st.use_graphs:
        plan = m.plans[j]
        if plan is None or plan[0] is not graph:
            plan = m.plans[j] = staging_graphs.plan(st, m.host, j, graph)
        fills = plan[3]
        if len(fills) == 1 and type(a := arrays[fills[0][0]]) is nd and id(a) not in HANDED:
            f = fills[0]  # one numpy input, not a caller's pinned array: its copy, inline
            f[2](f[3], arrays[f[0]])
            srcs: tuple[int, ...] | None = None
        else:
            srcs = staging_graphs.fill(st, fills, arrays, nd) if plan[1] is not None else ()
        cp = plan[1] if srcs is None else None
        if srcs:  # a caller's pinned array among them: a copy graph reading it where it is
            cp = staging_graphs.direct_copy(st, j, m.host, srcs)
        if cp is not None:
            cw = plan[2]  # two launches: the copies, then the compute
            flagged = cp.flag
            if flagged:
                st.flags[j * FLAG_STRIDE] = 0
            rc = cp.launch(cp.exec, st.cs_arg)
            if not rc:
                t.copy_pending, t.flagged = True, flagged
                if not st.compute_wrapper:  # the bench's switch: the compute by driver calls
                    compute_by_calls(st, entry, m, t, fast)
                    st.hybrid_calls += 1
                elif rc := cw.launch(cw.exec, m.stream):  # (the copies are queued)
                    note_refused(st, "the compute wrapper", rc)
                    compute_by_calls(st, entry, m, t, fast)
                else:
                    st.graph_calls += 1
                    if turns and srcs is None and len(outs) == 1:  # the bound call's record
                        f = fills[0]
                        fi = j * FLAG_STRIDE
                        turns[j] = (j, plan, outs[0].ptr, graph, fast, t, fi, f[0], f[2], f[3], cp, cw)  # fmt: skip
                        hot_key(entry, ptrs)
                    elif direct and srcs and len(srcs) == 1 and len(outs) == 1:
                        src = srcs[0]
                        direct[j] = (j, plan, graph, fast, t, cp, cw, src, outs[0].ptr, st.calls.handle(src))  # fmt: skip
                        hot_key(entry, ptrs)
                t.read_pending = True
                st.turn = (j + 1) % SLOTS
                if srcs:  # the caller may refill its pinned array once the call returns
                    rc = st.calls.sync(t.done_arg if flagged else t.copied_arg)
                    if rc:
                        driver.fail("cuEventSynchronize", rc)
                    t.copy_pending = t.flagged = False
                    blocks = [f[1].host[f[4]].ptr for f in plan[3]]
                    st.direct += sum(a != b for a, b in zip(srcs, blocks, strict=True))
                return finish_call(st, entry, m, outs)
            note_refused(st, "the copy graph", rc)  # nothing queued: this call by driver calls
    queue_by_driver_calls(st, entry, m, arrays, j, t, fast)
    return finish_call(st, entry, m, outs)


def launch_compute(
    st: HostStager, entry: Any, m: Memo, turn: Any, fast: Any, cw: Any, j: int
) -> None:
    """A staged call's end, shared by the bound call and the DMA-first call: turn ``j``'s
    compute wrapper launched on the entry's stream (its work as driver calls where the driver
    refuses the graph), the turn marked to be read, the next turn chosen, the call counted."""
    rc = cw.launch(cw.exec, m.stream)
    if rc:
        note_refused(st, "the compute wrapper", rc)
        compute_by_calls(st, entry, m, turn, fast)
        st.graph_calls -= 1  # (turn_calls counts it as one)
    turn.read_pending = True
    st.turn = (j + 1) % SLOTS
    st.turn_calls += 1  # (a hot call, a graph call, one host array staged: HostStager)
    st.turn_bytes += m.nbytes
    entry.hot_calls += 1  # (a replay too: GpuEntry.replays counts it)


def compute_by_calls(st: HostStager, entry: Any, m: Memo, t: Any, fast: Any) -> None:
    """The compute wrapper's work as driver calls: the wait for *copied*, the captured graph's
    launch, *consumed*."""
    c = st.calls
    rc = c.wait(m.stream, t.copied_arg, c.zero) or fast[0](fast[1], entry.stream.cvp)
    rc = c.record(t.consumed_arg, m.stream) or rc
    if rc:
        driver.fail("cuStreamWaitEvent/cuGraphLaunch/cuEventRecord", rc)


def note_refused(st: HostStager, what: str, rc: int) -> None:
    """A launch the driver refused: the stager keeps to driver calls from now on (the reason in
    ``graph_error``, and a warning once), rather than failing every call."""
    import warnings

    st.use_graphs = False
    st.graph_error = f"cuGraphLaunch of {what} failed with CUresult {rc}"
    warnings.warn(f"host-input staging: {st.graph_error}; using driver calls", stacklevel=4)


def queue_by_driver_calls(
    st: HostStager, entry: Any, m: Memo, arrays: tuple[Any, ...], j: int, t: Any, fast: Any
) -> None:
    """The steady state without graphs (or a caller's pinned array among the arguments: DMA'd
    from where it is): the device's wait, one DMA per host argument, *copied*, the compute's
    wait, the launch, *consumed*; a ``pinned_empty`` array's DMA waited for."""
    c, cs, pending = st.calls, st.cs_arg, st._pending
    st.begin_device(t)
    nd = m.nd
    try:
        for i, p in m.host:
            a = arrays[i]
            src = st.fill(p, a, j) if type(a) is nd else st.fill_torch(p, a, j)
            pending.append(i)
            rc = c.copy(p.dev_arg[j], src, p.n_arg, cs)
            if rc:
                driver.fail("cuMemcpyHtoDAsync", rc)
    except BaseException:
        st.discard()
        raise
    rc = c.record(t.copied_arg, cs)
    if rc:
        st.discard()
        driver.fail("cuEventRecord", rc)
    t.copy_pending = True
    rc = c.wait(m.stream, t.copied_arg, c.zero) or fast[0](fast[1], entry.stream.cvp)
    rc2 = c.record(t.consumed_arg, m.stream)
    t.read_pending = True
    st.end(t)  # (a pinned_empty array's DMA waited for)
    if rc or rc2:
        driver.fail("cuStreamWaitEvent/cuGraphLaunch/cuEventRecord", rc or rc2)


def finish_call(st: HostStager, entry: Any, m: Memo, outs: list[Tensor]) -> Any:
    st.copies += len(m.host)
    st.bytes += m.nbytes
    st.hot_calls += 1
    entry.hot_calls += 1  # (a replay too: GpuEntry.replays counts it)
    if entry._host_outputs:
        return entry._host_results(outs)
    return outs[0] if len(outs) == 1 else tuple(outs)
