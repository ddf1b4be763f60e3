"""Latency of one small call with a sync (issue 14: the small bf16 block within 0.03 ms), each
lever on and off, in ONE process on one GPU.

    PYTHONPATH=. python3 benches/latency_probe.py --out DIR     (a GPU; about a minute)

The small bf16 transformer block (B4 S128 D256 H4 KV2) through the public API:
``kinac.compile(workspaces/transformer, "block", target="cuda", **opts)`` called
``f(H, KV, *arrays)`` with torch CUDA tensors, as ``benches/gpu_api_blocks.py`` (the headline)
calls it. Variants (entry options, one compiled callable each, same process, rounds interleaved):

- ``base``: as today; ``pdl``: programmatic dependent launch for kinac's own kernels inside the
  entry's CUDA graph (``pdl=True``); ``split``: the grouped ``pointers`` GEMMs issued as one
  ``cublasGemmEx`` per member (``split_grouped=True``: no pointer arrays, no memset node);
  ``split-lt``: the same with ``cublasLtMatmul`` (cuBLASLt's first heuristic algorithm);
  ``pdl+split``, ``pdl+split-lt``.

Per variant: per call with a sync (``torch.cuda.synchronize()`` after each call: the headline's
method), pipelined (n calls, one sync), the GPU time per call (CUDA events, 20 back to back),
one call's GPU span from an idle GPU (events around one call), the host time of the call alone
(a burst of calls while the GPU is busy), and whether its output is bit-identical to ``base``'s.
Then the sync itself: the same call followed by each way to wait (torch's device sync,
``f.synchronize()``, ``cuCtxSynchronize``, ``cuStreamSynchronize`` on the legacy stream, an
event, a spin on ``cuStreamQuery``), what each wait costs on an idle GPU, and the host cost of
the call path's layers (API callable, entry, bare ``cuGraphLaunch``). Writes
``latency_probe.md`` and ``latency_probe.json`` to ``--out`` and prints the markdown.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import statistics
import sys
import time
import traceback
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

LINES: list[str] = []
RES: dict[str, Any] = {}
VARIANTS: dict[str, dict[str, Any]] = {
    "base": {"pdl": False},
    "pdl": {"pdl": True},
    "split": {"pdl": False, "split_grouped": True},
    "split-lt": {"pdl": False, "split_grouped": "lt"},
    "pdl+split": {"pdl": True, "split_grouped": True},
    "pdl+split-lt": {"pdl": True, "split_grouped": "lt"},
}
# --order: the hot call's order (kinac.rt.hot.LAUNCH_FIRST, read when a call is bound), today's
# defaults otherwise; "base" is the order before 2026-12-02e (every check before the launch)
ORDERS: dict[str, dict[str, Any]] = {
    "base": {"launch_first": False},
    "launch-first": {"launch_first": True},
}


def sunk_emit(lines: list[str], sink: list[Callable[[str], None]]) -> Callable[..., None]:
    """A probe's ``emit``: a line to ``sink[0]`` while a caller has put its own emit there
    (``benches/gpu.py``'s sections run a probe part into its report), else kept in ``lines``
    and printed. Shared by the GPU probes (``benches/small_gemm_probe.py``)."""

    def emit(line: str = "") -> None:
        if sink:
            sink[0](line)
            return
        lines.append(line)
        print(line, flush=True)

    return emit


SINK: list[Callable[[str], None]] = []  # benches/gpu.py's own emit (latency_levers)
emit = sunk_emit(LINES, SINK)


def median_rounds(fn: Callable[[], float], rounds: int) -> float:
    return statistics.median(fn() for _ in range(rounds))


def sync_each_us(call: Callable[[], Any], sync: Callable[[], Any], n: int) -> float:
    """Wall time per call (us), a wait after each call."""
    t0 = time.perf_counter()
    for _ in range(n):
        call()
        sync()
    return (time.perf_counter() - t0) / n * 1e6


def pipelined_us(call: Callable[[], Any], sync: Callable[[], Any], n: int) -> float:
    """Wall time per call (us): ``n`` calls, one wait."""
    sync()
    t0 = time.perf_counter()
    for _ in range(n):
        call()
    sync()
    return (time.perf_counter() - t0) / n * 1e6


def host_us(call: Callable[[], Any], sync: Callable[[], Any], n: int = 20) -> float:
    """Host time per call (us) of a burst of ``n`` calls (the GPU busy, the queue far from
    full); the wait after the burst is not timed."""
    sync()
    t0 = time.perf_counter()
    for _ in range(n):
        call()
    t = time.perf_counter() - t0
    sync()
    return t / n * 1e6


def events_us(torch: Any, call: Callable[[], Any], n: int = 20) -> float:
    """GPU time per call (us), CUDA events around ``n`` back-to-back calls."""
    e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.cuda.synchronize()
    e0.record()
    for _ in range(n):
        call()
    e1.record()
    e1.synchronize()
    return e0.elapsed_time(e1) / n * 1e3


def idle_span_us(torch: Any, call: Callable[[], Any]) -> float:
    """One call's GPU span from an idle GPU (us): events recorded just before and after it."""
    e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.cuda.synchronize()
    e0.record()
    call()
    e1.record()
    e1.synchronize()
    return e0.elapsed_time(e1) * 1e3


def libcuda(name: str) -> Any:
    from kinac.rt.cuda.kernel_graph import libcuda_fn

    return libcuda_fn(name)


def graph_edges(graph: Any) -> str:
    """Edges of a captured graph by type (``cuGraphGetEdges_v2``: default / programmatic /
    launch-order), or why they could not be read."""
    try:
        try:
            f = libcuda("cuGraphGetEdges_v2")
        except AttributeError:  # CUDA 13 drivers: the plain name has the edge data
            f = libcuda("cuGraphGetEdges")
        g = ctypes.c_void_p(int(graph._graph))
        n = ctypes.c_size_t(0)
        rc = f(g, None, None, None, ctypes.byref(n))
        if rc:
            return f"cuGraphGetEdges_v2 rc {rc}"
        k = n.value
        fr, to = (ctypes.c_void_p * max(k, 1))(), (ctypes.c_void_p * max(k, 1))()
        data = (ctypes.c_uint8 * (8 * max(k, 1)))()  # CUgraphEdgeData: from_port, to_port, type
        rc = f(g, fr, to, data, ctypes.byref(n))
        if rc:
            return f"cuGraphGetEdges_v2 rc {rc}"
        kinds = [(data[8 * i], data[8 * i + 1], data[8 * i + 2]) for i in range(n.value)]
        prog = sum(1 for fp, _, t in kinds if t == 1 or fp in (1, 2))
        return f"{n.value} edges, {prog} programmatic (from_port, to_port, type): {kinds}"
    except Exception as e:  # noqa: BLE001 - a diagnostic only
        return f"edges not read: {type(e).__name__}: {e}"


def build(torch: Any, ins: list[Any], h: int, kv: int, variants: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:  # fmt: skip
    """One compiled callable per variant: first call, output, graph nodes and edges."""
    import kinac

    out: dict[str, dict[str, Any]] = {}
    from kinac.rt import hot

    for name, opts in variants.items():
        was = hot.LAUNCH_FIRST
        try:
            t0 = time.perf_counter()
            opts = dict(opts)
            hot.LAUNCH_FIRST = opts.pop("launch_first", was)  # (the hot call binds it below)
            f = kinac.compile(ROOT / "workspaces/transformer", "block", target="cuda", **opts)
            y = torch.from_dlpack(f(h, kv, *ins)).clone()
            for _ in range(3):
                f(h, kv, *ins)
            torch.cuda.synchronize()
            hot.LAUNCH_FIRST = was
            entry = next(iter(f._entries.values()))
            graphs = [g for _, _, g in entry._bound.values() if g is not None]
            g = graphs[-1] if graphs else None
            pdl_kernels = sorted(k for k, v in entry.kernels.items() if getattr(v, "waits", False))
            out[name] = {
                "f": f,
                "entry": entry,
                "y": y,
                "first_call_s": time.perf_counter() - t0,
                "nodes": g.nodes() if g is not None else ["(no graph)"],
                "edges": graph_edges(g) if g is not None else "",
                "captured": bool(g is not None and g.captured),
                "waiting_kernels": pdl_kernels,
                "bound_forms": list(getattr(entry.blas, "bound_forms", ())),
            }
        except Exception:  # noqa: BLE001 - the other variants are still measured
            emit(f"\n**variant {name} failed:**\n```\n{traceback.format_exc()[-2500:]}\n```")
        finally:
            hot.LAUNCH_FIRST = was
        memo = out[name]["f"]._memo[0] if name in out else None
        if memo is not None:
            out[name]["launch_first"] = bool(memo[9])
    return out


def report_writer(
    out_dir: str, stem: str, lines: list[str], res: dict[str, Any]
) -> Callable[[], None]:
    """Makes ``out_dir`` and returns what (re)writes a probe's report there: ``stem.md`` (the
    emitted ``lines``) and ``stem.json`` (``res``), UTF-8. The probes call it after each part, so
    a part that crashes keeps what the earlier ones measured (shared by the GPU probes)."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)

    def write() -> None:
        (out / f"{stem}.md").write_text("\n".join(lines) + "\n", encoding="utf-8")
        (out / f"{stem}.json").write_text(json.dumps(res, indent=1, default=str), encoding="utf-8")  # fmt: skip

    return write


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="latency-out")
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--n", type=int, default=200)
    ap.add_argument("--big", action="store_true", help="also the 45M block, PDL off and on")
    ap.add_argument("--order", action="store_true", help="the hot call's order A/B instead")
    ap.add_argument("--headline", action="store_true", help="only benches/gpu.py's small bf16 row")
    ap.add_argument(
        "--stages", action="store_true", help="the synced call as PyTorch work piles up"
    )
    a = ap.parse_args()
    write = report_writer(a.out, "latency_probe", LINES, RES)
    if a.headline:
        return headline(write)
    if a.stages:
        return stages(write)

    return probe(ORDERS if a.order else VARIANTS, a.rounds, a.n, write, big=a.big)


def headline(write: Callable[[], None]) -> int:
    """``benches/gpu.py``'s headline row of the small bf16 block alone (``gpu_api_blocks``:
    kinac through ``kinac.compile``, eager SDPA, reduce-overhead; the 1 s warm-up; the cold
    figure measured before it), for a short GPU call."""
    from gpu_api_blocks import SMALL as S
    from gpu_api_blocks import api_blocks_rows

    RES["headline"] = rows = api_blocks_rows(
        emit, [("small B4 S128 D256 bf16", S, "bf16", {"sync_ms": 0.03})], False
    )
    write()
    return 0 if rows else 1


def stages(write: Callable[[], None]) -> int:
    """Why the headline's process reads ~4 us more per synced call than this probe's (10:20
    UTC call: 31.8 against 27.7 us, same code and host): the small bf16 block's synced call in
    one process as it runs what the headline runs beside it (eager SDPA, then
    ``torch.compile(mode="reduce-overhead")``), then with the collector frozen and off. At each
    point: 0.5 s of calls, then per call + ``torch.cuda.synchronize()`` (median of 9 rounds of
    200), the host time of a burst, the idle sync alone, live threads and tracked objects."""
    import gc
    import threading

    import torch
    from gpu_api_blocks import block_sdpa
    from gpu_refs import SMALL, block_inputs

    import kinac

    h, kv = SMALL["h"], SMALL["kv"]
    ins = block_inputs(SMALL, torch.bfloat16)
    f = kinac.compile(ROOT / "workspaces/transformer", "block", target="cuda")

    def call() -> Any:
        return f(h, kv, *ins)

    sync = torch.cuda.synchronize
    emit("# benches/latency_probe.py --stages: the synced call as PyTorch work piles up\n")
    emit(f"{torch.cuda.get_device_name()}, torch {torch.__version__}, {time.strftime('%Y-%m-%d %H:%M:%S UTC', time.gmtime())}\n")  # fmt: skip
    emit("| point | per call + torch sync (us) | min..max of rounds | host burst (us) | idle torch sync (us) | threads | gc objects |")  # fmt: skip
    emit("|---|---|---|---|---|---|---|")
    RES["stages"] = {}

    def point(name: str) -> None:
        end = time.perf_counter() + 0.5
        while time.perf_counter() < end:
            sync_each_us(call, sync, 50)
        xs = [sync_each_us(call, sync, 200) for _ in range(9)]
        hb = statistics.median(host_us(call, sync) for _ in range(9))
        t0 = time.perf_counter()
        for _ in range(200):
            sync()
        idle = (time.perf_counter() - t0) / 200 * 1e6
        m = statistics.median(xs)

        def nop(a: Any) -> Any:
            return a

        t0 = time.perf_counter()
        for i in range(20000):
            nop(i)
        frame = (time.perf_counter() - t0) / 20000 * 1e9
        mon = getattr(sys, "monitoring", None)
        tools = [n for n in (mon.get_tool(i) for i in range(6)) if n] if mon is not None else []
        row = {"sync_us": m, "min": min(xs), "max": max(xs), "host_us": hb, "idle_sync_us": idle,
               "threads": threading.active_count(), "gc_objects": len(gc.get_objects()),
               "py_call_ns": frame, "trace": repr(sys.gettrace()), "profile": repr(sys.getprofile()),
               "monitoring_tools": tools, "thread_names": [t.name for t in threading.enumerate()]}  # fmt: skip
        emit(f"  ({name}: a Python call {frame:.0f} ns; trace {row['trace']}, profile {row['profile']}, sys.monitoring tools {tools}, threads {row['thread_names']})")  # fmt: skip
        RES["stages"][name] = row
        emit(f"| {name} | {m:.1f} | {min(xs):.1f}..{max(xs):.1f} | {hb:.2f} | {idle:.2f} | {row['threads']} | {row['gc_objects']} |")  # fmt: skip
        write()

    for _ in range(4):
        call()
    point("kinac alone")
    eager = lambda: block_sdpa(*ins, h, kv)  # noqa: E731
    for _ in range(50):
        eager()
    sync()
    point("after eager SDPA (50 calls)")
    ro = torch.compile(lambda *a: block_sdpa(*a, h, kv), mode="reduce-overhead")
    for _ in range(3):
        ro(*ins)
    sync()
    point("after torch.compile reduce-overhead (3 calls)")
    for _ in range(200):
        ro(*ins)
        sync()
    point("after 200 more reduce-overhead calls")
    gc.collect()
    gc.freeze()
    point("gc.collect() + gc.freeze()")
    gc.disable()
    point("gc disabled")
    gc.enable()
    return 0


def latency_levers(emit_to: Callable[[str], None], results: dict[str, Any]) -> None:
    """``benches/gpu.py``'s section: the probe with PDL off and on only, fewer rounds."""
    SINK[:] = [emit_to]
    RES.clear()
    results["latency_levers"] = RES
    try:
        emit("\n## Latency levers of the small bf16 block (benches/latency_probe.py, short)\n")
        probe({k: VARIANTS[k] for k in ("base", "pdl")}, 7, 100, lambda: None)
    finally:
        SINK.clear()


def probe(variants: dict[str, dict[str, Any]], rounds: int, n: int, write: Callable[[], None], big: bool = False) -> int:  # fmt: skip
    """Measure ``variants`` (see the module docstring); ``write`` saves what is measured so far."""
    import torch
    from gpu_refs import SMALL, block_inputs, block_torch, causal_mask, rel_l2

    a = types.SimpleNamespace(rounds=rounds, n=n)
    h, kv = SMALL["h"], SMALL["kv"]
    ins = block_inputs(SMALL, torch.bfloat16)
    emit("# benches/latency_probe.py: the small bf16 block's latency per call, each lever\n")
    emit(f"{torch.cuda.get_device_name()}, torch {torch.__version__}, {time.strftime('%Y-%m-%d %H:%M:%S UTC', time.gmtime())}\n")  # fmt: skip
    try:  # spin (0x1), yield (0x2) or blocking sync (0x4); 0: auto (spin while cores > contexts)
        torch.cuda.synchronize()
        flags = ctypes.c_uint(0)
        rc = libcuda("cuCtxGetFlags")(ctypes.byref(flags))
        RES["ctx_flags"] = flags.value if rc == 0 else f"rc {rc}"
        emit(f"Context scheduling flags (cuCtxGetFlags): {RES['ctx_flags']}\n")
    except Exception as e:  # noqa: BLE001 - a diagnostic only
        emit(f"Context flags not read: {e}\n")
    vs = build(torch, ins, h, kv, variants)
    if "base" not in vs:
        write()
        return 1
    ref64 = block_torch(*(t.double() for t in ins), h, kv, causal_mask(SMALL["s"], torch.float64, "cuda"))  # fmt: skip
    emit("## Variants\n")
    emit("| variant | first call (s) | bit-identical to base | rel L2 vs f64 | kernels launched with PDL | grouped GEMMs as bound | graph nodes | edges |")  # fmt: skip
    emit("|---|---|---|---|---|---|---|---|")
    base_y = vs["base"]["y"]
    for name, v in vs.items():
        same = bool(torch.equal(v["y"], base_y))
        v["identical"] = same
        err = rel_l2(v["y"], ref64)
        RES.setdefault("variants", {})[name] = {k: x for k, x in v.items() if k not in ("f", "entry", "y")} | {"err": err}  # fmt: skip
        emit(f"| {name} | {v['first_call_s']:.2f} | {same} | {err:.2e} | {len(v['waiting_kernels']) if v['entry'].pdl else 0} | "
             f"{', '.join(v['bound_forms']) or '-'} | {len(v['nodes']) - 1}: {'; '.join(v['nodes'])} | {v['edges']} |")  # fmt: skip
    from kinac.rt.cuda.kernel_graph import PDL_REFUSED

    RES["pdl_refused"] = list(PDL_REFUSED)
    emit(f"\nProgrammatic launches the driver refused (CUresult each; then plain): {PDL_REFUSED or 'none'}")  # fmt: skip
    write()

    # ---- per call with a sync, pipelined, GPU time, host time: variants interleaved ----------
    sync = torch.cuda.synchronize
    cols = ("sync_us", "pipe_us", "events_us", "idle_span_us", "host_us")
    samples: dict[str, dict[str, list[float]]] = {n: {c: [] for c in cols} for n in vs}
    calls = {n: (lambda f=v["f"]: f(h, kv, *ins)) for n, v in vs.items()}
    for c in calls.values():  # warm
        sync_each_us(c, sync, 50)
    for _ in range(a.rounds):
        for name, call in calls.items():
            s = samples[name]
            s["sync_us"].append(sync_each_us(call, sync, a.n))
            s["pipe_us"].append(pipelined_us(call, sync, a.n))
            s["events_us"].append(events_us(torch, call))
            s["idle_span_us"].append(statistics.median(idle_span_us(torch, call) for _ in range(5)))
            s["host_us"].append(statistics.median(host_us(call, sync) for _ in range(5)))
    emit("\n## Per call, each variant (us; median of rounds, variants interleaved)\n")
    emit("| variant | per call with torch.cuda.synchronize() | pipelined | GPU per call (events, 20 back to back) | one call's GPU span from idle (events) | host time of the call (burst) |")  # fmt: skip
    emit("|---|---|---|---|---|---|")
    med: dict[str, dict[str, float]] = {}
    for name, s in samples.items():
        med[name] = {c: statistics.median(x) for c, x in s.items()}
        m = med[name]
        emit(f"| {name} | {m['sync_us']:.1f} | {m['pipe_us']:.1f} | {m['events_us']:.1f} | {m['idle_span_us']:.1f} | {m['host_us']:.2f} |")  # fmt: skip
    RES["per_call"] = med
    RES["samples"] = samples
    write()

    # ---- the sync: each way to wait, after the base call and after the best variant --------
    best = min(med, key=lambda n: med[n]["sync_us"])
    stream_sync, ctx_sync, query = (libcuda(n) for n in ("cuStreamSynchronize", "cuCtxSynchronize", "cuStreamQuery"))  # fmt: skip
    s0 = ctypes.c_void_p(0)

    def spin() -> None:
        while query(s0) == 600:  # CUDA_ERROR_NOT_READY
            pass

    def event_wait() -> None:
        e = torch.cuda.Event()
        e.record()
        e.synchronize()

    waits: dict[str, Callable[[], Any]] = {
        "torch.cuda.synchronize()": torch.cuda.synchronize,
        "f.synchronize() (new)": vs[best]["f"].synchronize,
        "cuStreamSynchronize(legacy stream), PyDLL": lambda: stream_sync(s0),
        "cuCtxSynchronize, PyDLL": lambda: ctx_sync(),
        "torch event record + synchronize": event_wait,
        "spin on cuStreamQuery(legacy stream)": spin,
    }
    wsamp: dict[str, dict[str, list[float]]] = {}
    for _ in range(a.rounds):
        for wname, w in waits.items():
            for vname in dict.fromkeys(("base", best)):
                call = calls[vname]
                d = wsamp.setdefault(wname, {"base": [], "best": [], "idle": []})
                d["base" if vname == "base" else "best"].append(sync_each_us(call, w, a.n))
                if vname == best and best == "base":
                    d["best"].append(d["base"][-1])
            t0 = time.perf_counter()
            for _ in range(a.n):
                w()
            wsamp[wname]["idle"].append((time.perf_counter() - t0) / a.n * 1e6)
    emit(
        f"\n## The sync: per call with each way to wait (us), base and the best variant ({best})\n"
    )
    emit("| wait | base: call + wait | " + best + ": call + wait | the wait alone, GPU idle |")
    emit("|---|---|---|---|")
    RES["waits"] = {}
    for wname, d in wsamp.items():
        m = {k: statistics.median(x) for k, x in d.items() if x}
        RES["waits"][wname] = m
        emit(f"| {wname} | {m['base']:.1f} | {m.get('best', m['base']):.1f} | {m['idle']:.2f} |")
    write()

    # ---- host cost of the call's layers ------------------------------------------------------
    try:
        e = vs[best]["entry"]
        f = vs[best]["f"]
        g = [x for _, _, x in e._bound.values() if x is not None][-1]
        fast = g.fast_launch
        from kinac.rt.cuda.device import Stream

        nb = Stream()
        layers = {
            "f(H, KV, *arrays): kinac.compile's callable (hot path)": lambda: f(h, kv, *ins),
            "f(*arrays, H=, KV=): dims by keyword": lambda: f(*ins, H=h, KV=kv),
            "entry(*arrays): the GpuEntry directly": lambda: e(*ins),
            "bare cuGraphLaunch of the entry's graph (PyDLL)": lambda: fast[0](fast[1], e.stream.cvp),
        }  # fmt: skip
        emit("\n## Host cost of the call's layers (us per call, burst of 20, GPU busy)\n")
        emit("| layer | host us |")
        emit("|---|---|")
        RES["layers"] = {}
        for lname, fn in layers.items():
            v = median_rounds(lambda fn=fn: statistics.median(host_us(fn, sync) for _ in range(5)), a.rounds)  # fmt: skip
            RES["layers"][lname] = v
            emit(f"| {lname} | {v:.2f} |")
        # the bare graph's round trip on the legacy stream vs a non-blocking stream
        rt = {
            "bare cuGraphLaunch + cuStreamSynchronize, legacy stream": (
                lambda: fast[0](fast[1], s0), lambda: stream_sync(s0)),
            "bare cuGraphLaunch + cuStreamSynchronize, a non-blocking stream": (
                lambda: fast[0](fast[1], nb.cvp), lambda: stream_sync(nb.cvp)),
        }  # fmt: skip
        emit("\n| round trip (no Python of kinac's call path) | us per call |")
        emit("|---|---|")
        for rname, (c, w) in rt.items():
            v = median_rounds(lambda c=c, w=w: sync_each_us(c, w, a.n), a.rounds)
            RES["layers"][rname] = v
            emit(f"| {rname} | {v:.1f} |")
        torch.cuda.synchronize()
    except Exception:  # noqa: BLE001
        emit(f"\n**layers failed:**\n```\n{traceback.format_exc()[-2000:]}\n```")
    write()
    if big:
        try:
            big_block(torch, a.rounds)
        except Exception:  # noqa: BLE001
            emit(f"\n**45M block failed:**\n```\n{traceback.format_exc()[-2000:]}\n```")
        write()
    return 0


def big_block(torch: Any, rounds: int) -> None:
    """PDL off and on for the 45M bf16 block (B4 S1024 D2048 H16 KV4), compiled with
    autotuning off (``KINAC_AUTOTUNE=0``: the fixed tile table, no timing in this call):
    GPU per call (events) and pipelined; outputs compared bit for bit."""
    import os

    from gpu_refs import BIG, block_inputs

    import kinac

    os.environ["KINAC_AUTOTUNE"] = "0"
    h, kv = BIG["h"], BIG["kv"]
    ins = block_inputs(BIG, torch.bfloat16)
    fs, ys = {}, {}
    for name, opts in (("base", {"pdl": False}), ("pdl", {"pdl": True})):
        f = kinac.compile(ROOT / "workspaces/transformer", "block", target="cuda", **opts)
        ys[name] = torch.from_dlpack(f(h, kv, *ins)).clone()
        for _ in range(3):
            f(h, kv, *ins)
        fs[name] = f
    torch.cuda.synchronize()
    same = bool(torch.equal(ys["base"], ys["pdl"]))
    samp: dict[str, dict[str, list[float]]] = {n: {"events": [], "pipe": []} for n in fs}
    sync = torch.cuda.synchronize
    for _ in range(rounds):
        for name, f in fs.items():
            call = lambda f=f: f(h, kv, *ins)  # noqa: E731
            samp[name]["events"].append(events_us(torch, call))
            samp[name]["pipe"].append(pipelined_us(call, sync, 20))
    emit("\n## 45M bf16 block (autotuning off), PDL off and on\n")
    emit(f"Outputs bit-identical: {same}\n")
    emit("| variant | GPU per call (events, 20 back to back) us | pipelined us |")
    emit("|---|---|---|")
    RES["big"] = {"identical": same}
    for name, d in samp.items():
        m = {k: statistics.median(v) for k, v in d.items()}
        RES["big"][name] = m
        emit(f"| {name} | {m['events']:.1f} | {m['pipe']:.1f} |")


if __name__ == "__main__":
    raise SystemExit(main())
