"""The host cost of a steady-state host-input call, on the CPU (issue 17 item 3): kinac's part.

Why: the H200 measured a 0.5 MiB host-input call at 38 us of host time, of which 13.6 us is the
staging ``memcpy``; the rest is kinac's Python, ctypes and the driver's own work per call. This
runs the same ``GpuEntry`` steady state (``staging_hot.hot_call``) on a machine without a GPU,
over the CPU tests' fake driver (``tests/test_pinned.py``) and a stand-in libcuda compiled from
C whose functions return at once (``tests/test_staging_native.py``, ``test_staging_graphs.py``),
so what is timed is kinac's Python and ctypes per call, on each path: the steady state as two
graph launches (``staging_graphs``) and as driver calls (``use_graphs = False``). The
driver's own time per call is the H200's (``benches/runtime.py``: one ``cuGraphLaunch`` from
native code ~1.1 us). A tiny ``x`` (48 bytes): the staging copy is ~0.

Usage: ``python3 benches/runtime_hostcost.py [--calls N]``; prints one line per path (the
calling thread's CPU time per call, best of 3 rounds), and the count of driver calls per call
on each (from the stand-in's log).
"""

from __future__ import annotations

import argparse
import ctypes
import os
import sys
import tempfile
import time
import types
from pathlib import Path
from types import SimpleNamespace
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

C = r"""
#include <string.h>
#include <stddef.h>
typedef struct { size_t a[4]; int t; const void *h; unsigned long long d; void *x[2];
  size_t p[2]; size_t b[4]; int t2; void *h2; unsigned long long d2; void *y[2]; size_t q[2];
  size_t w, hh, dd; } M3;
typedef struct { long long g, kind, dst, src, n; } Node;
static Node nodes[64]; static int nn = 0, ng = 0; static long long calls = 0;
long long fake_calls(void) { long long c = calls; calls = 0; return c; }
int cuEventRecord(void *e, void *s) { calls++; return 0; }
int cuStreamWaitEvent(void *s, void *e, unsigned f) { calls++; return 0; }
int cuEventSynchronize(void *e) { calls++; return 0; }
int cuMemcpyHtoDAsync_v2(unsigned long long d, const void *s, size_t n, void *st) {
  calls++; memmove((void *)d, s, n); return 0; }
int cuCtxGetCurrent(void **c) { *c = (void *)0xC0; return 0; }
int cuGraphCreate(void **g, unsigned f) { *g = (void *)(long long)(++ng); return 0; }
static int add(void **o, void *g, long long kind, long long dst, long long src, long long n) {
  nodes[nn] = (Node){(long long)g, kind, dst, src, n}; *o = (void *)(1000LL + nn++); return 0; }
int cuGraphAddEventWaitNode(void **o, void *g, void **d, size_t nd, void *e) {
  return add(o, g, 1, 0, 0, 0); }
int cuGraphAddEventRecordNode(void **o, void *g, void **d, size_t nd, void *e) {
  return add(o, g, 2, 0, 0, 0); }
int cuGraphAddMemcpyNode(void **o, void *g, void **d, size_t nd, const M3 *p, void *c) {
  long long src = p->t == 1 ? (long long)p->h : (long long)p->d;
  long long dst = p->t2 == 1 ? (long long)p->h2 : (long long)p->d2;
  return add(o, g, 3, dst, src, (long long)p->w); }
int cuGraphAddChildGraphNode(void **o, void *g, void **d, size_t nd, void *c) {
  return add(o, g, 4, 0, 0, 0); }
int cuGraphInstantiateWithFlags(void **e, void *g, unsigned long long f) {
  *e = (void *)(5000 + (long long)g); return 0; }
int cuGraphLaunch(void *e, void *s) {
  long long g = (long long)e - 5000; calls++;
  for (int k = 0; k < nn; k++)
    if (nodes[k].g == g && nodes[k].kind == 3)
      memmove((void *)nodes[k].dst, (void *)nodes[k].src, nodes[k].n);
  return 0; }
int cuGraphDestroy(void *g) { return 0; }
int cuGraphExecDestroy(void *e) { return 0; }
"""


def _lib(tmp: Path) -> Path:
    from staging_fakes import compile_stand_in

    so = compile_stand_in(C, tmp, "libfake.so")
    if so is None:
        raise SystemExit("no C compiler for the stand-in libcuda")
    return so


