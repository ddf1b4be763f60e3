"""A failure while loading an entry's PTX (the driver's JIT) is a KinaCompileError naming the
entry, the step and the kernel, with the driver's message attached (issue 18).

The CPU tests stand a fake driver failure in for ``cuModuleLoadData``; the ``-m gpu`` test
hands the real driver PTX it rejects.
"""

from __future__ import annotations

from typing import Any

import pytest

from kinac.errors import KinaCompileError
from kinac.ice import InternalCompilerError
from kinac.rt.cuda import module
from kinac.rt.cuda.errors import CudaError, CudaOutOfMemoryError

PTX = """//
.version 8.0
.target sm_90
.address_size 64

.visible .entry k0_map(
\t.param .u64 p0
)
{
\tret;
}

.visible .entry k1_row(
\t.param .u64 p0
)
{
\tbogus.instruction;
\tret;
}
"""


def _failing(exc: BaseException) -> Any:
    def load(ptx: str | bytes) -> Any:
        raise exc

    return load


def test_jit_rejection_names_entry_step_and_kernel(monkeypatch: pytest.MonkeyPatch) -> None:
    err = CudaError(
        "cuModuleLoadData", 218, "CUDA_ERROR_INVALID_PTX", "a PTX JIT compilation failed",
        "ptxas k.ptx, line 17; error   : Not a name of any known instruction: 'bogus'",
    )  # fmt: skip
    monkeypatch.setattr(module, "load_module", _failing(err))
    with pytest.raises(KinaCompileError) as e:
        module.load_entry_module(PTX, "mlp at B=4", ("k0_map", "k1_row"))
    assert isinstance(e.value, InternalCompilerError)
    assert e.value.kernel == "k1_row" and e.value.cause is err
    text = str(e.value)
    assert "entry `mlp at B=4`, stage module loading (CUDA driver PTX JIT), kernel k1_row" in text
    assert "CUDA_ERROR_INVALID_PTX" in text


def test_any_other_load_failure_is_reported_without_a_kernel(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(module, "load_module", _failing(TypeError("bad bindings")))
    with pytest.raises(InternalCompilerError, match=r"stage module loading.*TypeError: bad"):
        module.load_entry_module(PTX, "f", ("k0_map",))


def test_a_missing_kernel_names_it(monkeypatch: pytest.MonkeyPatch) -> None:
    class Mod:
        def function(self, name: str) -> Any:
            if name == "k1_row":
                raise CudaError("cuModuleGetFunction", 500, "CUDA_ERROR_NOT_FOUND", "named symbol")
            return object()

    monkeypatch.setattr(module, "load_module", lambda ptx: Mod())
    with pytest.raises(InternalCompilerError, match=r"kernel lookup.*kernel k1_row"):
        module.load_entry_module(PTX, "f", ("k0_map", "k1_row"))


def test_out_of_memory_stays_the_environments(monkeypatch: pytest.MonkeyPatch) -> None:
    oom = CudaOutOfMemoryError("cuModuleLoadData", 2, "CUDA_ERROR_OUT_OF_MEMORY", "out of memory")
    monkeypatch.setattr(module, "load_module", _failing(oom))
    with pytest.raises(CudaOutOfMemoryError):
        module.load_entry_module(PTX, "f", ("k0_map",))


def test_kernel_at_line() -> None:
    assert module.kernel_at_line(PTX, 3) is None
    assert module.kernel_at_line(PTX, 10) == "k0_map"
    assert module.kernel_at_line(PTX, 17) == "k1_row"


@pytest.mark.gpu
def test_the_drivers_rejection_is_a_compile_error() -> None:
    from kinac.ir.gpu.pipeline import lower_graph_gpu
    from kinac.ir.testing import GraphBuilder
    from kinac.rt import cuda
    from kinac.rt.cuda.entry import load_gpu_entry

    if not cuda.available():
        pytest.skip("no CUDA GPU")
    g = GraphBuilder("bad_ptx")
    lw = lower_graph_gpu(g.build(g.unary("exp", g.param("x", "f32", (4,)))))
    with pytest.raises(KinaCompileError, match=r"entry `bad_ptx`, stage module loading"):
        load_gpu_entry(lw, PTX)


BAD_IR = """target triple = "nvptx64-nvidia-cuda"

define ptx_kernel void @k0_map(ptr addrspace(1) %p) {
entry:
  ret void
}

define ptx_kernel void @k1_row(ptr addrspace(1) %p) {
entry:
  %t1 = fadd float %undefined, 1.0
  ret void
}
"""


def test_an_llvm_error_in_ptx_generation_names_its_kernel() -> None:
    """llvmlite's parse error (``<string>:LINE:COL``) is mapped to the function holding it,
    and the pipeline's internal error names that kernel."""
    from kinac.codegen.ptx import compile_ptx, function_at_line
    from kinac.ice import internal_errors

    assert function_at_line(BAD_IR, 10) == "k1_row"
    assert function_at_line(BAD_IR, 7) is None  # between functions
    with pytest.raises(InternalCompilerError) as e:
        with internal_errors("f at N=3", "PTX generation (LLVM NVPTX)"):
            compile_ptx(BAD_IR)
    assert e.value.kernel == "k1_row"
    assert "stage PTX generation (LLVM NVPTX), kernel k1_row" in str(e.value)
