"""Pass ``select-impl``: library or in-house, chosen per matmul from its dtype and shape.

On the host, f32 and f64 matmuls large enough to amortise a call go to the BLAS that numpy
ships (OpenBLAS, multi-threaded): ``impl = "blas"``. Integer matmuls (no BLAS has them) and tiny
ones (where the call costs more than the arithmetic) become loop nests: ``impl = "loops"``.
The choice is an attribute on ``kina.matmul``, so it shows in the IR and in the golden tests.
"""

from __future__ import annotations

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp, StringAttr
from xdsl.passes import ModulePass

from kinac.ir.dialects.kina import dtype_name, shape_of
from kinac.ir.dialects.kina_struct import MatmulOp

BLAS_DTYPES = ("f32", "f64")
BLAS_MIN_FLOPS = 4096  # M*N*K below this: a loop nest beats the call


def choose(dtype: str, m: int, n: int, k: int) -> str:
    """``"blas"`` or ``"loops"`` for one matrix product of ``dtype`` at ``m x k x n``."""
    if dtype in BLAS_DTYPES and m * n * k >= BLAS_MIN_FLOPS:
        return "blas"
    return "loops"


class SelectImpl(ModulePass):
    """Set ``impl`` on every ``kina.matmul`` that has none."""

    name = "select-impl"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        for o in op.walk():
            if isinstance(o, MatmulOp) and o.impl is None:
                a, b = shape_of(o.lhs.type), shape_of(o.rhs.type)
                impl = choose(dtype_name(o.lhs.type), a[-2], b[-1], a[-1])
                o.properties["impl"] = StringAttr(impl)
