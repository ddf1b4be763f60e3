"""The staging graphs' native calls (``staging_graphs.Graphs`` through ctypes), without a GPU.

The copy graph and the compute wrapper are built with libcuda's graph API through ctypes and a
hand-written ``CUDA_MEMCPY3D``; a wrong field order, a 32-bit type where cuda.h has a 64-bit one
or a swapped argument would only show on a GPU. Here a stand-in libcuda compiled from C, with
cuda.h's struct, checks every node's dependencies, runs a launched graph's nodes in order
(copies performed, events logged) and the builder runs over it: the bytes land, the flag is
set after the DMA, and every node gets the handles it should.
"""

from __future__ import annotations

import ctypes
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
from staging_fakes import compile_stand_in, stand_in_driver
from test_pinned import HostMemory

from kinac.rt.cuda import staging_graphs

SRC = r"""
#include <string.h>
#include <stddef.h>
typedef struct CUDA_MEMCPY3D_st {
  size_t srcXInBytes, srcY, srcZ, srcLOD; int srcMemoryType; const void *srcHost;
  unsigned long long srcDevice; void *srcArray; void *reserved0; size_t srcPitch, srcHeight;
  size_t dstXInBytes, dstY, dstZ, dstLOD; int dstMemoryType; void *dstHost;
  unsigned long long dstDevice; void *dstArray; void *reserved1; size_t dstPitch, dstHeight;
  size_t WidthInBytes, Height, Depth;
} CUDA_MEMCPY3D;
typedef struct { long long g, kind, a, b, n; } Node;
static Node nodes[256]; static int nn = 0, ng = 0;
static long long buf[3 * 4096]; static int n = 0;
static void put(long long op, long long a, long long b) {
  if (n + 3 <= 3 * 4096) { buf[n++] = op; buf[n++] = a; buf[n++] = b; } }
int fake_log(long long *out) { int m = n; memcpy(out, buf, sizeof(long long) * m); n = 0; return m; }
int fake_struct_size(void) { return (int)sizeof(CUDA_MEMCPY3D); }
int cuCtxGetCurrent(void **c) { *c = (void *)0xC0; return 0; }
int cuGraphCreate(void **g, unsigned flags) { *g = (void *)(long long)(++ng); return flags ? 1 : 0; }
static int add(void **out, void *g, void **deps, size_t nd, long long kind, long long a,
               long long b, long long len) {
  for (size_t k = 0; k < nd; k++) {  /* every dependency: a node of this graph */
    long long d = (long long)deps[k] - 1000;
    if (d < 0 || d >= nn || nodes[d].g != (long long)g) return 2; }
  nodes[nn] = (Node){(long long)g, kind, a, b, len};
  *out = (void *)(1000LL + nn++);
  put(10 + kind, (long long)nd, nd ? (long long)deps[nd - 1] : 0);
  return 0; }
int cuGraphAddEventWaitNode(void **o, void *g, void **d, size_t nd, void *ev) {
  return add(o, g, d, nd, 1, (long long)ev, 0, 0); }
int cuGraphAddEventRecordNode(void **o, void *g, void **d, size_t nd, void *ev) {
  return add(o, g, d, nd, 2, (long long)ev, 0, 0); }
int cuGraphAddMemcpyNode(void **o, void *g, void **d, size_t nd, const CUDA_MEMCPY3D *p,
                         void *ctx) {
  if (ctx != (void *)0xC0 || p->Height != 1 || p->Depth != 1 || p->srcXInBytes || p->dstY)
    return 3;
  long long src = p->srcMemoryType == 1 ? (long long)p->srcHost : (long long)p->srcDevice;
  long long dst = p->dstMemoryType == 1 ? (long long)p->dstHost : (long long)p->dstDevice;
  if ((p->srcMemoryType != 1 && p->srcMemoryType != 2) || p->dstMemoryType < 1) return 4;
  return add(o, g, d, nd, 3, dst, src, (long long)p->WidthInBytes); }
int cuGraphAddChildGraphNode(void **o, void *g, void **d, size_t nd, void *child) {
  return add(o, g, d, nd, 4, (long long)child, 0, 0); }
int cuGraphInstantiateWithFlags(void **ex, void *g, unsigned long long flags) {
  *ex = (void *)(5000 + (long long)g); return flags ? 1 : 0; }
int cuGraphLaunch(void *ex, void *s) {
  long long g = (long long)ex - 5000;
  for (int k = 0; k < nn; k++) {
    Node *x = &nodes[k];
    if (x->g != g) continue;
    if (x->kind == 1) put(2, (long long)s, x->a);
    if (x->kind == 2) put(1, x->a, (long long)s);
    if (x->kind == 3) { memmove((void *)x->a, (void *)x->b, x->n); put(4, x->a, (long long)s); }
    if (x->kind == 4) put(5, x->a, (long long)s); }
  return 0; }
int cuGraphDestroy(void *g) { put(6, (long long)g, 0); return 0; }
int cuGraphExecDestroy(void *e) { put(7, (long long)e, 0); return 0; }
"""


