"""A caller's pinned array, its DMA queued first in the call (issue 17, 2026-12-02e).

Why: a call fed an array the caller filled in page-locked memory (``pinned_empty``, a
``pin_memory()`` torch tensor) reads it where it is and must wait for that DMA before it returns
(the caller may refill the array then). So a loop of such calls runs at the DMA plus the host
work of the call that is not overlapped by it: the H200 measured the MLP's 0.5 MiB ``x`` at
1.23-1.28x of device input on a slow host (DMA 18.3 us, ~19 us of host work a call), where
:func:`~kinac.rt.cuda.staging_hot.steady_call` queued the DMA only after the argument checks, the
output tensor, the graph lookup and the plan. Here the bound call
(:mod:`~kinac.rt.cuda.staging_bound`) repeats a turn as the last call of that turn ran it: after
the checks that must precede it (the array is the caller's pinned array at the recorded address,
of the parameter's form; the turn's graphs alive), the copy graph is launched first, and the
output tensor, the compute wrapper's launch and the statistics run while the DMA does; the call
then waits for *copied* and returns. Anything that does not hold (another address, the output
held by the caller, a graph gone) after the DMA was queued: the call waits for that DMA and
takes :func:`steady_call`, which queues it again (same bytes, same slot: correct, rare).

``KINAC_STAGING_EARLY_DMA=0`` (or ``stager.early_dma = False``) keeps :func:`steady_call` for these
calls: the bench's same-process A/B.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kinac.rt.cuda import driver, staging_graphs
from kinac.rt.cuda.entry_hot import hot_key, outputs, take
from kinac.rt.cuda.pinned import HANDED, torch_pinned
from kinac.rt.cuda.staging import FLAG_STRIDE
from kinac.rt.cuda.staging_hot import launch_compute

if TYPE_CHECKING:
    from kinac.rt.cuda.staging import HostStager, Param
    from kinac.rt.cuda.staging_hot import Memo


def reads(st: HostStager, m: Memo, x: Any, p: Param, src: int) -> bool:
    """Whether host argument ``x`` is a caller's pinned array at address ``src``, of parameter
    ``p``'s exact form, DMA'd where it is (at least ``st.direct_min`` bytes): a ``pinned_empty``
    array (the object itself, alive), or a contiguous pinned CPU torch tensor of the param's
    dtype that does not require grad (its pinnedness remembered per storage:
    :func:`~kinac.rt.cuda.pinned.torch_pinned`)."""
    if p.nbytes < st.direct_min:
        return False
    if type(x) is m.nd:
        h = HANDED.get(id(x))
        return (
            h is not None
            and h[1] == src
            and h[0]() is x
            and x.shape == p.shape
            and (x.dtype is p.dtype or x.dtype == p.dtype)
        )
    return (
        type(x) is m.torch
        and x.data_ptr() == src
        and x.dtype is m.tdtypes[0]
        and not x.is_cuda
        and x.shape == p.shape
        and x.is_contiguous()
        and not x.requires_grad
        and torch_pinned(x, st.pin_cache)
    )


MOVED: Any = object()  # direct_call's answer when a device array moved: the entry's own path


def direct_call(
    st: HostStager,
    entry: Any,
    m: Memo,
    dc: tuple[Any, ...],
    kept: list[Any],
    arrays: tuple[Any, ...],
    direct: list[Any],
) -> Any:
    """The call recorded in ``dc`` (``(turn, plan, captured graph, its fast launch, Turn, copy
    graph, compute wrapper, source, output address, source as the calls take it)``), the
    caller's checks made (the entry's state and context, ``x`` by :func:`reads`): the DMA first
    (the copy graph, or ``st.direct_by_calls``: the copy stream's wait, ``cuMemcpyHtoDAsync``
    and *copied* as driver calls), then the device arrays' addresses, the output, the compute
    wrapper and the statistics, then the wait for the DMA. The output is another than the
    record's when the caller holds that one (or a DLPack consumer still does): that output's
    captured graph is looked up after the DMA was queued, and recorded in ``direct`` for this
    turn. None when the record no longer holds (the DMA, if queued, waited for: ``steady_call``
    queues it again: a graph not captured yet at these addresses, a graph gone); :data:`MOVED`
    when a device array moved in place (the DMA waited for: the entry's own path)."""
    j, plan, graph, fast, t, cp, cw, _, optr, src_arg = dc
    if (
        m.plans[j] is not plan
        or graph.fast_launch is not fast
        or not (cp.alive and cw.alive and st.use_graphs and st.compute_wrapper)
    ):
        return None  # (nothing queued)
    if t.copy_pending:  # the turn's last DMAs (a numpy call's, in the turn's blocks)
        st.begin_host(t)
    if st.direct_by_calls:
        flagged = False
        _dma_by_calls(st, m, j, t, src_arg)
    else:
        flagged = cp.flag
        if flagged:
            st.flags[j * FLAG_STRIDE] = 0
        if cp.launch(cp.exec, st.cs_arg):
            return None  # nothing queued: steady_call tries again and falls back to driver calls
    t.copy_pending, t.flagged = True, flagged
    # from here on the DMA runs: what the call still does overlaps it
    if m.dp is not None and tuple(map(m.dp, m.get(arrays))) != m.dps:
        _wait(st, t, flagged)
        return MOVED
    out = take(kept)
    if out is None or out.ptr != optr:  # (the caller holds the recorded output)
        found = _other_output(st, entry, m, j)
        if found is None:
            _wait(st, t, flagged)
            return None
        out, plan, graph, fast, cw = found
        direct[j] = (j, plan, graph, fast, t, cp, cw, dc[7], out.ptr, src_arg)
    launch_compute(st, entry, m, t, fast, cw, j)
    st.direct += 1
    host_outputs = entry._host_outputs
    _wait(st, t, flagged)  # the caller may refill its array once the call returns
    if host_outputs:
        return entry._host_results([out])
    return out


def _other_output(st: HostStager, entry: Any, m: Memo, j: int) -> tuple[Any, ...] | None:
    """``(output, plan, captured graph, its fast launch, compute wrapper)`` for this turn and
    the output the entry hands out now (:func:`~kinac.rt.cuda.entry_hot.outputs`), as
    ``steady_call`` finds them; None where the graph is not captured at these addresses yet (the
    entry's path captures it) or a wrapper could not be built."""
    outs = outputs(entry)
    if len(outs) != 1:
        return None
    ptrs = m.in_ptrs[j] + (outs[0].ptr,)
    hit = entry._bound.get(ptrs)
    graph = hit[2] if hit is not None else None
    fast = graph.fast_launch if graph is not None else None
    if fast is None:
        return None
    plan = m.plans[j]
    if plan is None or plan[0] is not graph:
        plan = m.plans[j] = staging_graphs.plan(st, m.host, j, graph)
    if plan[2] is None:
        return None
    hot_key(entry, ptrs)
    return outs[0], plan, graph, fast, plan[2]


def _dma_by_calls(st: HostStager, m: Memo, j: int, t: Any, src_arg: Any) -> None:
    """The copy graph's work as driver calls: the copy stream's wait for the turn's last compute
    (when one was queued since the last wait), the DMA, *copied*."""
    c, cs = st.calls, st.cs_arg
    p = m.host[0][1]
    rc = c.wait(cs, t.consumed_arg, c.zero) if t.read_pending else 0
    t.read_pending = False
    rc = rc or c.copy(p.dev_arg[j], src_arg, p.n_arg, cs) or c.record(t.copied_arg, cs)
    if rc:
        _wait(st, t, False)  # (whatever was queued)
        driver.fail("cuStreamWaitEvent/cuMemcpyHtoDAsync/cuEventRecord", rc)


def _wait(st: HostStager, t: Any, flagged: bool) -> None:
    """Wait for the turn's DMA (on *done* where the copy graph sets the flag, else on
    *copied*); the turn's pinned memory is free again."""
    rc = st.calls.sync(t.done_arg if flagged else t.copied_arg)
    if rc:
        driver.fail("cuEventSynchronize", rc)
    t.copy_pending = t.flagged = False
