"""CUDA runtime bench: allocation latency, launch host cost, graph replay, bandwidth.

# kinac-bench: gpu   (scripts/gpu.sh runs every bench carrying this line, with --gpu)

In one run, each against a reference measured in the same process:
  * pool allocate+free latency (1 MiB, and a mixed-size sequence) vs PyTorch's caching
    allocator (``torch.cuda.caching_allocator_alloc``/``_delete``); goal: no slower;
  * host cost of one eager launch with 8 arguments through a pre-packed :class:`Launch`
    (every launch path: graph (the default), bindings, ctypes, pydll; unchanged arguments and
    one pointer changing) vs a plain cuda-bindings launch; goal < 5 us; with the driver's own
    cost from native code (llvmlite-compiled loops) for reference;
  * host cost per kernel when a 100-kernel sequence is replayed as a CUDA graph; goal < 1 us;
  * a 16-byte-vector grid-stride copy kernel (PTX from llvmlite) vs a device-to-device copy;
    goal >= 90% of the copy's bandwidth (bytes read + written).

  * host inputs (issue 17 item 3), a sweep over the size of ``x`` (0.5 to 16 MiB): the MLP fed
    a numpy ``x`` each call through the pinned pool with copy/compute overlap (the steady state
    as two graph launches, and as driver calls), and without (``pinned=False``), vs the same
    MLP fed a device ``x``, pipelined and synced, with the copy alone (memcpy + DMA); goal
    <= 1.2x where the copy is shorter than the compute (``benches/runtime_sweep.py``, printed
    as one compact table); and where the 0.5 MiB call's host time goes: the staging copy
    alone, the stager alone per call, the share of calls on the staged steady state, and the
    same MLP fed a ``kinac.rt.cuda.pinned_empty`` array (``benches/runtime_staging.py``).

Writes ``$OUT/runtime_bench.md`` (a markdown table, also printed), ``$OUT/runtime_bench.json``
and ``$OUT/runtime_sweep.json`` (the sweep's numbers). ``--sweep-only``: the sweep alone.
Usage: PYTHONPATH=. python3 benches/runtime.py --gpu [--out DIR] [--quick]

Soak (issue 17 item 5), instead of the sections above:
``benches/runtime.py --gpu --soak-minutes N [--sample-seconds S]`` runs MLP calls of several
shapes with pool churn for N minutes, sampling the device and pinned pools every S seconds
(default: 60, or a sixth of a shorter soak) into ``$OUT/soak_samples.csv``/``.json`` (and ``.png`` with matplotlib);
``benches/runtime.py --plot CSV`` plots a CSV written elsewhere.
"""

from __future__ import annotations

import argparse
import ctypes
import datetime
import json
import os
import statistics
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benches import runtime_modes, runtime_staging, runtime_sweep  # noqa: E402
from benches.launch_probe import native_loops, native_us  # noqa: E402
from kinac.codegen.ptx_testkernels import NOOP8_ARGS, copy_v4_ptx  # noqa: E402
from kinac.rt import cuda  # noqa: E402
from kinac.rt.cuda import soak  # noqa: E402
from kinac.rt.cuda.driver import api, check  # noqa: E402
from kinac.rt.cuda.testing import Row, TestKernels, per_call_us, read_u32, row, table  # noqa: E402

MiB = 1 << 20


def bench_alloc(torch: Any, s: cuda.Stream, quick: bool) -> list[Row]:
    import random

    h = s.handle
    rng = random.Random(3)
    full = [soak.mixed_size(rng) for _ in range(2000)]
    work = {
        "1 MiB": [MiB] * 1000,
        "mixed < 4 MiB": [n for n in full if n < 4 * MiB][:1000],
        "mixed incl. 4-64 MiB": full[:1000],
    }
    keep = cuda.GrowthPolicy(release_large_on_miss=False)
    allocs: dict[str, tuple[Callable[[int, int], int], Callable[[int, int, int], None]]] = {}
    for name, res in (
        ("pool", cuda.PoolResource(cuda.CudaResource(), order=cuda.order_streams)),
        (
            "pool (keep large)",
            cuda.PoolResource(cuda.CudaResource(), keep, order=cuda.order_streams),
        ),
        ("async", cuda.AsyncResource()),
    ):
        allocs[name] = (res.allocate, res.deallocate)
    if torch is not None:
        ts = torch.cuda.ExternalStream(h)
        talloc, tdel = torch.cuda.caching_allocator_alloc, torch.cuda.caching_allocator_delete
        allocs["torch"] = (lambda n, _h: talloc(n, 0, ts), lambda p, _n, _h: tdel(p))
    batches = 5 if quick else 15
    out: dict[tuple[str, str], float] = {}
    for rnd in range(2):  # two rounds, interleaved: the spread between them is the noise
        for wname, sizes in work.items():
            for aname, (a, f) in allocs.items():

                def run(a: Any = a, f: Any = f, sizes: list[int] = sizes) -> None:
                    for n in sizes:
                        f(a(n, h), n, h)

                run()  # warm the caches
                v = per_call_us(run, 1, batches) / len(sizes)
                print(f"alloc round {rnd} {aname} / {wname}: {v:.3f} us")
                out[(aname, wname)] = min(v, out.get((aname, wname), v))
    s.synchronize()
    rows = []
    for wname in work:
        ref = out.get(("torch", wname))
        tr = "torch caching allocator"
        goal = "info" if "incl." in wname else "<= 1.0x"
        rows.append(row(f"pool alloc+free, {wname}", out[("pool", wname)], "us", ref, tr, goal))
        for aname in ("pool (keep large)", "async"):
            v = out[(aname, wname)]
            rows.append(row(f"{aname} alloc+free, {wname}", v, "us", ref, tr, "info"))
    return rows


