"""Probe: where does the host cost of one eager kernel launch go on this machine?

Not a regular bench (no "kinac-bench" marker): a one-off investigation for issue 5. Measures
  * the Python launch paths at several burst sizes (host time only; the stream is drained
    between bursts, so a full launch queue cannot stall the host);
  * the driver's own floor: ``cuLaunchKernel`` called in a native loop (llvmlite-compiled);
  * the ``graph`` launch path (a one-kernel CUDA graph replayed with ``cuGraphLaunch``), from
    Python and from a native loop, with unchanged and with changing arguments;
  * stream flags (non-blocking vs blocking), launch+synchronise round trips, the graph path's
    build cost, and device time per kernel for back-to-back launches.
Usage: PYTHONPATH=. python3 benches/launch_probe.py
"""

from __future__ import annotations

import ctypes
import os
import platform
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from kinac.codegen.llvm import compile_object, host_target, jit_load  # noqa: E402
from kinac.codegen.ptx_testkernels import NOOP8_ARGS  # noqa: E402
from kinac.rt import cuda  # noqa: E402
from kinac.rt.cuda.driver import api, check  # noqa: E402
from kinac.rt.cuda.testing import TestKernels, per_call_us  # noqa: E402

LOOP_IR = """
declare i32 @cuLaunchKernel(ptr, i32, i32, i32, i32, i32, i32, i32, ptr, ptr, ptr)
declare i32 @cuGraphLaunch(ptr, ptr)

define i32 @launch_loop(ptr %f, ptr %s, ptr %p, i64 %n) {
entry:
  br label %head
head:
  %i = phi i64 [0, %entry], [%i1, %body]
  %rc = phi i32 [0, %entry], [%r, %body]
  %c = icmp ult i64 %i, %n
  br i1 %c, label %body, label %done
body:
  %r = call i32 @cuLaunchKernel(ptr %f, i32 1, i32 1, i32 1, i32 32, i32 1, i32 1, i32 0,
                                ptr %s, ptr %p, ptr null)
  %i1 = add i64 %i, 1
  br label %head
done:
  ret i32 %rc
}

define i32 @graph_loop(ptr %g, ptr %s, i64 %n) {
entry:
  br label %head
head:
  %i = phi i64 [0, %entry], [%i1, %body]
  %rc = phi i32 [0, %entry], [%r, %body]
  %c = icmp ult i64 %i, %n
  br i1 %c, label %body, label %done
body:
  %r = call i32 @cuGraphLaunch(ptr %g, ptr %s)
  %i1 = add i64 %i, 1
  br label %head
done:
  ret i32 %rc
}
"""


NativeLoops = tuple[Callable[[int, int, int | None, int], int], Callable[[int, int, int], int]]


def native_loops() -> NativeLoops:
    """``launch_loop(func, stream, params, n)`` and ``graph_loop(exec, stream, n)``: native
    loops of n ``cuLaunchKernel`` (grid 1, block 32) or ``cuGraphLaunch`` calls; return the
    last CUresult."""
    lib = ctypes.CDLL(os.environ.get("KINAC_LIBCUDA", "libcuda.so.1"))
    syms = {
        n: ctypes.cast(getattr(lib, n), ctypes.c_void_p).value or 0
        for n in ("cuLaunchKernel", "cuGraphLaunch")
    }
    img = jit_load(compile_object(LOOP_IR, host_target()), syms, ("launch_loop", "graph_loop"))
    _KEEP.append(img)
    i32, vp, u64 = ctypes.c_int32, ctypes.c_void_p, ctypes.c_uint64
    launch_loop = ctypes.CFUNCTYPE(i32, vp, vp, vp, u64)(img.addresses["launch_loop"])
    graph_loop = ctypes.CFUNCTYPE(i32, vp, vp, u64)(img.addresses["graph_loop"])
    return launch_loop, graph_loop


_KEEP: list[object] = []


def native_us(loop: Callable[[], int], n: int, batches: int, sync: Callable[[], None]) -> float:
    """Median host time per call of a native loop of ``n`` calls (stream drained between)."""

    def run() -> None:
        rc = loop()
        if rc:
            raise RuntimeError(f"native launch loop failed: CUresult {rc}")

    return per_call_us(run, 1, batches, sync) / n


