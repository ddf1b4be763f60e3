"""Elementwise primitives: unary ops, ``cast``, binary arithmetic, comparisons, ``where``.

Why here: they share broadcasting and the weak-scalar dtype rule (a literal or a dim used as a
value takes the dtype of the tensor it meets; alone it stays weak and becomes f32). The unary,
binary and comparison primitives are not listed here: one checker entry is made per definition
in :mod:`kinac.prims.defs`, with the typing rule its ``kind`` names.
"""

from __future__ import annotations

from typing import Any

from kinac.check import shard_factors as SF
from kinac.check import vjp_rules as VJ
from kinac.check.prims.base import REQ, Args, CArgs, Prim, RuleCtx, ShapeError, register
from kinac.check.prims.common import (
    broadcast,
    c_broadcast,
    c_device,
    c_dtype,
    join_device,
    join_dtype,
    need_float,
)
from kinac.check.types import WEAK_F, WEAK_I, SShape, SType, is_float
from kinac.prims.elementwise import ELEMENTWISE, Elementwise
from kinac.tir.graph import FLOAT_DTYPES, TType

T1 = (("x", "tensor"),)
T2 = (("x", "tensor"), ("y", "tensor"))


def _unary_rule(op: str) -> Any:
    def rule(rc: RuleCtx, a: Args) -> SType | None:
        t = a.t[0]
        if not need_float(rc, t, 0, op):
            return None
        if t.is_weak:
            if t.shape.dims or t.shape.group is not None:  # a weak `where`: weak alone is f32
                return SType("f32", t.shape, t.device, t.shards)
            return SType(WEAK_F, SShape(None, ()))
        return t

    return rule


def _unary_concrete(op: str) -> Any:
    def concrete(a: CArgs) -> tuple[TType, dict[str, Any]]:
        t = a.t[0]
        if t.dtype not in FLOAT_DTYPES and t.dtype not in (WEAK_F, WEAK_I):
            raise ShapeError(f"{op} of {t.dtype}")
        if t.dtype in (WEAK_F, WEAK_I) and t.shape:
            return TType("f32", t.shape, t.device), {}
        if t.dtype == WEAK_I:
            return TType(WEAK_F, (), ""), {}
        return t, {}

    return concrete


def _cast_rule(rc: RuleCtx, a: Args) -> SType | None:
    t = a.t[0]
    dt = a.v["to"]
    return SType(dt, t.shape, t.device, t.shards)


def _cast_concrete(a: CArgs) -> tuple[TType, dict[str, Any]]:
    t = a.t[0]
    return TType(a.v["to"], t.shape, t.device), {}


register(
    Prim(
        "cast",
        "cast",
        T1,
        (("to", "dtype", REQ),),
        _cast_rule,
        _cast_concrete,
        "elementwise",
        shard_rule=SF.pointwise,
        vjp_rule=VJ.cast,
        doc="same shape, dtype DT",
    )
)


def _binary_rule(op: str, result_bool: bool, weak_float: bool = False) -> Any:
    """``weak_float``: two weak integers make a weak float (``div``, ``pow``), as the folder
    computes them: ``(div 8 2)`` is 4.0, so it meets an i32 tensor as a float literal does."""

    def rule(rc: RuleCtx, a: Args) -> SType | None:
        ts = a.t
        idx = list(range(len(ts)))
        dt = join_dtype(rc, ts, idx)
        if dt is None:
            return None
        if weak_float and dt == WEAK_I:
            dt = WEAK_F
        if dt == "bool" and op != "eq":
            rc.fail(
                "K0602",
                f"`{op}` is not defined on bool",
                0,
                help="cast the operands to a numeric dtype first",
            )
            return None
        if op == "pow" and not is_float(dt):
            rc.fail(
                "K0602",
                f"`pow` needs a float dtype but the operands are {dt}",
                0,
                help="cast the operands to a float dtype first",
            )
            return None
        dev = join_device(rc, ts, idx)
        if dev is None:
            return None
        shape = broadcast(rc, ts, idx)
        if shape is None:
            return None
        if result_bool:
            return SType("bool", shape, dev)
        if dt in (WEAK_F, WEAK_I) and (shape.dims or shape.group is not None):
            # a weak dtype over a non-scalar shape becomes f32, as in the concrete rule
            return SType("f32", shape, dev)
        return SType(dt, shape, dev)

    return rule


