"""Pass ``gpu-select-impl``: which matmuls go to cuBLAS and which become generated kernels.

On the GPU every float matmul (f64, f32, f16, bf16; 2-D, batched, with broadcast batch dims,
the attention's batched products included) is a library call (``impl = "blas"``: cuBLAS or
cuBLASLt, see :mod:`kinac.ir.gpu_gemm`); integer matmuls, which cuBLAS does not offer in
general, become a generated kernel (``impl = "loops"``). Unlike the host there is no size
threshold: inside a CUDA graph a library call costs no more to launch than a kernel. The
choice is the ``impl`` attribute of ``kina.matmul``, so it shows in the IR.
"""

from __future__ import annotations

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp, StringAttr
from xdsl.passes import ModulePass

from kinac.ir.dialect import dtype_name
from kinac.ir.dialect_struct import MatmulOp

CUBLAS_DTYPES = ("f64", "f32", "f16", "bf16")


def choose(dtype: str) -> str:
    """``"blas"`` (cuBLAS) or ``"loops"`` (a generated kernel) for a matmul of ``dtype``."""
    return "blas" if dtype in CUBLAS_DTYPES else "loops"


class GpuSelectImpl(ModulePass):
    """Set ``impl`` on every ``kina.matmul`` that has none."""

    name = "gpu-select-impl"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        for o in op.walk():
            if isinstance(o, MatmulOp) and o.impl is None:
                o.properties["impl"] = StringAttr(choose(dtype_name(o.lhs.type)))
