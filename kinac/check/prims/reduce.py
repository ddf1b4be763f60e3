"""Reductions (``sum mean max min`` with ``:axis`` and ``:keepdims``) and ``softmax``.

Why together: both address one static axis (negative axes count from the end, which is the
only way to address the dims after a variadic group).
"""

from __future__ import annotations

from typing import Any

from kinac.check import shard_factors as SF
from kinac.check import vjp_rules as VJ
from kinac.check.prims.base import REQ, Args, CArgs, Prim, RuleCtx, ShapeError, register
from kinac.check.prims.common import ONE, axis_index, c_axis, need_float
from kinac.check.types import WEAK_F, WEAK_I, SShape, SType
from kinac.tir.graph import FLOAT_DTYPES, TType

T1 = (("x", "tensor"),)
RED_KW = (("axis", "int", REQ), ("keepdims", "bool", False))


def _reduce_rule(op: str) -> Any:
    def rule(rc: RuleCtx, a: Args) -> SType | None:
        t = a.t[0]
        if t.is_weak:
            rc.fail("K0405", f"`{op}` needs a tensor of rank >= 1, not a scalar", 0)
            return None
        if op == "mean" and not need_float(rc, t, 0, op):
            return None
        if t.dtype == "bool":
            rc.fail(
                "K0602", f"`{op}` is not defined on bool", 0, help="cast to a numeric dtype first"
            )
            return None
        k = axis_index(rc, t.shape, a.v["axis"])
        if k is None:
            return None
        dims = list(t.shape.dims)
        if a.v["keepdims"]:
            dims[k] = ONE
        else:
            del dims[k]
        return SType(t.dtype, SShape(t.shape.group, tuple(dims)), t.device, t.shards)

    return rule


def _reduce_concrete(op: str) -> Any:
    def concrete(a: CArgs) -> tuple[TType, dict[str, Any]]:
        t = a.t[0]
        if t.dtype in (WEAK_F, WEAK_I) or not t.shape:
            raise ShapeError(f"{op} of a scalar")
        if op == "mean" and t.dtype not in FLOAT_DTYPES:
            raise ShapeError("mean of a non-float")
        if t.dtype == "bool":
            raise ShapeError(f"{op} of bool")
        k = c_axis(len(t.shape), a.v["axis"])
        s = list(t.shape)
        keep = bool(a.v["keepdims"])
        if keep:
            s[k] = 1
        else:
            del s[k]
        return TType(t.dtype, tuple(s), t.device), {"axis": k, "keepdims": keep}

    return concrete


_VJPS = {
    "sum": VJ.reduce_sum,
    "mean": VJ.reduce_mean,
    "max": VJ.reduce_extremum,
    "min": VJ.reduce_extremum,
}
for _op in ("sum", "mean", "max", "min"):
    register(
        Prim(
            _op,
            f"reduce_{_op}",
            T1,
            RED_KW,
            _reduce_rule(_op),
            _reduce_concrete(_op),
            "reduce",
            shard_rule=SF.reduction(_op),
            vjp_rule=_VJPS[_op],
            doc="removes (or keeps as 1) axis a",
        )
    )


def _softmax_rule(rc: RuleCtx, a: Args) -> SType | None:
    t = a.t[0]
    if t.is_weak:
        rc.fail("K0405", "`softmax` needs a tensor of rank >= 1, not a scalar", 0)
        return None
    if not need_float(rc, t, 0, "softmax"):
        return None
    if axis_index(rc, t.shape, a.v["axis"]) is None:
        return None
    return t


def _softmax_concrete(a: CArgs) -> tuple[TType, dict[str, Any]]:
    t = a.t[0]
    if t.dtype not in FLOAT_DTYPES or not t.shape:
        raise ShapeError("softmax of a non-float or a scalar")
    return t, {"axis": c_axis(len(t.shape), a.v["axis"])}


register(
    Prim(
        "softmax",
        "softmax",
        T1,
        (("axis", "int", REQ),),
        _softmax_rule,
        _softmax_concrete,
        "reduce",
        shard_rule=SF.whole_axis,
        vjp_rule=VJ.softmax,
        doc="shape-preserving",
    )
)
