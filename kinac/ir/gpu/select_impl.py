"""Pass ``gpu-select-impl``: which matmuls go to cuBLAS and which become generated kernels.

On the GPU every float matmul (f64, f32, f16, bf16; 2-D, batched, with broadcast batch dims,
the attention's batched products included) is a library call (``impl = "blas"``: cuBLAS or
cuBLASLt, see :mod:`kinac.ir.gpu.gemm`); integer matmuls, which cuBLAS does not offer in
general, become a generated kernel (``impl = "loops"``). Unlike the host there is no size
threshold: inside a CUDA graph a library call costs no more to launch than a kernel. The
choice is the ``impl`` attribute of ``kina.matmul``, so it shows in the IR. cuBLAS takes
32-bit sizes and leading dimensions (``int``): a product with an operand of 2^31 elements or
more becomes a generated kernel too, whose index arithmetic is 64-bit at that size.
"""

from __future__ import annotations

import math

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp, StringAttr
from xdsl.passes import ModulePass

from kinac.dtypes import FLOAT_DTYPES
from kinac.ir.dialects.kina import dtype_name, shape_of
from kinac.ir.dialects.kina_struct import MatmulOp

CUBLAS_DTYPES = FLOAT_DTYPES  # cuBLAS(Lt) takes every float dtype kinac has
CUBLAS_MAX_ELEMENTS = 2**31 - 1  # every size, leading dim and batch count cuBLAS takes is int


def choose(dtype: str, *numels: int) -> str:
    """``"blas"`` (cuBLAS) or ``"loops"`` (a generated kernel) for a matmul of ``dtype`` whose
    operands and result have ``numels`` elements (each bounds every size cuBLAS would get)."""
    fits = all(n <= CUBLAS_MAX_ELEMENTS for n in numels)
    return "blas" if dtype in CUBLAS_DTYPES and fits else "loops"


class GpuSelectImpl(ModulePass):
    """Set ``impl`` on every ``kina.matmul`` that has none."""

    name = "gpu-select-impl"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        for o in op.walk():
            if isinstance(o, MatmulOp) and o.impl is None:
                sizes = (math.prod(shape_of(v.type)) for v in (o.lhs, o.rhs, o.result))
                o.properties["impl"] = StringAttr(choose(dtype_name(o.lhs.type), *sizes))
