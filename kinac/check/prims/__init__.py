"""The primitive table (spec section 5), one module per family; importing this package fills
:data:`PRIMS`."""

from kinac.check.prims import creation, elementwise, matmul, placement, reduce, select, shape
from kinac.check.prims.base import PRIMS, Args, CArgs, Prim, RuleCtx, ShapeError, find

__all__ = ["PRIMS", "Args", "CArgs", "Prim", "RuleCtx", "ShapeError", "find"]
_ = (creation, elementwise, matmul, placement, reduce, select, shape)
