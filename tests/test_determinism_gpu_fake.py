"""The GPU determinism recorder's logic without a GPU: a two-step entry whose "device" memory
is host memory, its kernels Python functions, and a fake driver that copies bytes.

Checks what ``tests/test_determinism_planted.py`` cannot without a GPU: each step's output is
read from the buffer its ``writes`` names (an arena offset, an entry output), a plant's change
is written back before the next step runs (so later steps and the outputs see it), the cache
key carries the launch shape or the library call, and inputs and outputs are checksummed.
"""

from __future__ import annotations

import ctypes
from collections import OrderedDict
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

from kinac.artifacts.gpu import GemmOperand, GpuGemm, GpuLaunch, GpuLoweredEntry, GpuStep
from kinac.artifacts.host import BufferSpec
from kinac.observe.determinism import first_difference, gpu_launch_key, record_gpu
from kinac.rt.cuda import driver
from kinac.rt.cuda.entry import GpuEntry
from kinac.rt.cuda.entry_support import DL_NAMES, array_nbytes
from kinac.rt.cuda.stats import Tracker
from kinac.rt.cuda.tensor import DTYPES, KDL_CUDA, Tensor, contiguous_strides

N = 6


class HostResource:
    """ "Device" memory that is host memory, so the fake driver's copies are real."""

    ordinal = 0

    def __init__(self) -> None:
        self.live: dict[int, Any] = {}
        self._t = Tracker()

    def allocate(self, nbytes: int, stream: int = 0) -> int:
        buf = ctypes.create_string_buffer(max(nbytes, 16) + 16)
        p = (ctypes.addressof(buf) + 15) // 16 * 16
        self.live[p] = buf
        self._t.on_alloc(p, nbytes)
        return p

    def deallocate(self, ptr: int, nbytes: int = 0, stream: int = 0) -> None:
        self._t.on_free(ptr)
        del self.live[ptr]

    def memory_stats(self) -> dict[str, float]:
        return self._t.stats()


class FakeDriver:
    def cuStreamSynchronize(self, s: Any) -> tuple[int]:  # noqa: N802
        return (0,)

    def cuMemcpyDtoH(self, dst: int, src: int, n: int) -> tuple[int]:  # noqa: N802
        ctypes.memmove(dst, src, n)
        return (0,)

    cuMemcpyHtoD = cuMemcpyDtoH  # noqa: N815

    def cuMemsetD8Async(self, dst: int, value: int, n: int, s: Any) -> tuple[int]:  # noqa: N802
        ctypes.memset(dst, value, n)
        return (0,)

    def cuMemcpyDtoHAsync(self, dst: int, src: int, n: int, s: Any) -> tuple[int]:  # noqa: N802
        ctypes.memmove(dst, src, n)
        return (0,)


def _view(ptr: int) -> np.ndarray:
    return np.ctypeslib.as_array((ctypes.c_float * N).from_address(ptr))


