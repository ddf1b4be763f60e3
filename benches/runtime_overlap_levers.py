"""Issue 17's last goal, round 2: the three levers on a host-input call's host cost, measured
in the probe's process (``benches/runtime_overlap_probe.py`` calls :func:`levers`).

Why: the probe showed the host-input loop host-bound (the memcpy into the turn's pinned block
51 us in the loop against 33 us alone at 1 MiB, two ``cuGraphLaunch`` and kinac's Python per
call). Measured here, each against the committed steady state in the same process:

1. **streaming stores** (:mod:`kinac.rt.cuda.staging_nt`) in the real call (``fn(x, *ws)``):
   the cached copy (``stream_min`` huge), the default (from a third of the core's L2), and
   streaming at this size with 32- and 64-byte stores, in interleaved rounds (each a pipelined
   median; the median of 3 rounds) so a drifting host favours none;
2. **one launch per call** (``one_launch=True``; round 1 measured it on 2026-12-02c: no win, so
   round 2 leaves it out): a bare loop (no entry, no memo: the minimum Python around the same
   driver work) of the committed mechanics (the flag read, the memcpy, the copy graph, the
   compute wrapper) against one graph per turn launched on a stream of the turn's own
   (``wait consumed_j`` -> the memcpy node -> the flag, *done*; ``wait e_in_j`` and the memcpy
   -> the captured compute as a child node -> *consumed_j*), with the host's
   ``cuEventRecord(e_in_j, entry stream)`` before the launch and
   ``cuStreamWaitEvent(entry stream, consumed_j)`` after (what keeps the entry's stream ordered
   with the call: work queued there before it, readers of its outputs after it); and that graph
   without the two host calls, waiting on the other turn's *consumed* instead (a bound: it
   leaves the entry's stream unordered);
3. **kinac's Python**: the same call through ``kinac.compile``'s memo (``fn(...)``: the bound
   call of :func:`kinac.rt.cuda.staging_hot.bind`), the bound call alone, the entry's own
   layers (``entry(...)``), and the bare two-launch loop (lever 3's floor).

Every loop's last result is compared bit for bit with the device-input call's.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


def _ab(a: Callable[[], float], b: Callable[[], float], rounds: int = 3) -> tuple[float, float]:
    """Medians of ``rounds`` interleaved measurements of ``a`` and ``b``."""
    ta, tb = [], []
    for _ in range(rounds):
        ta.append(a())
        tb.append(b())
    return sorted(ta)[rounds // 2], sorted(tb)[rounds // 2]


def _out_ptr(entry: Any, captured: Any) -> int:
    """The output address the captured graph ``captured`` writes (the last of its bound key)."""
    for key, hit in entry._bound.items():
        if hit[2] is captured:
            return int(key[-1])
    raise LookupError("captured graph not bound")


def _read(ptr: int, like: Any) -> Any:
    import numpy as np

    from kinac.rt.cuda import driver

    out = np.empty_like(like)
    driver.check("cuMemcpyDtoH", driver.api().cuMemcpyDtoH(out.ctypes.data, ptr, out.nbytes))
    return out


def levers(
    fn: Any,
    x: Any,
    ws: list[Any],
    st: Any,
    entry: Any,
    n: int,
    want: Any,
    pipelined: Any,
    one_launch: bool = False,
) -> tuple[dict[str, float], dict[str, bool], dict[str, Any]]:
    """``(us per call by variant, bit-identical by variant, notes)`` (see the module
    docstring); the stager is left as it was (synchronised, its turns idle)."""
    import numpy as np
    import torch

    from kinac.rt.cuda.device import Event, Stream
    from kinac.rt.cuda.staging import FLAG_STRIDE
    from kinac.rt.cuda.staging_graphs import memcpy_params
    from kinac.rt.cuda.staging_nt import stream_copier

    v: dict[str, float] = {}
    ok: dict[str, bool] = {}
    notes: dict[str, Any] = {}
    sync = torch.cuda.synchronize

    # 1. streaming stores in the real call, A/B interleaved (off / the default / 64-byte stores)
    default_min, default_width = st.stream_min, st.stream_width

    from kinac.rt.cuda.staging_copy import HostCopier

    copier0 = st.copier
    split2 = HostCopier(workers=1, min_bytes=x.nbytes)  # this size on 2 / 4 threads
    split4 = HostCopier(workers=3, min_bytes=x.nbytes)

    def mode(
        least: int, width: int, wrapper: bool = True, copier: Any = None
    ) -> Callable[[], float]:
        def run() -> float:
            st.stream_min, st.stream_width = least, width
            st.compute_wrapper = wrapper
            st.copier = copier if copier is not None else copier0
            st.memo[0] = None
            fn(x, *ws)
            fn(x, *ws)
            return pipelined(lambda: fn(x, *ws), n) * 1e3

        return run

    modes = {
        "A/B: cached copy (numpy.copyto; threads from 2 MiB)": mode(1 << 62, 32),
        "A/B: the default (streaming from L2/3, 32-byte stores)": mode(default_min, 32),
        "A/B: streaming at this size, 32-byte stores": mode(0, 32),
        "A/B: streaming at this size, 64-byte stores": mode(0, 64),
        "A/B: the default, compute by driver calls (no wrapper graph)": mode(
            default_min, 32, False
        ),
    }
    if x.nbytes < copier0.min_bytes:  # (from its threshold the copier splits already)
        modes["A/B: streaming at this size on 2 threads"] = mode(0, 32, copier=split2)
        modes["A/B: streaming at this size on 4 threads"] = mode(0, 32, copier=split4)
    s0 = st.streamed
    got: dict[str, list[float]] = {k: [] for k in modes}
    for _ in range(3):
        for k, run in modes.items():
            got[k].append(run())
    for k, ts in got.items():
        v[k] = sorted(ts)[1]
    st.compute_wrapper = True
    st.copier = copier0
    notes["streamed_calls"] = st.streamed - s0
    notes["hybrid_calls"] = st.hybrid_calls
    notes["stream_min_default"] = default_min
    for least, width, cop in ((0, 32, None), (0, 64, None), (0, 32, split4)):
        st.stream_min, st.stream_width = least, width
        st.copier = cop if cop is not None else copier0
        st.memo[0] = None
        fn(x, *ws)
        y = fn(x, *ws)
        name = f"streaming {width}" + (" threads" if cop is not None else "")
        ok[name] = bool(np.array_equal(torch.from_dlpack(y).cpu().numpy(), want))
    st.stream_min, st.stream_width, st.copier = default_min, default_width, copier0
    st.memo[0] = None
    for _ in range(4):  # plans for both turns again (the default)
        fn(x, *ws)
    sync()

    # 3. where the Python goes: the API's memo -> the bound call; the bound call alone; the
    # entry's own layers (entry(...)); the bare loops below
    args = (x, *ws)
    bound_call = entry.hot_path(args)
    if bound_call is not None:
        v["layers: bound call, no API"] = pipelined(lambda: bound_call(*args), n) * 1e3
    v["layers: entry(...), no API"] = pipelined(lambda: entry(*args), n) * 1e3
    v["layers: fn(...) (API memo + bound call)"] = pipelined(lambda: fn(*args), n) * 1e3
    notes["bound_call"] = bound_call is not None
    sync()

    # 2./3. bare loops over the same graphs
    m = st.memo[0]
    if m is None or len(m.host) != 1 or any(p is None or p[1] is None for p in m.plans):
        notes["bare"] = "skipped: no memo/plans with copy graphs for both turns"
        return v, ok, notes
    p = m.host[0][1]
    c, api, cs, stream = st.calls, st.graphs, st.cs_arg, m.stream
    flags = st.flags
    caps = [pl[0] for pl in m.plans]
    cps = [pl[1] for pl in m.plans]
    cws = [pl[2] for pl in m.plans]
    blks = [st.block(p, j) for j in range(2)]
    done = [t.done_arg for t in st.turns]
    consumed = [t.consumed_arg for t in st.turns]
    np_copy = [np.copyto, np.copyto]
    nt_copy = [stream_copier(b.array) or np.copyto for b in blks]
    pend = [False, False]
    k = [0]

    def flag_wait(j: int) -> None:
        if pend[j] and not flags[j * FLAG_STRIDE]:
            c.sync(done[j])
        flags[j * FLAG_STRIDE] = 0
        pend[j] = True

    def two(copy: list[Any]) -> Callable[[], None]:
        def call() -> None:
            j = k[0] & 1
            k[0] += 1
            flag_wait(j)
            copy[j](blks[j].array, x)
            cps[j].launch(cps[j].exec, cs)
            cws[j].launch(cws[j].exec, stream)

        return call

    streams = [Stream(), Stream()]
    s_args = [st.arg(s) for s in streams]
    e_in = [Event(timing=False) for _ in range(2)]
    e_in_args = [c.handle(e.handle) for e in e_in]
    built: list[Any] = []

    def graph(j: int, ordered: bool) -> Any:
        t = st.turns[j]
        g = api.create()
        w0 = api.wait(g, [], t.consumed.handle)
        cp = api.memcpy(g, [w0], memcpy_params(p.dev[j], False, blks[j].ptr, True, p.nbytes))
        flag = st._flag_ptr + 4 * j * FLAG_STRIDE
        f = api.memcpy(g, [cp], memcpy_params(flag, True, st._one, False, 4))
        api.record(g, [f], t.done.handle)
        before = e_in[j].handle if ordered else st.turns[1 - j].consumed.handle
        w1 = api.wait(g, [], before)
        ch = api.child(g, [cp, w1], caps[j])
        api.record(g, [ch], t.consumed.handle)
        ex = api.instantiate(g)
        built.append((g, ex))
        return ex

    one_ex: list[Any] = []
    bound_ex: list[Any] = []
    try:
        if one_launch:  # (round 1 measured it: no win; round 2 leaves it out)
            one_ex = [graph(j, True) for j in range(2)]
            bound_ex = [graph(j, False) for j in range(2)]
    except Exception as e:  # noqa: BLE001 - reported; the rest of the probe runs
        notes["one_launch_error"] = repr(e)
        one_ex = bound_ex = []
    launch = api.launch

    def one(copy: list[Any]) -> Callable[[], None]:
        def call() -> None:
            j = k[0] & 1
            k[0] += 1
            flag_wait(j)
            copy[j](blks[j].array, x)
            c.record(e_in_args[j], stream)
            launch(one_ex[j], s_args[j])
            c.wait(stream, consumed[j], c.zero)

        return call

    def bound(copy: list[Any]) -> Callable[[], None]:
        def call() -> None:
            j = k[0] & 1
            k[0] += 1
            flag_wait(j)
            copy[j](blks[j].array, x)
            launch(bound_ex[j], s_args[j])

        return call

    def timed(name: str, call: Callable[[], None]) -> None:
        sync()
        k[0] = 0
        pend[:] = [False, False]
        flags[0] = flags[FLAG_STRIDE] = 0
        for _ in range(4):
            call()
        sync()
        v[name] = pipelined(call, n) * 1e3
        sync()
        last = (k[0] - 1) & 1
        try:
            ok[name] = bool(np.array_equal(_read(_out_ptr(entry, caps[last]), want), want))
        except LookupError:  # (the entry dropped that graph since: its output is unknown)
            notes[f"unchecked: {name}"] = True

    try:
        rounds = 2 if one_launch else 1
        for rnd in range(rounds):  # interleaved rounds; the table keeps the last
            sfx = "" if rnd == rounds - 1 else " (round 1)"
            timed("bare: 2 launches, copyto" + sfx, two(np_copy))
            if one_launch and one_ex:
                timed("bare: 1 launch + record + wait, copyto" + sfx, one(np_copy))
            timed("bare: 2 launches, streaming" + sfx, two(nt_copy))
            if one_launch and one_ex:
                timed("bare: 1 launch + record + wait, streaming" + sfx, one(nt_copy))
                timed("bare: 1 launch, entry stream unordered (bound), copyto" + sfx,
                      bound(np_copy))  # fmt: skip
        # the launches alone (host us per call): no memcpy, no GPU wait
        if one_launch and one_ex:
            import time

            def host_us(call: Callable[[], None], reps: int = 200) -> float:
                sync()
                t0 = time.perf_counter()
                for _ in range(reps):
                    call()
                dt = (time.perf_counter() - t0) * 1e6 / reps
                sync()
                return dt

            def l2() -> None:
                j = k[0] & 1
                k[0] += 1
                cps[j].launch(cps[j].exec, cs)
                cws[j].launch(cws[j].exec, stream)

            def l1() -> None:
                j = k[0] & 1
                k[0] += 1
                c.record(e_in_args[j], stream)
                launch(one_ex[j], s_args[j])
                c.wait(stream, consumed[j], c.zero)

            for name, f in (("2 launches", l2), ("1 launch + record + wait", l1)):
                notes[f"host_us_{name}"] = sorted(host_us(f) for _ in range(3))[1]
    finally:
        sync()
        for t in st.turns:  # the loops above left the flags set: the stager's state as it was
            t.copy_pending = t.flagged = t.read_pending = False
        flags[0] = flags[FLAG_STRIDE] = 0
        for g, ex in built:
            api.destroy(g, ex)
        for e in e_in:
            e.close()
        for s in streams:
            s.close()
    return v, ok, notes