def _binary_concrete(op: str, result_bool: bool, weak_float: bool = False) -> Any:
    def concrete(a: CArgs) -> tuple[TType, dict[str, Any]]:
        dt = c_dtype(a.t)
        if weak_float and dt == WEAK_I:
            dt = WEAK_F
        if dt == "bool" and op != "eq":
            raise ShapeError(f"{op} on bool")
        if op == "pow" and dt not in FLOAT_DTYPES and dt != WEAK_F:
            raise ShapeError("pow on integers")
        dev = c_device(a.t)
        shape = c_broadcast([t.shape for t in a.t])
        if result_bool:
            dt = "bool"
        elif dt in (WEAK_F, WEAK_I) and shape:
            dt = "f32"
        return TType(dt, shape, dev), {}

    return concrete


_DOCS = {
    "float": "shape- and dtype-preserving (float dtypes)",
    "numeric": "shape- and dtype-preserving",
    "arith": "broadcasting; same dtype",
    "compare": "broadcasting; result bool",
}


def _register(d: Elementwise) -> None:
    """The checker entry of one elementwise definition: its rule is chosen by its kind."""
    if d.arity == 1:
        rule, concrete = _unary_rule(d.name), _unary_concrete(d.name)
    else:
        weak_float = "weak_int_to_float" in d.traits
        rule = _binary_rule(d.name, d.kind == "compare", weak_float)
        concrete = _binary_concrete(d.name, d.kind == "compare", weak_float)
    register(
        Prim(
            d.name,
            d.graph_op,
            T1 if d.arity == 1 else T2,
            (),
            rule,
            concrete,
            "elementwise",
            doc=d.doc or _DOCS[d.kind],
            traits=d.traits,
            vjp_rule=VJ.from_formula(d),
            shard_rule=d.shard_factors or SF.pointwise,
            definition=d,
        )
    )


for _d in ELEMENTWISE.values():
    _register(_d)


def _where_rule(rc: RuleCtx, a: Args) -> SType | None:
    c, x, y = a.t
    if c.dtype != "bool":
        rc.fail(
            "K0602",
            f"the condition {rc.name(0)} of `where` must be bool, not "
            f"{c.dtype if not c.is_weak else 'a literal'}",
            0,
            help="build it with a comparison such as (gt a b)",
        )
        return None
    dt = join_dtype(rc, [x, y], [1, 2])
    dev = join_device(rc, a.t, [0, 1, 2])
    if dt is None or dev is None:
        return None
    shape = broadcast(rc, a.t, [0, 1, 2])
    if shape is None:
        return None
    # literals on both sides stay weak (with the condition's shape): `(add x (where c 1 2))`
    # takes x's dtype, as `(add x 1)` does; alone it is f32 (types.settle_weak)
    return SType(dt, shape, dev)


def _where_concrete(a: CArgs) -> tuple[TType, dict[str, Any]]:
    c, x, y = a.t
    if c.dtype != "bool":
        raise ShapeError("where condition is not bool")
    dt = c_dtype([x, y])  # literals on both sides stay weak, as in the symbolic rule
    dev = c_device(a.t)
    return TType(dt, c_broadcast([t.shape for t in a.t]), dev), {}


register(
    Prim(
        "where",
        "where",
        (("c", "tensor"), ("x", "tensor"), ("y", "tensor")),
        (),
        _where_rule,
        _where_concrete,
        "elementwise",
        shard_rule=SF.pointwise,
        vjp_rule=VJ.where,
        doc="broadcasting over the three",
    )
)