def _entry() -> Any:
    """Step 0: arena+0 = 2 * param0 (a launch); step 1: out0 = arena+0 + param1 (a "gemm")."""
    launch = GpuLaunch("k_double", 3, 128, ("param0", "arena+0"))
    op = GemmOperand("arena+0", (0,), N)
    gemm = GpuGemm("f32", "f32", 1, N, 1, 1, op, op, op, "single")
    steps = (
        GpuStep("k0_map", "map", "kernel", "f32", (N,), ("param0",), "arena+0", (launch,)),
        GpuStep("k1_matmul", "matmul", "cublas", "f32", (N,), ("arena+0", "param1"), "out0", (), gemm),
    )  # fmt: skip
    params = (BufferSpec("x", "f32", (N,)), BufferSpec("y", "f32", (N,)))
    outs = (BufferSpec("o", "f32", (N,)),)
    lw = GpuLoweredEntry("e", "", params, outs, ("cuda:0",) * 2, ("cuda:0",), 64, 0, steps, ())
    e = GpuEntry.__new__(GpuEntry)
    e.lowered, e.ordinal, e.pinned = lw, 0, True
    e.resource = HostResource()
    e.device = SimpleNamespace(enter=lambda: False, leave=lambda pushed: None, arch="sm_90")  # type: ignore[assignment]
    e._out_specs = [(o.shape, DTYPES[DL_NAMES[o.dtype]], array_nbytes(o.dtype, o.shape),
                     contiguous_strides(o.shape)) for o in outs]  # fmt: skip
    e._host_outputs, e.use_graphs, e.max_graphs, e.status = [], True, 8, 0
    e.stream = SimpleNamespace(cu=0, handle=0, synchronize=lambda: None)  # type: ignore[assignment]
    e._imports, e._last_box, e._stager = {}, [None], None
    e._seen, e.volatile, e._stage, e._bound = [set() for _ in range(3)], set(), {}, OrderedDict()
    e.captures = e.replays = 0
    e.arena = e.resource.allocate(64)

    def bind(ptrs: tuple[int, ...]) -> Any:
        x, y, out = ptrs

        def k0(stream: Any) -> None:
            _view(e.arena)[:] = 2 * _view(x)

        def k1(stream: Any) -> None:
            _view(out)[:] = _view(e.arena) + _view(y)

        return None, [k0, k1]

    e._bind = bind  # type: ignore[assignment,method-assign]
    return e


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(driver, "_api", FakeDriver())
    monkeypatch.setattr(driver, "OK", 0)


def _tensor(res: HostResource, values: np.ndarray) -> Tensor:
    t = Tensor(res.allocate(values.nbytes), values.shape, "float32", device=(KDL_CUDA, 0))
    _view(t.ptr)[:] = values
    return t


def test_steps_are_read_where_they_write_and_plants_reach_later_steps(fake: None) -> None:
    e = _entry()
    x = _tensor(e.resource, np.arange(N, dtype=np.float32))
    y = _tensor(e.resource, np.full(N, 0.5, np.float32))
    seen: list[tuple[int, np.ndarray]] = []

    def watch(i: int, out: np.ndarray) -> bool:
        seen.append((i, out.copy()))
        return False

    base = record_gpu(e, (x, y), "g", watch)
    np.testing.assert_array_equal(seen[0][1], 2 * np.arange(N))  # read from the arena
    np.testing.assert_array_equal(seen[1][1], 2 * np.arange(N) + 0.5)  # read from out0
    assert [k["cache_key"] for k in base["kernels"]][0] == {
        "arch": "sm_90", "layout": "row-major", "tile": "3x128"}  # fmt: skip
    assert base["kernels"][1]["cache_key"]["tile"].startswith("cublas m1 n6 k1 batch1 single")
    assert all(k["stability"] == "bit" for k in base["kernels"])
    assert first_difference(base, record_gpu(e, (x, y), "g")) is None

    def plant(i: int, out: np.ndarray) -> bool:  # one ulp off in element 3 of step 0
        if i == 0:
            out[3] = np.nextafter(out[3], np.float32(np.inf))
        return i == 0

    planted = record_gpu(e, (x, y), "g", plant)
    why = first_difference(base, planted) or ""
    assert why.startswith("kernel 0 (k0_map, map f32[6]) is the first whose output differs")
    assert planted["kernels"][1]["checksum"] != base["kernels"][1]["checksum"]  # written back
    assert planted["outputs"] != base["outputs"] and planted["inputs"] == base["inputs"]


def test_gpu_launch_key_of_each_kind() -> None:
    la = GpuLaunch("f", 10, 256, ("param0",))
    lb = GpuLaunch("g", 2, 64, ("param0",))
    s = GpuStep("k", "map", "kernel", "f32", (4,), (), "out0", (la, lb))
    assert gpu_launch_key(s) == "10x256 2x64"
    assert gpu_launch_key(GpuStep("k", "map", "kernel", "f32", (4,), (), "out0")) == "kernel"
