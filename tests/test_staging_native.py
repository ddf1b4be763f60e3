"""The stager's native driver calls (``staging_calls.Calls`` through ctypes), without a GPU.

The hot path calls libcuda's ``cuEventRecord``, ``cuStreamWaitEvent``, ``cuEventSynchronize``
and ``cuMemcpyHtoDAsync_v2`` through ctypes with pre-built arguments; a wrong signature (the
v1 copy with its 32-bit device address, arguments swapped, a Python int passed where a pointer
goes) would only show on a GPU. Here a stand-in libcuda compiled from C (skipped without a C
compiler) logs what it receives and performs the copies, and the stager runs over it: the
device buffers get the data, and every call gets the handles and addresses it should.
"""

from __future__ import annotations

import ctypes
from pathlib import Path

import numpy as np
import pytest
from staging_fakes import compile_stand_in, stand_in_driver
from test_pinned import HostMemory

from kinac.rt.cuda import device, staging, staging_calls
from kinac.rt.cuda.pinned import PinnedPool

SRC = r"""
#include <string.h>
static long long buf[3 * 4096];
static int n = 0;
static void put(long long op, long long a, long long b) {
  if (n + 3 <= 3 * 4096) { buf[n++] = op; buf[n++] = a; buf[n++] = b; }
}
int cuEventRecord(void *e, void *s) { put(1, (long long)e, (long long)s); return 0; }
int cuStreamWaitEvent(void *s, void *e, unsigned f) {
  put(2, (long long)s, (long long)e); return f ? 1 : 0; }
int cuEventSynchronize(void *e) { put(3, (long long)e, 0); return 0; }
int cuMemcpyHtoDAsync_v2(unsigned long long dst, const void *src, size_t nb, void *s) {
  memmove((void *)dst, src, nb); put(4, (long long)dst, (long long)s); return 0; }
int cuMemcpyHtoDAsync(unsigned int dst, const void *src, size_t nb, void *s) { return 999; }
int fake_log(long long *out) { int m = n; memcpy(out, buf, sizeof(long long) * m); n = 0; return m; }
"""


@pytest.fixture(scope="module")
def lib_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    so = compile_stand_in(SRC, tmp_path_factory.mktemp("fakecuda"), "libfakecuda.so")
    if so is None:
        pytest.skip("no C compiler for the stand-in libcuda")
    return so


def test_native_calls_pass_what_the_driver_expects(
    lib_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # events and streams are made through the bindings (once)
    stand_in_driver(monkeypatch, lib_path)
    monkeypatch.setattr(staging_calls, "_native", None)
    calls = staging_calls._native_calls()
    assert calls.native
    log_fn = ctypes.CDLL(str(lib_path)).fake_log
    out = (ctypes.c_longlong * (3 * 4096))()

    def log() -> list[tuple[int, int, int]]:
        m = log_fn(out)
        return [(out[k], out[k + 1], out[k + 2]) for k in range(0, m, 3)]

    dev = HostMemory()
    st = staging.HostStager(
        dev.alloc, PinnedPool(alloc=HostMemory().alloc, free=lambda p: None), calls=calls
    )
    cs = st.copy_stream.handle
    compute = device.Stream.wrap(7)
    for k in range(3):
        x = np.arange(12, dtype=np.float64).reshape(3, 4) + k  # cast to f32 on the way
        p = st.stage(0, x, (3, 4), "float32")
        st.before_run(compute)
        st.after_run(compute)
        got = np.ctypeslib.as_array((ctypes.c_float * 12).from_address(p)).reshape(3, 4)
        np.testing.assert_array_equal(got, x.astype(np.float32))
        t = st.turns[k % 2]
        c, u = t.copied.handle, t.consumed.handle
        want = [(4, p, cs), (1, c, cs), (2, 7, c), (1, u, 7)]
        if k == 2:  # the turn's second use: the host waits for its DMA, the copy stream for
            want = [(3, c, 0), (2, cs, u), *want]  # its compute
        assert log() == want
    st.close()