def probe(s: cuda.Stream, k: TestKernels, args: tuple[int | float, ...]) -> dict[str, float]:
    launch_loop, graph_loop = native_loops()
    L = k.noop8_kernel.prepare(NOOP8_ARGS, 1, 32, args=args, path="bindings")
    G = k.noop8_kernel.prepare(NOOP8_ARGS, 1, 32, args=args, path="graph")
    L0 = k.module.function("noop0").prepare((), 1, 32, path="bindings")
    G(s)
    G(s)  # the second eager launch builds the graph
    L(s)
    s.synchronize()
    fa, f0 = k.noop8_kernel.address, k.module.function("noop0").address
    flip = [args, (args[1], args[0], *args[2:])]

    def changing() -> None:
        flip.reverse()
        G(s, *flip[0])

    out: dict[str, float] = {}

    def keep(key: str, v: float) -> None:
        out[key] = min(v, out.get(key, v))

    sync = s.synchronize
    h, pa, lr, gr = s.handle, L._params, L.run, G.run

    def measure(n: int) -> None:
        b = max(10, 5000 // n)
        keep(f"py cuLaunchKernel noop8, burst {n}", per_call_us(lambda: lr(s), n, b, sync))
        keep(f"py graph path noop8, burst {n}", per_call_us(lambda: gr(s), n, b, sync))
        keep(f"py graph path, args changing, burst {n}", per_call_us(changing, n, b, sync))
        nl = native_us(lambda: launch_loop(fa, h, pa, n), n, b, sync)
        keep(f"native cuLaunchKernel noop8, burst {n}", nl)
        n0 = native_us(lambda: launch_loop(f0, h, None, n), n, b, sync)
        keep(f"native cuLaunchKernel noop0, burst {n}", n0)
        gs = G._gstate
        assert gs is not None and gs.graph is not None
        ex = gs.graph.exec  # rebuilt by the build-cost loop below: read it each time
        ng = native_us(lambda: graph_loop(ex, h, n), n, b, sync)
        keep(f"native cuGraphLaunch 1 node, burst {n}", ng)

    for _ in range(2):
        for burst in (8, 128, 2048):
            measure(burst)
        for name, fn in (("cuLaunchKernel", L.run), ("graph path", G.run), ("noop0", L0.run)):

            def trip(f: Callable[[cuda.Stream], None] = fn) -> None:
                f(s)
                sync()

            keep(f"round trip {name} + sync", per_call_us(trip, 50, 20))
        t0 = time.perf_counter_ns()
        for _ in range(20):
            G.close()
            G(s)  # launched before: rebuilt at once
        keep("graph path: build (instantiate) + first launch", (time.perf_counter_ns() - t0) / 20e3)
    # device time per kernel, back to back
    for name, fn in (("cuLaunchKernel", L.run), ("graph path", G.run)):
        e0, e1 = cuda.Event(), cuda.Event()
        e0.record(s)
        for _ in range(2000):
            fn(s)
        e1.record(s)
        e1.synchronize()
        out[f"device time per kernel, 2000 back to back, {name}"] = e0.elapsed_ms(e1) * 1e3 / 2000
    return out


def main() -> None:
    print("kernel", platform.release(), "python", sys.version.split()[0])
    d = api()
    print("driver", check("cuDriverGetVersion", d.cuDriverGetVersion()))
    k = TestKernels()
    res = cuda.CudaResource()
    ptrs = [res.allocate(4096) for _ in range(5)]
    args = (ptrs[0], ptrs[1], ptrs[2], ptrs[3], 7, -3, 1.5, 12345)
    for flags_name, nb in (("non-blocking", True), ("blocking", False)):
        out = probe(cuda.Stream(non_blocking=nb), k, args)
        print(f"== stream {flags_name}")
        for key, v in out.items():
            print(f"{key:56s} {v:8.3f} us")
    for p in ptrs:
        res.deallocate(p)


if __name__ == "__main__":
    main()
