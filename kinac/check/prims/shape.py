"""Shape primitives: transpose, reshape, broadcast-to.

Why together: they move dims around without computing, and their obligations are about the
dims themselves (a product, a sum, bounds) rather than about values.
"""

from __future__ import annotations

from typing import Any

from kinac.check import dims as D
from kinac.check import shard_factors as SF
from kinac.check import vjp_rules as VJ
from kinac.check.formula import Rel
from kinac.check.prims.base import Args, CArgs, Prim, RuleCtx, ShapeError, register
from kinac.check.prims.common import (
    ONE,
    not_one,
    provably_one,
)
from kinac.check.types import WEAK_F, WEAK_I, SShape, SType, fmt_dims
from kinac.tir.graph import TType

T1 = (("x", "tensor"),)


def _static_rank(rc: RuleCtx, t: SType, op: str, i: int = 0) -> bool:
    if t.is_weak:
        rc.fail(
            "K0402",
            f"`{op}` needs a tensor, not a scalar",
            i,
            help="make a tensor of the value first: (full DT [DIM …] v)",
        )
        return False
    if t.shape.group is not None:
        rc.fail(
            "K0402",
            f"`{op}` needs a static rank but {rc.name(i)} has the variadic group `{t.shape.group}`",
            i,
            help=f"give `{op}` fixed dims: reshape `{t.shape.group}` away first, or write the "
            "defn over fixed dims",
        )
        return False
    return True


def _transpose_rule(rc: RuleCtx, a: Args) -> SType | None:
    t = a.t[0]
    if not _static_rank(rc, t, "transpose"):
        return None
    n = len(t.shape.dims)
    perm = a.v["perm"]
    if perm is None:
        perm = tuple(range(n - 1, -1, -1))
        rc.set_attr("perm", perm)
    norm = tuple(p + n if p < 0 else p for p in perm)
    if sorted(norm) != list(range(n)):
        rc.fail(
            "K0405",
            f"`:perm {list(perm)}` is not a permutation of the {n} axes of {rc.name(0)}",
            kw="perm",
            help=f"list each of 0 … {n - 1} exactly once",
        )
        return None
    return SType(t.dtype, SShape(None, tuple(t.shape.dims[p] for p in norm)), t.device, t.shards)


def _transpose_concrete(a: CArgs) -> tuple[TType, dict[str, Any]]:
    t = a.t[0]
    n = len(t.shape)
    perm = a.v["perm"] if a.v["perm"] is not None else tuple(range(n - 1, -1, -1))
    norm = tuple(p + n if p < 0 else p for p in perm)
    if sorted(norm) != list(range(n)):
        raise ShapeError(f"bad perm {perm} for rank {n}")
    return TType(t.dtype, tuple(t.shape[p] for p in norm), t.device), {"perm": norm}


register(
    Prim(
        "transpose",
        "transpose",
        T1,
        (("perm", "ints", None),),
        _transpose_rule,
        _transpose_concrete,
        "shape",
        traits=frozenset({"view"}),
        shard_rule=SF.transpose,
        vjp_rule=VJ.transpose,
        doc="permutes dims",
    )
)


def _target_group(rc: RuleCtx, t: SType, target: SShape, op: str) -> tuple[bool, str | None]:
    if target.group is None:
        return True, None
    if t.shape.group is None or (target.group != "..." and target.group != t.shape.group):
        rc.fail(
            "K0402",
            f"`{target.group}` in the target of `{op}` stands for the leading group "
            f"of {rc.name(0)}, which has {t.shape.group or 'none'}",
            0,
            help="write the target's dims in full, or give the operand the group the target names",
        )
        return False, None
    return True, t.shape.group


