"""CPU-side tests of the CUDA runtime: lazy imports, error text, test-kernel PTX."""

from __future__ import annotations

import subprocess
import sys

from kinac.codegen.ptx_testkernels import copy_v4_ptx, hand_kernels_ptx
from kinac.rt.cuda.errors import CudaError, CudaOutOfMemoryError, OutOfMemoryError


def test_importing_the_runtime_does_not_import_cuda() -> None:
    code = (
        "import sys, kinac.rt.cuda, kinac.rt.cuda.dlpack, kinac.rt.cuda.testing;"
        "print(any(m == 'cuda' or m.startswith('cuda.') for m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_only_driver_py_imports_cuda() -> None:
    from pathlib import Path

    import kinac.rt.cuda as pkg

    root = Path(pkg.__file__).parent
    import re

    # cuda-python itself (``import cuda...`` / ``from cuda...``), not kinac's own ``kinac.rt.cuda``
    pattern = re.compile(r"^\s*(import cuda\b|from cuda(\.| import))", re.M)
    importers = sorted(p.name for p in root.glob("*.py") if pattern.search(p.read_text()))
    assert importers == ["driver.py"]


def test_error_messages_name_call_and_error() -> None:
    e = CudaError(
        "cuModuleLoadData",
        218,
        "CUDA_ERROR_INVALID_PTX",
        "a PTX JIT compilation failed",
        "ptxas: line 3",
    )
    assert (
        str(e)
        == "cuModuleLoadData failed: CUDA_ERROR_INVALID_PTX (218): a PTX JIT compilation failed\nptxas: line 3"
    )
    assert isinstance(
        CudaOutOfMemoryError("cuMemAlloc", 2, "CUDA_ERROR_OUT_OF_MEMORY", "out of memory"),
        MemoryError,
    )
    oom = OutOfMemoryError(
        1 << 30, "pool", {"reserved_bytes.all.current": 2.0, "num_ooms": 1}, "boom"
    )
    assert "pool could not allocate 1073741824 bytes" in str(oom)
    assert "reserved_bytes.all.current=2" in str(oom) and "cause: boom" in str(oom)


def test_availability_is_a_bool_without_raising() -> None:
    from kinac.rt import cuda

    assert isinstance(cuda.available(), bool)
    if not cuda.available():
        assert cuda.unavailable_reason()


def test_hand_kernels_ptx() -> None:
    ptx = hand_kernels_ptx()
    for name in ("fill_u32", "axpy_f32", "scale_add_f32", "noop8", "noop0"):
        assert f".visible .entry {name}(" in ptx
    assert ".target sm_90" in ptx


def test_llvmlite_copy_kernel_uses_16_byte_loads() -> None:
    ptx = copy_v4_ptx()
    assert ".visible .entry copy_v4(" in ptx and ".target sm_90" in ptx
    assert "ld.global.nc.v4" in ptx and "st.global.v4" in ptx


def test_launch_parameter_array_is_built_once_and_updated_in_place() -> None:
    import ctypes

    import pytest

    pytest.importorskip("cuda.bindings")
    from kinac.rt.cuda.module import Kernel, Launch

    k = Kernel.__new__(Kernel)
    k.handle, k.address, k.name = None, 0, "fake"
    launch = Launch(k, ("ptr", "u32", "f32", "i64"), 4, 128, args=(0x1000, 7, 1.5, -2))
    assert launch.grid == (4, 1, 1) and launch.block == (128, 1, 1)
    params = launch._params
    assert isinstance(params, int)
    slots = (ctypes.c_void_p * 4).from_address(params)
    before = [slots[i] for i in range(4)]

    def values() -> tuple[int, int, float, int]:
        return (
            ctypes.c_uint64.from_address(slots[0]).value,  # type: ignore[arg-type]
            ctypes.c_uint32.from_address(slots[1]).value,  # type: ignore[arg-type]
            ctypes.c_float.from_address(slots[2]).value,  # type: ignore[arg-type]
            ctypes.c_int64.from_address(slots[3]).value,  # type: ignore[arg-type]
        )

    assert values() == (0x1000, 7, 1.5, -2)
    launch.update((0x2000, 7, 1.5, -2))
    launch.set(1, 9)
    assert values() == (0x2000, 9, 1.5, -2) and launch.args == (0x2000, 9, 1.5, -2)
    assert [slots[i] for i in range(4)] == before  # same cells: the array was not rebuilt
    with pytest.raises(TypeError, match="takes 4 arguments"):
        launch.update((1, 2))
    with pytest.raises(TypeError, match="bad arguments"):
        launch.update((-1, 7, 1.5, -2))  # a pointer cannot be negative
    with pytest.raises(ValueError, match="unknown kernel argument type"):
        Launch(k, ("ptr", "bf16"), 1, 1)
