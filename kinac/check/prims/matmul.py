"""``matmul`` with variadic batch dims: ``[.. M K] x [.. K N] -> [.. M N]``, batch dims broadcast.

Why its own module: the contraction obligation (K = K') is the most common shape error in
model code and gets its own code (K0403) and message.
"""

from __future__ import annotations

from typing import Any

from kinac.check import dims as D
from kinac.check import shard_factors as SF
from kinac.check import vjp_rules as VJ
from kinac.check.formula import Rel
from kinac.check.prims.base import Args, CArgs, Prim, RuleCtx, ShapeError, register
from kinac.check.prims.common import ONE, bcast_pair, c_broadcast, c_device, join_device, join_dtype
from kinac.check.types import SShape, SType
from kinac.tir.graph import TType


def _rule(rc: RuleCtx, a: Args) -> SType | None:
    x, y = a.t
    if (
        not x.is_weak
        and x.shape.group is not None
        and len(x.shape.dims) == 1
        and not y.is_weak
        and y.shape.group is None
        and len(y.shape.dims) == 2
    ):
        # [..b K] x [K N] -> [..b N]: the group holds the rows (numpy: a vector when empty)
        x = SType(x.dtype, SShape(x.shape.group, (ONE,) + x.shape.dims), x.device)
        t = _rule(rc, Args([x, y], a.v))
        if t is None:
            return None
        return SType(t.dtype, SShape(t.shape.group, (t.shape.dims[-1],)), t.device)
    for t, i in ((x, 0), (y, 1)):
        if t.is_weak or len(t.shape.dims) < 2:
            rc.fail(
                "K0402",
                f"`matmul` needs operands of rank >= 2 but {rc.name(i)} has "
                f"{'rank 0' if t.is_weak else f'{len(t.shape.dims)} fixed dims'}",
                i,
                help="reshape a vector to [1 K] or [K 1] first",
            )
            return None
    dt = join_dtype(rc, [x, y], [0, 1])
    dev = join_device(rc, [x, y], [0, 1])
    if dt is None or dev is None:
        return None
    if dt == "bool":
        rc.fail("K0602", "`matmul` is not defined on bool", 0, help="cast to a numeric dtype")
        return None
    k1, k2 = x.shape.dims[-1], y.shape.dims[-2]
    ok = rc.require(
        Rel("eq", k1, k2),
        "K0403",
        f"matmul contraction mismatch: the last dim of {rc.name(0)} ({D.fmt_infix(k1)}) must "
        f"equal the second-to-last dim of {rc.name(1)} ({D.fmt_infix(k2)})",
        (0, 1),
        help="transpose or reshape one operand so that the contracted dims agree",
    )
    batch = bcast_pair(
        rc,
        SShape(x.shape.group, x.shape.dims[:-2]),
        SShape(y.shape.group, y.shape.dims[:-2]),
        0,
        1,
    )
    if not ok or batch is None:
        return None
    return SType(dt, SShape(batch.group, batch.dims + (x.shape.dims[-2], y.shape.dims[-1])), dev)


def _concrete(a: CArgs) -> tuple[TType, dict[str, Any]]:
    x, y = a.t
    if len(x.shape) == 1 and len(y.shape) == 2 and x.dtype == y.dtype and x.dtype != "bool":
        if x.shape[0] != y.shape[0]:
            raise ShapeError(f"matmul contraction {x.shape[0]} vs {y.shape[0]}")
        return TType(x.dtype, (y.shape[1],), c_device([x, y])), {}
    if len(x.shape) < 2 or len(y.shape) < 2:
        raise ShapeError("matmul of rank < 2")
    if x.dtype != y.dtype or x.dtype == "bool":
        raise ShapeError("matmul dtypes")
    if x.shape[-1] != y.shape[-2]:
        raise ShapeError(f"matmul contraction {x.shape[-1]} vs {y.shape[-2]}")
    batch = c_broadcast([x.shape[:-2], y.shape[:-2]])
    return TType(x.dtype, batch + (x.shape[-2], y.shape[-1]), c_device([x, y])), {}


register(
    Prim(
        "matmul",
        "matmul",
        (("a", "tensor"), ("b", "tensor")),
        (),
        _rule,
        _concrete,
        "matmul",
        shard_rule=SF.matmul,
        vjp_rule=VJ.matmul,
        doc="[..., M, K] x [..., K, N] -> [..., M, N]",
    )
)