def bench_launch(k: TestKernels, s: cuda.Stream, quick: bool) -> tuple[list[Row], cuda.Launch]:
    d = api()
    res = cuda.CudaResource()
    ptrs = [res.allocate(4096) for _ in range(5)]
    args_a = (ptrs[0], ptrs[1], ptrs[2], ptrs[3], 7, -3, 1.5, 12345)
    args_b = (ptrs[4], *args_a[1:])
    calls, batches = (300, 10) if quick else (500, 30)
    sync = s.synchronize
    out: dict[str, float] = {}
    launches = {}
    cases: dict[str, Callable[[], None]] = {}
    for path in cuda.module.LAUNCH_PATHS:
        L = k.noop8_kernel.prepare(NOOP8_ARGS, 1, 32, args=args_a, path=path)
        launches[path] = L
        L(s)
        flip = [args_a, args_b]

        def changing(L: cuda.Launch = L, flip: list[tuple[Any, ...]] = flip) -> None:
            flip.reverse()
            L(s, *flip[0])

        cases[f"{path}_same"] = lambda L=L: L(s)
        cases[f"{path}_run"] = lambda r=L.run: r(s)
        cases[f"{path}_changing"] = changing
    pf = cuda.driver.pydll_launch()
    u, vp = ctypes.c_uint, ctypes.c_void_p
    a0 = (vp(k.module.function("noop0").address), u(1), u(1), u(1), u(32), u(1), u(1), u(0))
    a0 += (vp(s.handle), vp(None), vp(None))
    cases["pydll_empty"] = lambda: pf(*a0) and None
    for rnd in range(3):  # three interleaved rounds, best kept: the spread is the noise
        for key, fn in cases.items():
            v = per_call_us(fn, calls, batches, sync)
            print(f"launch round {rnd} {key}: {v:.3f} us")
            out[key] = min(v, out.get(key, v))
    noop0 = k.module.function("noop0").handle
    f = d.cuLaunchKernel
    cs = s.cu
    out["raw_empty"] = per_call_us(
        lambda: check("cuLaunchKernel", f(noop0, 1, 1, 1, 32, 1, 1, 0, cs, None, 0)),
        calls,
        batches,
        sync,
    )
    c = ctypes
    types = (c.c_void_p,) * 4 + (c.c_uint32, c.c_int32, c.c_float, c.c_uint64)
    fn8 = k.noop8_kernel.handle
    try:
        out["raw_tuple8"] = per_call_us(
            lambda: check("cuLaunchKernel", f(fn8, 1, 1, 1, 32, 1, 1, 0, cs, (args_a, types), 0)),
            calls,
            batches,
            sync,
        )
    except Exception as e:  # noqa: BLE001 - reference only
        print("tuple-args reference failed:", e)
    try:  # the driver's own cost, without Python: native loops compiled by llvmlite
        launch_loop, graph_loop = native_loops()
        fa, h, pa = k.noop8_kernel.address, s.handle, launches["bindings"]._params
        out["native_launch"] = native_us(
            lambda: launch_loop(fa, h, pa, calls), calls, batches, sync
        )
        gs = launches["graph"]._gstate
        if gs is not None and gs.graph is not None:
            ex = gs.graph.exec
            out["native_graph"] = native_us(lambda: graph_loop(ex, h, calls), calls, batches, sync)
    except Exception as e:  # noqa: BLE001 - reference only
        print("native reference failed:", e)
    ref, rn = out["raw_empty"], "cuda-bindings empty launch"
    rows = []
    for path in cuda.module.LAUNCH_PATHS:
        for key, what in (
            ("same", "pre-packed"),
            ("run", "pre-packed, .run"),
            ("changing", "1 ptr changed"),
        ):
            v = out[f"{path}_{key}"]
            rows.append(
                row(f"eager launch, 8 args {what} ({path})", v, "us", ref, rn, "< 5 us", 5.0)
            )
    for key, what in (
        ("native_launch", "cuLaunchKernel, 8 args, from native code (the driver's floor)"),
        ("native_graph", "cuGraphLaunch of a one-kernel graph, from native code"),
    ):
        if key in out:
            rows.append(row(what, out[key], "us", ref, rn, "info"))
    v = out["pydll_empty"]
    rows.append(row("libcuda empty launch via PyDLL, no wrapper", v, "us", ref, rn, "info"))
    if "raw_tuple8" in out:
        v = out["raw_tuple8"]
        rows.append(row("cuda-bindings launch, 8 args as a tuple", v, "us", ref, rn, "info"))
    for p in ptrs:
        res.deallocate(p)
    return rows, launches["bindings"]


