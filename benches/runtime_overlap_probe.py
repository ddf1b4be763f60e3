"""Where a host-input call's time goes when it should overlap (issue 17's last goal).

Why: the H200 measured host-input MLP calls at 1.28x of device-input calls at x = 1 MiB
(memcpy 37 us + DMA 26 us against 65 us of compute) and 1.25-1.30x at x = 0.5 MiB already in
pinned memory, where the goal is 1.2x. Whether the loop is host-bound (the memcpy, the
launches, a host wait) or the GPU serialises (the copy graph's wait on *consumed*, memcpy nodes
queued behind the compute, the wrapper graph's own cost) is read here, in ONE process per
size, from:

* **host per call**, split by instrumenting the steady state (``staging_hot``): the staging
  ``memcpy`` (``staging_graphs.fill``), the host's wait for a turn's DMAs (flag misses, their
  ``cuEventSynchronize``), a caller's pinned array's DMA waited for, the two ``cuGraphLaunch``,
  and the rest (Python, the API, and the instrumentation's own event records: these loops run
  20-35 us per call slower than uninstrumented ones, so read the split, not the sum);
* **GPU timeline**: timing events recorded around each launch on its stream (copy before/after,
  compute before/after) and one on an idle stream at the moment of the copy launch (the host's
  submit time on the GPU's clock): the GPU period per call, how long each compute and copy
  took, and per call whether the compute waited for its copy or for the host;
* **variants in the same process**: the memcpy skipped (the block already holds ``x``: the
  host's floor), graphs vs driver calls (``cuMemcpyHtoDAsync`` on the copy stream), the
  driver's own staging of the pageable ``x``, the memcpy split over 2 and 4 threads,
  write-combined blocks, a caller's pinned array DMA'd in place (the call waits for it) vs
  copied into the stager's block (``direct_min``) vs not waited for (unsafe: a bound), the
  copy graph alone, the compute wrapper alone and the captured graph alone (host and GPU cost
  per launch), the memcpy alone into one block vs into the stager's alternating blocks.

Every variant's result is compared bit for bit with the device-input call's. Raw results and
what they showed: ``docs/measurements/runtime_overlap_2026-12-02c.md`` (its second run also
measured a one-block-per-parameter "ring" design, slower, since removed).

Run: ``python3 benches/runtime_overlap_probe.py [--sizes 0.5 1 2 4] [--out DIR]`` on a GPU
machine; prints one table per size and writes ``DIR/overlap_probe.{md,json}``. ``--round3``:
only round 3's A/Bs (the copy graph's flag and pieces, the DMA alone, kinac's Python:
``benches/runtime_overlap_round3.py``), written to ``DIR/overlap_round3.{md,json}`` after
each size.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benches.runtime_modes import _copy_ms, _mlp_fns, _pipelined_ms, _weights  # noqa: E402
from benches.runtime_sweep import SWEEP, _stager  # noqa: E402

MiB = 1 << 20


def _us(fn: Callable[[], Any], n: int) -> float:
    """Median over 5 rounds of the host time per call of ``fn`` (us), after 3 warm-up calls."""
    for _ in range(3):
        fn()
    ts = []
    for _ in range(5):
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        ts.append((time.perf_counter() - t0) * 1e6 / n)
    return sorted(ts)[2]


class Instrument:
    """Host timers and GPU timing events around one stager's steady state (see the module
    docstring). ``on()`` installs the wrappers, ``off()`` removes them; :meth:`report` reads
    the events after a sync."""

    def __init__(self, st: Any, entry: Any, calls: int) -> None:
        from kinac.rt.cuda import staging_graphs
        from kinac.rt.cuda.device import Event, Stream

        self.st, self.entry, self.sg = st, entry, staging_graphs
        self.Event = Event
        self.idle = Stream()
        self.idle_arg = st.arg(self.idle)
        self.pool = [Event(timing=True) for _ in range(5 * calls + 8)]
        self.used = 0
        self.rows: list[dict[str, Any]] = []
        self.cur: dict[str, Any] = {}
        self.t = {"hot": 0.0, "fill": 0.0, "wait": 0.0, "launch": 0.0, "direct_wait": 0.0}
        self.count = {"calls": 0, "flag_miss": 0, "direct": 0}
        self.orig: dict[int, Any] = {}
        self.saved: dict[str, Any] = {}

    def _ev(self) -> Any:
        ev = self.pool[self.used % len(self.pool)]
        self.used += 1
        return ev

    def _rec(self, stream_arg: Any) -> Any:
        ev = self._ev()
        self.st.calls.record(self.st.calls.handle(ev.handle), stream_arg)
        return ev

    def on(self) -> None:
        st, pc = self.st, time.perf_counter
        sg = self.sg
        self.saved = {"fill": sg.fill, "calls": st.calls}
        fill0, hot0, bh0, calls0 = sg.fill, st.hot_call, st.begin_host, st.calls

        def fill(*a: Any) -> Any:
            t0 = pc()
            r = fill0(*a)
            self.t["fill"] += pc() - t0
            return r

        def hot(entry: Any, arrays: Any) -> Any:
            self._wrap_builts()  # (graphs built since: outside the timed part)
            self.cur = {}
            t0 = pc()
            r = hot0(entry, arrays)
            self.t["hot"] += pc() - t0
            self.count["calls"] += 1
            if "ca" in self.cur and "ka" in self.cur:
                self.rows.append(self.cur)
            return r

        def bh(t: Any) -> None:
            t0 = pc()
            bh0(t)
            self.t["wait"] += pc() - t0
            self.count["flag_miss"] += 1

        from kinac.rt.cuda.staging_calls import Calls

        def sync(ev: Any) -> int:
            t0 = pc()
            rc = calls0.sync(ev)
            self.t["direct_wait"] += pc() - t0
            self.count["direct"] += 1
            return int(rc)

        st.calls = Calls(
            calls0.native, (calls0.record, calls0.wait, sync, calls0.copy), calls0.query
        )
        sg.fill = fill
        st.hot_call = hot
        st.begin_host = bh
        self._wrap_builts()

    def _wrap_builts(self) -> None:
        st = self.st
        m = st.memo[0]
        plans = [p for p in (m.plans if m is not None else []) if p is not None]
        copies = [b for b in st._copy_built.values() if b is not None]
        copies += [b for b in st._direct_built.values() if b is not None]
        copies += [p[1] for p in plans if p[1] is not None]
        copy_ids = {id(b) for b in copies}
        builts = [x[1] for x in st._extra if isinstance(x, tuple)]  # every (api, Built)
        builts += copies + [p[2] for p in plans if p[2] is not None]
        for b in builts:
            if id(b) in self.orig:
                continue
            self.orig[id(b)] = (b, b.launch)
            b.launch = self._launcher(b.launch, id(b) in copy_ids)

    def _launcher(self, orig: Any, copy: bool) -> Any:
        pc = time.perf_counter

        def launch(ex: Any, stream: Any) -> int:
            cur = self.cur
            if copy:
                cur["sub"] = self._rec(self.idle_arg)
            cur["cb" if copy else "kb"] = self._rec(stream)
            t0 = pc()
            rc = orig(ex, stream)
            self.t["launch"] += pc() - t0
            cur["ca" if copy else "ka"] = self._rec(stream)
            return int(rc)

        return launch

    def off(self) -> None:
        st, s = self.st, self.saved
        if not s:
            return
        self.sg.fill = s["fill"]
        st.calls = s["calls"]
        for attr in ("hot_call", "begin_host"):
            st.__dict__.pop(attr, None)
        for b, launch in self.orig.values():
            b.launch = launch
        self.orig.clear()
        self.saved = {}

    def report(self, slots: int) -> dict[str, Any]:
        """Per-call medians from the events (ms on the GPU's clock, host times in us)."""
        rows = self.rows
        r: dict[str, Any] = {"instrumented_calls": self.count["calls"], "timed": len(rows)}
        n = max(1, self.count["calls"])
        for k, v in self.t.items():
            r[f"host_{k}_us"] = v * 1e6 / n
        r["flag_miss_per_call"] = self.count["flag_miss"] / n
        r["direct_waits_per_call"] = self.count["direct"] / n
        r["host_rest_us"] = (
            r["host_hot_us"] - r["host_fill_us"] - r["host_wait_us"] - r["host_launch_us"]
            - r["host_direct_wait_us"]
        )  # fmt: skip
        if len(rows) < slots + 4:
            return r
        base = rows[0]["sub"]
        t = [{k: base.elapsed_ms(v) for k, v in row.items()} for row in rows]
        period, comp, copy, lead, late_copy, late_host, copy_wait = [], [], [], [], 0, 0, []
        for k in range(slots + 1, len(t)):
            a, prev = t[k], t[k - 1]
            period.append(a["ka"] - prev["ka"])
            start = max(prev["ka"], a["ca"], a["sub"])
            comp.append(a["ka"] - start)
            freed = t[k - slots]["ka"]  # the compute that read this turn's device slot
            cstart = max(a["cb"], freed, a["sub"])
            copy.append(a["ca"] - cstart)
            copy_wait.append(max(0.0, freed - max(a["cb"], a["sub"])))
            lead.append(prev["ka"] - a["sub"])
            late_copy += a["ca"] > prev["ka"] + 1e-3
            late_host += a["sub"] > prev["ka"] - 0.002
        m = len(period)
        med = statistics.median
        r.update(
            gpu_period_us=med(period) * 1e3,
            compute_span_us=med(comp) * 1e3,
            copy_span_us=med(copy) * 1e3,
            copy_waits_for_consumed_us=med(copy_wait) * 1e3,
            host_lead_us=med(lead) * 1e3,
            pct_compute_waited_for_copy=100 * late_copy / m,
            pct_host_submit_within_2us_of_gpu_free=100 * late_host / m,
        )
        return r


def pipelined(call: Callable[[], Any], n: int) -> float:
    import torch

    return _pipelined_ms(call, n, torch.cuda.synchronize)


def same(fn: Any, x: Any, ws: list[Any], want: Any) -> bool:
    import numpy as np
    import torch

    return bool(np.array_equal(torch.from_dlpack(fn(x, *ws)).cpu().numpy(), want))


def fresh_stager(fn: Any, x: Any, ws: list[Any], direct_min: int = 0, pool: Any = None) -> Any:
    """Replace the host entry's stager by a new one (its pinned blocks from ``pool``; caller's
    pinned arrays below ``direct_min`` bytes copied); the entry forgets the addresses it saw
    (the new slots must not make the parameter *volatile*, which leaves the steady state: the
    first run of this probe fell into that); warm it (a general call per turn, then hot ones)."""
    import torch

    from kinac.rt.cuda.staging import HostStager

    st = _stager(fn, x.shape)
    entry = next(e for e in fn._entries.values() if e._stager is st)
    torch.cuda.synchronize()
    st.close()
    for seen in entry._seen:
        seen.clear()
    entry.volatile.clear()
    entry._stager = HostStager(entry._alloc, pool)
    entry._stager.direct_min = direct_min
    for _ in range(6):
        fn(x, *ws)
    torch.cuda.synchronize()
    return entry._stager


def timeline(fn: Any, x: Any, ws: list[Any], st: Any, n: int) -> dict[str, Any]:
    """``n`` pipelined calls with the stager instrumented; the report. The calls go through
    the entry (``entry(...)``: the instrumented ``st.hot_call``), not ``fn(...)``, whose memo
    calls the steady state bound (``staging_hot.bind``) past the instrumented method."""
    import torch

    entry = next(e for e in fn._entries.values() if e._stager is st)
    for _ in range(4):
        entry(x, *ws)
    torch.cuda.synchronize()
    ins = Instrument(st, entry, n)
    ins.on()
    try:
        t0 = time.perf_counter()
        for _ in range(n):
            entry(x, *ws)
        host = (time.perf_counter() - t0) * 1e6 / n
        torch.cuda.synchronize()
        wall = (time.perf_counter() - t0) * 1e6 / n
    finally:
        ins.off()
    r = ins.report(len(st.turns))
    r["loop_host_us"], r["loop_wall_us"] = host, wall
    return r


def micro(st: Any, entry: Any, n: int) -> dict[str, Any]:
    """The copy graph alone, the compute wrapper alone, the captured graph alone: host us per
    launch and GPU us per launch (events around ``n`` launches on the stream, synced)."""
    import torch

    from kinac.rt.cuda.device import Event

    r: dict[str, Any] = {}
    m = st.memo[0]
    if m is None or not st.use_graphs:
        return r
    plan = next((p for p in m.plans if p is not None and p[1] is not None), None)
    if plan is None:
        return r
    cap, cp, cw = plan[0], plan[1], plan[2]
    e0, e1 = Event(timing=True), Event(timing=True)
    rec = st.calls.record
    fast = cap.fast_launch
    from kinac.rt.cuda.staging_graphs import memcpy_params

    api, t0 = st.graphs, st.turns[0]  # the copy graph without its flag and *done* (a bound)
    g = api.create()
    w = api.wait(g, [], t0.consumed.handle)
    for _, p in m.host:
        cpn = api.memcpy(g, [w], memcpy_params(p.dev[0], False, st.block(p, 0).ptr, True, p.nbytes))
    api.record(g, [cpn], t0.copied.handle)
    bare_ex = api.instantiate(g)
    cases = {
        "copy_graph_no_flag": (lambda: api.launch(bare_ex, st.cs_arg), st.cs_arg),
        "copy_graph": (lambda: cp.launch(cp.exec, st.cs_arg), st.cs_arg),
        "compute_wrapper": (lambda: cw.launch(cw.exec, m.stream), m.stream),
        "captured_graph": (lambda: fast[0](fast[1], entry.stream.cvp), m.stream),
    }
    for name, (fn, s) in cases.items():
        torch.cuda.synchronize()
        r[f"{name}_host_us"] = _us(fn, n)
        torch.cuda.synchronize()
        rec(st.calls.handle(e0.handle), s)
        for _ in range(n):
            fn()
        rec(st.calls.handle(e1.handle), s)
        e1.synchronize()
        r[f"{name}_gpu_us"] = e0.elapsed_ms(e1) * 1e3 / n
    torch.cuda.synchronize()
    for t in st.turns:  # the launches above left the flags set: the stager's state as it was
        t.copy_pending = t.flagged = False
    api.destroy(g, bare_ex)
    e0.close()
    e1.close()
    return r


def memcpy_rows(st: Any, x: Any, n: int) -> dict[str, Any]:
    """The staging memcpy alone: into one block (as the sweep measures it), into the stager's
    blocks in turn (no GPU), with streaming stores (32 / 64 bytes), and from the copier's
    threshold on with its threads (cached and streaming)."""
    import numpy as np

    from kinac.rt.cuda.pinned import PinnedBuffer, default_pool

    r: dict[str, Any] = {}
    blk = PinnedBuffer(default_pool(), x.shape, x.dtype)
    r["memcpy_one_block_us"] = _us(lambda: np.copyto(blk.array, x), n)
    p = next(iter(st.params.values()))
    blocks = [st.block(p, j).array for j in range(len(st.turns))]
    k = [0]

    def alt() -> None:
        np.copyto(blocks[k[0] % len(blocks)], x)
        k[0] += 1

    r["memcpy_alternating_blocks_us"] = _us(alt, n)

    from kinac.rt.cuda.staging_nt import stream_copier

    one = stream_copier(blk.array)
    if one is not None:
        r["stream_one_block_us"] = _us(lambda: one(blk.array, x), n)
        alts = [stream_copier(b) for b in blocks]

        def alt_nt() -> None:
            j = k[0] % len(blocks)
            alts[j](blocks[j], x)  # type: ignore[misc]
            k[0] += 1

        r["stream_alternating_blocks_us"] = _us(alt_nt, n)
        alts64 = [stream_copier(b, width=64) for b in blocks]

        def alt_nt64() -> None:
            j = k[0] % len(blocks)
            alts64[j](blocks[j], x)  # type: ignore[misc]
            k[0] += 1

        r["stream64_alternating_blocks_us"] = _us(alt_nt64, n)
    if x.nbytes >= st.copier.min_bytes and st.copier.workers:  # the copier's threads
        from kinac.rt.cuda.staging_nt import raw_copy

        cp = st.copier

        def alt_threads() -> None:
            cp(blocks[k[0] % len(blocks)], x)
            k[0] += 1

        r["threads_alternating_blocks_us"] = _us(alt_threads, n)
        raw = raw_copy()
        if raw is not None:
            sc = cp.streaming(raw)

            def alt_threads_nt() -> None:
                sc(blocks[k[0] % len(blocks)], x)
                k[0] += 1

            r["threads_stream_alternating_blocks_us"] = _us(alt_threads_nt, n)
    r["memcpy_GBps"] = x.nbytes / r["memcpy_one_block_us"] / 1e3
    blk.free()
    return r


def probe(fn: Any, size: tuple[int, int, int, int], quick: bool) -> dict[str, Any]:
    """Every number of one size; each step guarded (a failing step is reported, the rest run)."""
    import traceback

    import numpy as np
    import torch

    from kinac.rt.cuda import staging_graphs
    from kinac.rt.cuda.pinned import pinned_empty
    from kinac.rt.cuda.staging_copy import default_copier

    b, s, d, f = size
    ws = _weights(torch, d, f)
    x = np.random.default_rng(0).standard_normal((b, s, d)).astype(np.float32)
    x_dev = torch.from_numpy(x).cuda()
    want = torch.from_dlpack(fn(x_dev, *ws)).cpu().numpy()
    big = x.nbytes >= 4 * MiB
    n = (15 if big else 40) if quick else (30 if big else 80)
    r: dict[str, Any] = {"shape": [b, s, d, f], "mib": x.nbytes / MiB, "errors": []}
    ok: dict[str, bool] = {}
    v: dict[str, float] = {}
    r["dev_ms"] = pipelined(lambda: fn(x_dev, *ws), n)
    r["dma_us"] = _copy_ms(torch, x.nbytes) * 1e3
    ok["default"] = same(fn, x, ws, want)
    for _ in range(6):
        fn(x, *ws)
    st = _stager(fn, x.shape)
    entry = next(e for e in fn._entries.values() if e._stager is st)
    buf = pinned_empty(x.shape, x.dtype)
    buf[...] = x
    xt = torch.from_numpy(x).pin_memory()
    box = [st]
    stream_default = (st.stream_min, st.stream_width)
    r["stream_min_default"] = st.stream_min
    rot = [x, *(x + k for k in range(1, 4))]
    it = [0]

    def fresh() -> Any:
        it[0] += 1
        return fn(rot[it[0] % 4], *ws)

    def guard(name: str, step: Callable[[], None]) -> None:
        try:
            step()
        except Exception:  # noqa: BLE001 - reported, the other steps still run
            r["errors"].append(f"{name}: {traceback.format_exc(limit=4)}")
            print(f"step {name} failed:\n{traceback.format_exc()}", flush=True)
            try:
                torch.cuda.synchronize()
                box[0].use_graphs = True
                box[0].copier = default_copier()
                box[0].memo[0] = None
                box[0].stream_min, box[0].stream_width = stream_default
                box[0].compute_wrapper = True
            except Exception:  # noqa: BLE001
                pass

    def base() -> None:
        v["default (this tree's steady state)"] = pipelined(lambda: fn(x, *ws), n)
        r["tl_graphs"] = timeline(fn, x, ws, st, n)
        fill0 = staging_graphs.fill  # the host floor: the memcpy skipped (the block holds x)
        staging_graphs.fill = lambda *a: None
        try:
            v["graphs, memcpy skipped (bound)"] = pipelined(lambda: fn(x, *ws), n)
        finally:
            staging_graphs.fill = fill0

    def lever_rows() -> None:  # round 2: streaming stores, one launch, kinac's Python
        from benches.runtime_overlap_levers import levers

        lv, lok, notes = levers(fn, x, ws, st, entry, n, want, pipelined)
        v.update({k: t / 1e3 for k, t in lv.items()})
        ok.update(lok)
        r["levers"] = notes

    def streaming_rows() -> None:
        v["default, 4 x in rotation"] = pipelined(fresh, n)
        st.stream_min = 1 << 62
        st.memo[0] = None
        try:
            for _ in range(4):
                fn(x, *ws)
            r["tl_cached_copy"] = timeline(fn, x, ws, st, n)
            v["cached copy, 4 x in rotation"] = pipelined(fresh, n)
        finally:
            st.stream_min, st.stream_width = stream_default
            st.memo[0] = None

    def pinned() -> None:
        st = box[0] = fresh_stager(fn, x, ws, 0)
        ok["pinned in place"] = same(fn, buf, ws, want)
        ok["pin_memory in place"] = same(fn, xt, ws, want)
        v["pinned_empty x, DMA'd in place, waited"] = pipelined(lambda: fn(buf, *ws), n)
        v["pin_memory() x, DMA'd in place, waited"] = pipelined(lambda: fn(xt, *ws), n)
        r["tl_pinned_inplace"] = timeline(fn, buf, ws, st, n)
        v["numpy x again (default, fresh stager)"] = pipelined(lambda: fn(x, *ws), n)

    guard("base", base)
    guard("micro", lambda: r.__setitem__("micro", micro(st, entry, n)))
    guard("levers", lever_rows)
    guard("streaming", streaming_rows)
    guard("memcpy", lambda: r.__setitem__("memcpy", memcpy_rows(st, x, n)))
    guard("pinned", pinned)
    r["dev_ms_again"] = pipelined(lambda: fn(x_dev, *ws), n)
    r["variants_ms"] = v
    r["ratios"] = {k: t / r["dev_ms"] for k, t in v.items()}
    r["bit_identical"] = ok
    return r


def probe3(fn: Any, size: tuple[int, int, int, int], quick: bool, dma: bool) -> dict[str, Any]:
    """Round 3 (``benches/runtime_overlap_round3.py``) at one size."""
    import numpy as np
    import torch

    from benches.runtime_overlap_round3 import round3

    b, s, d, f = size
    ws = _weights(torch, d, f)
    x = np.random.default_rng(0).standard_normal((b, s, d)).astype(np.float32)
    x_dev = torch.from_numpy(x).cuda()
    want = torch.from_dlpack(fn(x_dev, *ws)).cpu().numpy()
    big = x.nbytes >= 4 * MiB
    n = (15 if big else 40) if quick else (30 if big else 80)
    for _ in range(6):
        fn(x, *ws)
    r = round3(fn, x, x_dev, ws, want, n, pipelined, fresh_stager, dma)
    r.update(shape=[b, s, d, f], mib=x.nbytes / MiB, dma_us=_copy_ms(torch, x.nbytes) * 1e3)
    return r


def table3(res: list[dict[str, Any]]) -> str:
    out = []
    for r in res:
        b, s, d, f = r["shape"]
        out.append(f"\n#### x = {r['mib']:g} MiB (MLP [{b},{s},{d}] hidden {f})\n")
        out.append(f"device x pipelined: {r['dev_ms'] * 1e3:.1f} us/call (again at the end: "
                   f"{r['dev_ms_again'] * 1e3:.1f}); DMA alone {r['dma_us']:.1f} us; memcpy "
                   f"into one block {r.get('memcpy_one_block_us', float('nan')):.1f} us; "
                   f"defaults {r['defaults']}\n\nbit-identical: {r.get('bit_identical')}\n\n"
                   f"paths (first round): {r.get('paths')}\n")  # fmt: skip
        out.append("| variant | us/call | / device x |\n|---|---|---|")
        for k, t in r["variants_ms"].items():
            out.append(f"| {k} | {t * 1e3:.1f} | {r['ratios'][k]:.2f}x |")
        if "dma" in r:
            out.append("\ndma: " + ", ".join(f"{k}={val:.1f}" for k, val in r["dma"].items()))
        for e in r["errors"]:
            out.append(f"\nERROR {e}")
    return "\n".join(out) + "\n"


def table(res: list[dict[str, Any]]) -> str:
    out = []
    for r in res:
        b, s, d, f = r["shape"]
        out.append(f"\n### x = {r['mib']:g} MiB (MLP [{b},{s},{d}] hidden {f})\n")
        out.append(f"device x pipelined: {r['dev_ms'] * 1e3:.1f} us/call (again at the end: "
                   f"{r['dev_ms_again'] * 1e3:.1f}); DMA alone "
                   f"{r['dma_us']:.1f} us; bit-identical: {r['bit_identical']}\n")  # fmt: skip
        out.append("| variant | us/call | / device x |\n|---|---|---|")
        for k, t in r["variants_ms"].items():
            out.append(f"| {k} | {t * 1e3:.1f} | {r['ratios'][k]:.2f}x |")
        for key in [k for k in r if k.startswith("tl_")] + ["micro", "memcpy", "levers"]:
            vals = ", ".join(f"{k}={val:.1f}" if isinstance(val, float) else f"{k}={val}"
                             for k, val in r.get(key, {}).items())  # fmt: skip
            out.append(f"\n{key}: {vals}")
        for e in r["errors"]:
            out.append(f"\nERROR {e}")
    return "\n".join(out) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", type=float, nargs="*", default=[0.5, 1, 2, 4])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--out", default=".")
    ap.add_argument("--round3", action="store_true", help="round 3's A/Bs only")
    a = ap.parse_args()
    by_mib = {b * s * d * 4 / MiB: (b, s, d, f) for b, s, d, f in SWEEP}
    res = []
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        fn, _ = _mlp_fns(Path(tmp))
        for k, mib in enumerate(a.sizes if a.round3 else ()):
            t0 = time.perf_counter()
            try:
                r = probe3(fn, by_mib[mib], a.quick, dma=k == 0)
            except Exception:  # noqa: BLE001 - the other sizes still run
                import traceback

                print(f"size {mib} MiB failed: {traceback.format_exc()}", flush=True)
                continue
            r["wall_s"] = time.perf_counter() - t0
            res.append(r)
            print(table3([r]), flush=True)
            (out / "overlap_round3.md").write_text(table3(res), encoding="utf-8")
            (out / "overlap_round3.json").write_text(json.dumps(res, indent=1), encoding="utf-8")
        for mib in () if a.round3 else a.sizes:
            t0 = time.perf_counter()
            try:
                r = probe(fn, by_mib[mib], a.quick)
            except Exception as e:  # noqa: BLE001 - the other sizes still run
                print(f"size {mib} MiB failed: {e!r}", flush=True)
                continue
            r["wall_s"] = time.perf_counter() - t0
            res.append(r)
            print(table([r]), flush=True)
    if a.round3:
        return
    (out / "overlap_probe.md").write_text(table(res), encoding="utf-8")
    (out / "overlap_probe.json").write_text(json.dumps(res, indent=1), encoding="utf-8")


if __name__ == "__main__":
    main()