def install_stand_in(so: Path, run_replays: bool = True) -> Any:
    """Stand ``kinac.rt.cuda.driver`` on the tests' fake driver as a module (so the native
    paths are taken) and the stand-in libcuda ``so``; returns the ``Graph`` class a caller
    installs as ``graph.capture``: a captured graph whose launch is the stand-in's
    ``cuGraphLaunch`` (``run_replays``: its Python ``replay`` runs the captured sequence, else
    does nothing). Shared with ``benches/call_path_cpu.py``."""
    from test_pinned import FakeDriver

    from kinac.rt.cuda import device, driver, staging_calls

    fake = FakeDriver()
    mod = types.ModuleType("fake_cuda")
    for name in dir(fake):
        if name.startswith("cu") or name.startswith("CU"):
            setattr(mod, name, getattr(fake, name))
    os.environ["KINAC_LIBCUDA"] = str(so)
    driver._api, driver.OK, driver._initialised, driver._libs = mod, 0, True, {}
    device._devices = {0: object()}  # type: ignore[dict-item]
    staging_calls._native = None
    lib = ctypes.PyDLL(str(so))
    launch = lib["cuGraphLaunch"]
    launch.restype, launch.argtypes = ctypes.c_int, [ctypes.c_void_p, ctypes.c_void_p]

    class Graph:  # a captured compute graph: its launch is the stand-in's cuGraphLaunch
        captured = True
        _graph = 0x1234

        def __init__(self, seq: Any, stream: Any, name: str = "") -> None:
            self.seq = seq
            self.fast_launch = (launch, ctypes.c_void_p(9))

        def replay(self, stream: Any) -> None:
            if run_replays:
                self.seq(stream)

        def close(self) -> None:
            pass

    return Graph


def _entry(so: Path) -> tuple[Any, Any, Any]:
    """The tests' ``y = x * w`` entry (x on the host) over the fake driver, its driver calls
    through the stand-in libcuda (a fake driver that is a module: the native paths are used)."""
    import numpy as np
    from staging_fakes import W, X, mul_entry
    from test_pinned import HostMemory

    from kinac.rt.cuda import graph as graph_mod
    from kinac.rt.cuda import pinned
    from kinac.rt.cuda.pinned import PinnedPool
    from kinac.rt.cuda.tensor import KDL_CUDA, Tensor

    Graph = install_stand_in(so)
    graph_mod.capture = Graph  # type: ignore[assignment]
    pinned._pool = PinnedPool(alloc=HostMemory().alloc, free=lambda p: None)
    mem = HostMemory()
    res = SimpleNamespace(ordinal=0, allocate=lambda n, s=0: mem.alloc(n),
                          deallocate=lambda p, n=0, s=0: None)  # fmt: skip
    e = mul_entry(res)
    e._bind = lambda key: ((lambda stream: None), [])

    class Weight:
        def __init__(self) -> None:
            self.ptr = mem.alloc(16)

        def data_ptr(self) -> int:
            return self.ptr

    w = Weight()
    e._remember(1, w, Tensor(w.ptr, W, "float32", device=(KDL_CUDA, 0)))
    return e, w, np.ones(X, np.float32)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--calls", type=int, default=20000)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        so = _lib(Path(tmp))
        e, w, x = _entry(so)
        count = ctypes.CDLL(str(so)).fake_calls
        for _ in range(4):
            e(x, w)
        st = e._stager
        assert st.graphs is not None and st.calls.native, "the native paths were not taken"
        out: dict[str, float] = {}
        for _ in range(3):
            for use in (True, False):
                st.use_graphs = use
                e(x, w)
                e(x, w)
                h0, g0 = st.hot_calls, st.graph_calls
                count()
                t0 = time.thread_time()  # CPU time: the VM's other processes do not count
                for _ in range(a.calls):
                    e(x, w)
                us = (time.thread_time() - t0) * 1e6 / a.calls
                n_drv = count() / a.calls
                assert st.hot_calls - h0 == a.calls and (st.graph_calls - g0 == a.calls) == use
                key = "graphs" if use else "driver calls"
                out[key] = min(us, out.get(key, us))
                out[key + " n"] = n_drv
        for key in ("graphs", "driver calls"):
            print(f"host-input hot call, {key}: {out[key]:.2f} us of kinac's Python + ctypes per "
                  f"call, {out[key + ' n']:.0f} driver calls per call")  # fmt: skip
        st.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