def _reshape_rule(rc: RuleCtx, a: Args) -> SType | None:
    t = a.t[0]
    target: SShape = a.v["shape"]
    if t.is_weak:
        rc.fail("K0402", "`reshape` needs a tensor, not a scalar", 0)
        return None
    ok, group = _target_group(rc, t, target, "reshape")
    if not ok:
        return None
    if t.shape.group is not None and group is None:
        rc.fail(
            "K0404",
            f"cannot count the elements of {rc.name(0)}: its shape starts with the "
            f"variadic group `{t.shape.group}`",
            0,
            help="keep the group: write `...` first in the target shape",
        )
        return None
    src, dst = D.poly_prod(t.shape.dims), D.poly_prod(target.dims)
    if not rc.require(
        Rel("eq", src, dst),
        "K0404",
        f"reshape from {fmt_dims(t.shape)} to {fmt_dims(target)} changes the number of elements",
        (0,),
        kw="shape",
        help="the product of the target dims must equal the product of the source dims",
    ):
        return None
    return SType(t.dtype, SShape(group, target.dims), t.device)


def _reshape_concrete(a: CArgs) -> tuple[TType, dict[str, Any]]:
    t = a.t[0]
    shape: tuple[int, ...] = a.v["shape"]
    n1 = n2 = 1
    for d in t.shape:
        n1 *= d
    for d in shape:
        n2 *= d
    if n1 != n2 or t.dtype in (WEAK_F, WEAK_I):
        raise ShapeError(f"reshape {t.shape} -> {shape}")
    return TType(t.dtype, shape, t.device), {}


register(
    Prim(
        "reshape",
        "reshape",
        (("x", "tensor"), ("shape", "shape")),
        (),
        _reshape_rule,
        _reshape_concrete,
        "shape",
        traits=frozenset({"view"}),
        shard_rule=SF.reshape,
        vjp_rule=VJ.reshape,
        doc="product of dims unchanged",
    )
)


def _bto_rule(rc: RuleCtx, a: Args) -> SType | None:
    t = a.t[0]
    target: SShape = a.v["shape"]
    xs = SShape(None, ()) if t.is_weak else t.shape
    if target.group == "..." and xs.group is not None:
        target = SShape(xs.group, target.dims)
    if xs.group is not None and (target.group != xs.group or len(xs.dims) != len(target.dims)):
        rc.fail(
            "K0402",
            f"cannot broadcast {rc.name(0)} with group `{xs.group}` to {fmt_dims(target)}",
            0,
            help="keep the same leading group and rank",
        )
        return None
    if len(xs.dims) > len(target.dims):
        rc.fail(
            "K0402",
            f"cannot broadcast {rc.name(0)} of rank {len(xs.dims)} to rank {len(target.dims)}",
            0,
            help="broadcasting adds leading axes, never removes them: reduce or slice first",
        )
        return None
    ok = True
    for k in range(1, len(xs.dims) + 1):
        x, y = xs.dims[-k], target.dims[-k]
        if x != ONE and x != y and not rc.proves(Rel("eq", x, y)) and not provably_one(rc, x):
            ok = (
                rc.require(
                    Rel("eq", x, y),
                    "K0401",
                    f"cannot broadcast {rc.name(0)} to "
                    f"{fmt_dims(target)}: dim -{k} is neither 1 nor equal",
                    (0,),
                    kw="shape",
                    hint=not_one(x),
                )
                and ok
            )
    if not ok:
        return None
    dt = t.dtype if not t.is_weak else "f32"
    return SType(dt, target, t.device)


def _bto_concrete(a: CArgs) -> tuple[TType, dict[str, Any]]:
    t = a.t[0]
    shape: tuple[int, ...] = a.v["shape"]
    if len(t.shape) > len(shape):
        raise ShapeError("broadcast_to to a lower rank")
    for k in range(1, len(t.shape) + 1):
        if t.shape[-k] not in (1, shape[-k]):
            raise ShapeError(f"broadcast_to {t.shape} -> {shape}")
    dt = t.dtype if t.dtype not in (WEAK_F, WEAK_I) else "f32"
    return TType(dt, shape, t.device), {}


register(
    Prim(
        "broadcast-to",
        "broadcast_to",
        (("x", "tensor"), ("shape", "shape")),
        (),
        _bto_rule,
        _bto_concrete,
        "shape",
        traits=frozenset({"view"}),
        shard_rule=SF.pointwise,
        vjp_rule=VJ.broadcast_to,
        doc="numpy broadcasting obligations",
    )
)