def bench_graph(k: TestKernels, s: cuda.Stream, launch: cuda.Launch, quick: bool) -> list[Row]:
    K = 100
    g = cuda.capture(lambda st: [launch(st) for _ in range(K)] and None, s, name="bench-100-noops")
    reps = 20 if quick else 50
    g.replay()
    s.synchronize()
    host = per_call_us(g.replay, 10, reps, s.synchronize) / K
    e0, e1 = cuda.Event(), cuda.Event()
    e0.record(s)
    for _ in range(20):
        g.replay()
    e1.record(s)
    e1.synchronize()
    dev = e0.elapsed_ms(e1) * 1e3 / (20 * K)
    e0.record(s)
    for _ in range(20 * K):
        launch(s)
    e1.record(s)
    e1.synchronize()
    eager_dev = e0.elapsed_ms(e1) * 1e3 / (20 * K)
    g.close()
    return [
        row(
            "graph replay, host cost per kernel (100 kernels)",
            host,
            "us",
            None,
            "",
            "< 1 us",
            1.0,
        ),
        row(
            "graph replay, device time per kernel",
            dev,
            "us",
            eager_dev,
            "eager launches, device time per kernel",
            "info",
        ),
    ]


def bench_bandwidth(k: TestKernels, s: cuda.Stream, torch: Any, quick: bool) -> list[Row]:
    d = api()
    nbytes = (256 if quick else 1024) * MiB
    res = cuda.CudaResource()
    src, dst = res.allocate(nbytes), res.allocate(nbytes)
    mod = cuda.load_module(copy_v4_ptx(k.device.arch))
    kern = mod.function("copy_v4")
    n16 = nbytes // 16
    sm = k.device.sm_count
    reps = 10 if quick else 30
    e0, e1 = cuda.Event(), cuda.Event()

    def timed(fn: Callable[[], None]) -> float:
        for _ in range(3):
            fn()
        ms = []
        for _ in range(reps):
            e0.record(s)
            fn()
            e1.record(s)
            e1.synchronize()
            ms.append(e0.elapsed_ms(e1))
        return 2 * nbytes / (statistics.median(ms) * 1e-3) / 1e12

    configs = [(sm * 4, 512), (sm * 8, 256), (sm * 16, 256), (sm * 2, 1024), (sm * 32, 128)]
    best = (0.0, "")
    for grid, block in configs:
        L = kern.prepare(("ptr", "ptr", "u64"), grid, block, args=(dst, src, n16))
        tbs = timed(lambda L=L: L(s))
        if tbs > best[0]:
            best = (tbs, f"grid {grid} x {block}")
    memcpy = timed(lambda: check("cuMemcpyDtoDAsync", d.cuMemcpyDtoDAsync(dst, src, nbytes, s.cu)))
    k.fill(src, nbytes // 4, 0x1234567, s)
    k.fill(dst, nbytes // 4, 0xDEAD, s)
    kern.prepare(("ptr", "ptr", "u64"), sm * 8, 256, args=(dst, src, n16))(s)
    got = read_u32(dst, nbytes // 4, s)
    copy_ok = bool((got == 0x1234567).all())
    rows = [
        row(
            f"copy_v4 bandwidth (llvmlite PTX, {best[1]}), copy verified={copy_ok}",
            best[0],
            "TB/s",
            memcpy,
            "cuMemcpyDtoDAsync",
            ">= 0.9x",
        ),
    ]
    if torch is not None:
        a = torch.empty(nbytes, dtype=torch.uint8, device="cuda")
        b = torch.empty_like(a)
        ts = torch.cuda.ExternalStream(s.handle)
        with torch.cuda.stream(ts):
            tcopy = timed(lambda: b.copy_(a))
        rows.append(
            row(
                "copy_v4 bandwidth (best config)",
                best[0],
                "TB/s",
                tcopy,
                "torch copy_ (device to device)",
                ">= 0.9x",
            )
        )
        del a, b
    res.deallocate(src)
    res.deallocate(dst)
    return rows


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--gpu", action="store_true", help="run (this bench is GPU-only)")
    ap.add_argument("--out", default=os.environ.get("OUT", "."))
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--soak-minutes", type=float, default=0.0, help="run the soak instead")
    ap.add_argument(
        "--sample-seconds", type=float, help="soak sampling period (default: min(60, N*60/6))"
    )
    ap.add_argument("--plot", metavar="CSV", help="plot a soak CSV to a PNG beside it, and exit")
    ap.add_argument("--sweep-only", action="store_true", help="only the host-input sweep")
    a = ap.parse_args()
    if a.plot:
        png = runtime_modes.plot(Path(a.plot), Path(a.plot).with_suffix(".png"))
        print(png or "matplotlib is not installed: no plot")
        return 0 if png else 1
    if not cuda.available():
        print(f"runtime bench: no GPU ({cuda.unavailable_reason()}); nothing to do")
        return 0
    try:
        import torch

        torch.cuda.init()
    except Exception as e:  # noqa: BLE001 - the references that need torch are skipped
        print("torch unavailable:", e)
        torch = None
    dev = cuda.get_device()
    if a.soak_minutes > 0:
        every = a.sample_seconds or min(60.0, a.soak_minutes * 10.0)
        summary = runtime_modes.soak(a.soak_minutes, every, Path(a.out))
        print(json.dumps(summary, indent=1))
        return 0 if summary.get("no_growth", True) else 1
    k = TestKernels()
    s = cuda.Stream()
    rows: list[Row] = []
    errors: list[str] = []

    def section(name: str, fn: Callable[[], list[Row]]) -> None:
        try:
            rows.extend(fn())
        except Exception as e:  # noqa: BLE001 - report it and go on with the other sections
            import traceback

            traceback.print_exc()
            errors.append(f"{name}: {type(e).__name__}: {e}")

    sweep: list[dict[str, Any]] = []

    def sweep_section() -> list[Row]:
        sweep.extend(runtime_sweep.sweep(a.quick))
        tab = runtime_sweep.sweep_table(sweep)
        print(tab, flush=True)  # now: a later section cut short by a cap loses nothing of it
        Path(a.out).mkdir(parents=True, exist_ok=True)
        (Path(a.out) / "runtime_sweep.md").write_text(tab, encoding="utf-8")
        return runtime_sweep.sweep_rows(sweep)

    if torch is not None:  # first: the goal's numbers come back even if a later section hangs
        section("host-input sweep", sweep_section)
    if not a.sweep_only:
        section("alloc", lambda: bench_alloc(torch, s, a.quick))
        launch_ref: list[cuda.Launch] = []

        def launch_section() -> list[Row]:
            got, launch = bench_launch(k, s, a.quick)
            launch_ref.append(launch)
            return got

        section("launch", launch_section)
        section("graph", lambda: bench_graph(k, s, launch_ref[0], a.quick) if launch_ref else [])
        section("bandwidth", lambda: bench_bandwidth(k, s, torch, a.quick))
        if torch is not None:
            section("host staging", lambda: runtime_staging.bench_staging(a.quick))
    stamp = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
    header = f"## CUDA runtime bench ({stamp}, {dev.name}, {dev.sm_count} SMs, torch {getattr(torch, '__version__', '-')})"
    md = table(rows, header)
    if sweep:
        md += "\n### Host-input sweep (issue 17)\n\n" + runtime_sweep.sweep_table(sweep)
    if errors:
        md += "\nErrors: " + "; ".join(errors) + "\n"
    print(md)
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "runtime_bench.md").write_text(md, encoding="utf-8")
    payload = {"date": stamp, "device": dev.name, "rows": rows, "errors": errors}
    (out / "runtime_bench.json").write_text(json.dumps(payload, indent=1), encoding="utf-8")
    if sweep:
        (out / "runtime_sweep.json").write_text(json.dumps(sweep, indent=1), encoding="utf-8")
    return 1 if errors else 0


if __name__ == "__main__":
    raise SystemExit(main())
