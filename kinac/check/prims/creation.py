"""Creation primitives: ``(iota DT [DIM …] :axis a)`` and ``(full DT [DIM …] v)``.

Why apart: they take no tensor argument, so their dtype and placement come from the call
itself (an optional trailing ``@cpu``/``@cuda(N)``; otherwise the build target's default).
"""

from __future__ import annotations

from typing import Any

from kinac.check import shard_factors as SF
from kinac.check import vjp_rules as VJ
from kinac.check.prims.base import REQ, Args, CArgs, Prim, RuleCtx, ShapeError, register
from kinac.check.prims.common import axis_index, c_axis, device_number_ok
from kinac.check.types import SType
from kinac.tir.graph import FLOAT_DTYPES, TType


def _iota_rule(rc: RuleCtx, a: Args) -> SType | None:
    dt, shape = a.v["dtype"], a.v["shape"]
    if dt == "bool":
        rc.fail("K0602", "`iota` cannot make bool values", None, help="use i32, i64 or a float")
        return None
    if not shape.dims:
        rc.fail("K0405", "`iota` needs at least one dim after any group", None, kw="axis")
        return None
    if axis_index(rc, shape, a.v["axis"], what="the shape of `iota`") is None:
        return None
    if not device_number_ok(rc, a.v["device"]):
        return None
    return SType(dt, shape, a.v["device"])


def _iota_concrete(a: CArgs) -> tuple[TType, dict[str, Any]]:
    dt, shape = a.v["dtype"], a.v["shape"]
    if dt == "bool" or not shape:
        raise ShapeError("iota")
    k = c_axis(len(shape), a.v["axis"])
    return TType(dt, shape, a.v["device"] or a.default_device), {"axis": k}


register(
    Prim(
        "iota",
        "iota",
        (("dtype", "dtype"), ("shape", "shape"), ("device", "device?")),
        (("axis", "int", REQ),),
        _iota_rule,
        _iota_concrete,
        "creation",
        shard_rule=SF.pointwise,
        vjp_rule=VJ.nondifferentiable,
        doc="values 0..n-1 along axis",
    )
)


def _full_rule(rc: RuleCtx, a: Args) -> SType | None:
    dt, shape, v = a.v["dtype"], a.v["shape"], a.v["value"]
    if isinstance(v, float) and dt in ("i32", "i64", "bool"):
        rc.fail(
            "K0603",
            f"`full` of dtype {dt} with the float value {v}",
            None,
            help="write an integer value, or use a float dtype",
        )
        return None
    if not device_number_ok(rc, a.v["device"]):
        return None
    return SType(dt, shape, a.v["device"])


def _full_concrete(a: CArgs) -> tuple[TType, dict[str, Any]]:
    dt, shape, v = a.v["dtype"], a.v["shape"], a.v["value"]
    if isinstance(v, float) and dt not in FLOAT_DTYPES:
        raise ShapeError("float value for an integer full")
    if dt in FLOAT_DTYPES:
        v = float(v)
    elif dt == "bool":
        v = bool(v)
    else:
        v = int(v)
    return TType(dt, shape, a.v["device"] or a.default_device), {"value": v}


register(
    Prim(
        "full",
        "full",
        (("dtype", "dtype"), ("shape", "shape"), ("value", "scalar"), ("device", "device?")),
        (),
        _full_rule,
        _full_concrete,
        "creation",
        shard_rule=SF.pointwise,
        vjp_rule=VJ.nondifferentiable,
        doc="a tensor filled with v",
    )
)
