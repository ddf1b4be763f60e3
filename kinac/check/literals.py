"""Which literal values fit which dtypes.

Why: a weak literal takes the dtype of the tensor it meets (spec §4); a value that dtype cannot
hold would otherwise wrap (``3000000000`` as i32 is -1294967296) or overflow to infinity
(``1e39`` as f32) silently, or crash a later stage. The checker (K0604 for literals, K0605
obligations for dims used as values) and specialisation (the folded values it materialises)
share these limits.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from kinac.check import dims as D
from kinac.check.formula import Rel
from kinac.check.typed_ir import TCall, TConst, TDim, TExpr, TLocal, TPrim
from kinac.dtypes import FLOAT_DTYPES, ITEMSIZE
from kinac.prims.elementwise import names
from kinac.reader import ast
from kinac.tir.graph import DTYPES

if TYPE_CHECKING:
    from kinac.check.infer import Checker

# The smallest magnitude that rounds to infinity (round to nearest even): max + half an ulp.
_FLOAT_OVERFLOW = {
    "f16": 65520.0,
    "bf16": (2 - 2**-8) * 2.0**127,
    "f32": (2 - 2**-24) * 2.0**127,
}
_INT_RANGE = {"i32": (-(2**31), 2**31 - 1), "i64": (-(2**63), 2**63 - 1), "bool": (0, 1)}


def fits(value: int | float | bool, dtype: str) -> bool:
    """Whether ``value`` converts to ``dtype`` without wrapping or overflowing. The named
    constants ``inf``/``-inf``/``nan`` are meant as such and fit every float dtype."""
    if isinstance(value, bool):
        return True
    if dtype in _INT_RANGE:
        lo, hi = _INT_RANGE[dtype]
        return isinstance(value, int) and lo <= value <= hi
    if isinstance(value, float) and not math.isfinite(value):
        return True
    limit = _FLOAT_OVERFLOW.get(dtype)
    return limit is None or abs(value) < limit


_FLOATS_BY_WIDTH = tuple(sorted(FLOAT_DTYPES, key=lambda d: (ITEMSIZE[d], d != "f16")))


def _wider(value: int | float | bool, dtype: str) -> str:
    """The narrowest dtype of ``dtype``'s kind wider than it that holds ``value`` (f16 -> f32
    for 1e6, not f64 as before; bool -> i32 for 2)."""
    order = ("bool", "i32", "i64") if dtype in _INT_RANGE else _FLOATS_BY_WIDTH
    later = order[order.index(dtype) + 1 :] if dtype in order else order
    return next((d for d in later if fits(value, d) and d != "bf16"), order[-1])


def dim_limit(dtype: str) -> int | None:
    """The largest dim value ``dtype`` holds when a dim is used as a value, or None when every
    dim fits (dims are positive and below 2^63)."""
    if dtype in ("i32", "bool"):
        return _INT_RANGE[dtype][1]
    if dtype == "f16":
        return 65519
    return None


def range_text(dtype: str) -> str:
    """The range of ``dtype`` for messages."""
    if dtype in _INT_RANGE:
        lo, hi = _INT_RANGE[dtype]
        return f"{lo} … {hi}"
    if dtype in _FLOAT_OVERFLOW:
        return {"f16": "±65504", "bf16": "±3.39e38", "f32": "±3.40e38"}[dtype]
    return "finite f64 values"


# ---------------------------------------------------------------- in the checker


def check_fit(ck: Checker, e: TExpr, dtype: str) -> None:
    """``e`` (a literal or a dim used as a value) meets ``dtype``: a literal must fit (K0604),
    a dim gets the obligation that it fits (K0605). Dtype variables are judged when they are
    known (specialisation), other weak expressions where their folded value is materialised."""
    if dtype not in DTYPES:
        return
    if isinstance(e, TPrim) and e.op == "where" and e.type.is_weak:  # its literals meet dtype
        for branch in e.args[1:]:
            check_fit(ck, branch, dtype)
        return
    if isinstance(e, TLocal) and e.name in ck.weak_locals:  # `(let [(c 3000000000)] …)`
        bound = ck.weak_locals[e.name]
        if isinstance(bound, TConst):
            e = TConst(e.nid, bound.value, bound.type)
        elif isinstance(bound, TDim):
            e = TDim(e.nid, bound.dim, bound.type)
    if isinstance(e, TConst) and not fits(e.value, dtype):
        raise ck.err(
            "K0604",
            f"the literal {e.value} does not fit {dtype} ({range_text(dtype)})",
            e.nid,
            help=f"use a value in range, or a wider dtype: (cast … :to {_wider(e.value, dtype)})",
            label=f"out of range for {dtype}",
        )
    if isinstance(e, TDim):
        lim = dim_limit(dtype)
        if lim is None:
            return
        name = D.fmt_kina(e.dim)
        ck.require(
            Rel("le", e.dim, D.const(lim)),
            "K0605",
            f"`{name}` is used as {_an(dtype)} {dtype} value",
            e.nid,
            help=f"assume a bound: (where (<= {name} {lim})), or meet a wider dtype",
        )


def _an(dtype: str) -> str:
    return "an" if dtype in ("i32", "i64", "f16", "f32", "f64") else "a"


MEET_ALL = names("arith") + names("compare")
"""The binary primitives whose operands all meet one dtype (from their definitions)."""


def check_prim_literals(ck: Checker, t: TPrim, call: ast.Call) -> None:
    """The literals among a checked primitive's operands (and ``full``'s value) fit the dtype
    they take."""
    if t.op == "full":
        v, dt = t.attr("value"), t.attr("dtype")
        node = call.args[2]
        if isinstance(v, D.Poly):
            check_fit(ck, TDim(node.nid, v, t.type), dt)
        elif isinstance(v, int | float):
            check_fit(ck, TConst(node.nid, v, t.type), dt)
        return
    if t.op == "cast":
        if t.args and t.args[0].type.is_weak:
            check_fit(ck, t.args[0], str(t.attr("to")))
        return
    if t.op in MEET_ALL or t.op == "where":
        ops = t.args[1:] if t.op == "where" else t.args
        strong = next((a.type.dtype for a in ops if not a.type.is_weak), None)
        if strong is not None:
            for a in ops:
                if a.type.is_weak:
                    check_fit(ck, a, strong)


def check_call_literals(ck: Checker, t: TCall, sig_ast: ast.Signature) -> None:
    """Literals passed to a defn fit the parameter's dtype (a dtype variable as bound)."""
    inst = dict(t.inst.dtypes)
    params = [p for p in sig_ast.params if not p.is_dim and p.type is not None]
    for p, a in zip(params, t.args, strict=False):
        if a.type.is_weak and p.type is not None:
            check_fit(ck, a, inst.get(p.type.dtype, p.type.dtype))