@pytest.fixture(scope="module")
def lib_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    so = compile_stand_in(SRC, tmp_path_factory.mktemp("fakecudagraphs"), "libfakecudagraphs.so")
    if so is None:
        pytest.skip("no C compiler for the stand-in libcuda")
    return so


def test_graphs_build_what_the_driver_expects(
    lib_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    stand_in_driver(monkeypatch, lib_path)
    lib = ctypes.CDLL(str(lib_path))
    assert lib.fake_struct_size() == ctypes.sizeof(staging_graphs.CUDA_MEMCPY3D) == 200
    out = (ctypes.c_longlong * (3 * 4096))()

    def log() -> list[tuple[int, int, int]]:
        m = lib.fake_log(out)
        return [(out[k], out[k + 1], out[k + 2]) for k in range(0, m, 3)]

    api = staging_graphs.Graphs()
    mem = HostMemory()
    src = [np.arange(6, dtype=np.float32) + k for k in range(2)]  # two host inputs
    hosts = [mem.alloc(24) for _ in src]
    devs = [mem.alloc(24) for _ in src]
    for h, a in zip(hosts, src, strict=True):
        ctypes.memmove(h, a.ctypes.data, 24)
    flag, one = mem.alloc(4), mem.alloc(4)
    ctypes.c_uint32.from_address(one).value = 1
    consumed, copied, done = 0x51, 0x52, 0x53
    pairs = [(d, h, 24) for d, h in zip(devs, hosts, strict=True)]
    cp = staging_graphs.build_copy(api, pairs, flag, one, (consumed, copied, done))
    built = log()  # (10 + kind, dependencies, the last one): the nodes' order and edges
    assert [b[:2] for b in built] == [(11, 0), (13, 1), (13, 1), (12, 2), (13, 2), (12, 1)]
    assert cp.launch(cp.exec, ctypes.c_void_p(77)) == 0
    for d, a in zip(devs, src, strict=True):
        got = np.ctypeslib.as_array((ctypes.c_float * 6).from_address(d))
        np.testing.assert_array_equal(got, a)
    assert ctypes.c_uint32.from_address(flag).value == 1
    assert log() == [(2, 77, consumed), (4, devs[0], 77), (4, devs[1], 77), (1, copied, 77),
                     (4, flag, 77), (1, done, 77)]  # fmt: skip
    cw = staging_graphs.build_compute(api, SimpleNamespace(_graph=0x1234), copied, consumed)
    log()
    assert cw.launch(cw.exec, ctypes.c_void_p(7)) == 0
    assert log() == [(2, 7, copied), (5, 0x1234, 7), (1, consumed, 7)]
    api.destroy(cw.graph, cw.exec)
    assert log() == [(7, cw.exec.value, 0), (6, cw.graph, 0)]
    with pytest.raises(staging_graphs.BuildError):  # a graph never captured: refused
        staging_graphs.build_compute(api, SimpleNamespace(_graph=None), copied, consumed)


def test_a_copy_graph_in_pieces_without_the_flag(
    lib_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``pieces=2``, no flag (2026-12-02c round 3): the wait, two memcpy nodes each after the
    wait only (parallel branches), *copied* after both; no flag copy, no *done*; every byte
    lands."""
    stand_in_driver(monkeypatch, lib_path)
    lib = ctypes.CDLL(str(lib_path))
    out = (ctypes.c_longlong * (3 * 4096))()

    def log() -> list[tuple[int, int, int]]:
        m = lib.fake_log(out)
        return [(out[k], out[k + 1], out[k + 2]) for k in range(0, m, 3)]

    api = staging_graphs.Graphs()
    mem = HostMemory()
    n = 256 << 10
    src = np.random.default_rng(3).integers(0, 255, n, dtype=np.uint8)
    host, dev = mem.alloc(n), mem.alloc(n)
    ctypes.memmove(host, src.ctypes.data, n)
    log()
    cp = staging_graphs.build_copy(api, [(dev, host, n)], 0, 0, (0x61, 0x62, 0x63), pieces=2)
    built = log()
    assert [b[:2] for b in built] == [(11, 0), (13, 1), (13, 1), (12, 2)] and not cp.flag
    assert cp.launch(cp.exec, ctypes.c_void_p(9)) == 0
    got = np.ctypeslib.as_array((ctypes.c_uint8 * n).from_address(dev))
    np.testing.assert_array_equal(got, src)
    assert log() == [(2, 9, 0x61), (4, dev, 9), (4, dev + n // 2, 9), (1, 0x62, 9)]
