"""Shape primitives: transpose, reshape, broadcast-to, concat, slice, gather, repeat-interleave.

Why together: they move dims around without computing, and their obligations are about the
dims themselves (a product, a sum, bounds) rather than about values.
"""

from __future__ import annotations

from typing import Any

from kinac.check import dims as D
from kinac.check.formula import Rel
from kinac.check.prims.base import REQ, Args, CArgs, Prim, RuleCtx, ShapeError, register
from kinac.check.prims.common import (
    ONE,
    axis_index,
    c_axis,
    c_device,
    c_dtype,
    join_device,
    join_dtype,
    not_one,
)
from kinac.check.types import WEAK_F, WEAK_I, SShape, SType, fmt_dims
from kinac.tir.graph import TType

T1 = (("x", "tensor"),)


def _static_rank(rc: RuleCtx, t: SType, op: str, i: int = 0) -> bool:
    if t.is_weak:
        rc.fail("K0402", f"`{op}` needs a tensor, not a scalar", i)
        return False
    if t.shape.group is not None:
        rc.fail(
            "K0402",
            f"`{op}` needs a static rank but {rc.name(i)} has the variadic group `{t.shape.group}`",
            i,
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
        )
        return None
    ok = True
    for k in range(1, len(xs.dims) + 1):
        x, y = xs.dims[-k], target.dims[-k]
        if x != ONE and x != y:
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
        doc="numpy broadcasting obligations",
    )
)


def _concat_rule(rc: RuleCtx, a: Args) -> SType | None:
    ts = a.t
    if not ts:
        rc.fail("K0203", "`concat` needs at least one tensor", None)
        return None
    idx = list(range(len(ts)))
    for t, i in zip(ts, idx, strict=True):
        if t.is_weak:
            rc.fail("K0402", "`concat` needs tensors, not scalars", i)
            return None
    dt = join_dtype(rc, ts, idx)
    dev = join_device(rc, ts, idx)
    if dt is None or dev is None:
        return None
    s0 = ts[0].shape
    k = axis_index(rc, s0, a.v["axis"])
    if k is None:
        return None
    ok = True
    for t, i in zip(ts[1:], idx[1:], strict=True):
        if t.shape.group != s0.group or len(t.shape.dims) != len(s0.dims):
            rc.fail(
                "K0407",
                f"`concat`: {rc.name(i)} has shape {fmt_dims(t.shape)} but "
                f"{rc.name(0)} has {fmt_dims(s0)}",
                i,
                help="concatenated tensors have the same rank",
            )
            return None
        for j, (x, y) in enumerate(zip(s0.dims, t.shape.dims, strict=True)):
            if j != k and x != y:
                ok = (
                    rc.require(
                        Rel("eq", x, y),
                        "K0407",
                        f"`concat` along axis {a.v['axis']}: "
                        f"dim {j} of {rc.name(0)} and {rc.name(i)} differ",
                        (0, i),
                    )
                    and ok
                )
    if not ok:
        return None
    dims = list(s0.dims)
    dims[k] = D.add(*(t.shape.dims[k] for t in ts))
    return SType(dt, SShape(s0.group, tuple(dims)), dev)


def _concat_concrete(a: CArgs) -> tuple[TType, dict[str, Any]]:
    ts = a.t
    if not ts or any(t.dtype in (WEAK_F, WEAK_I) for t in ts):
        raise ShapeError("concat of nothing or of scalars")
    dt = c_dtype(ts)
    dev = c_device(ts)
    n = len(ts[0].shape)
    k = c_axis(n, a.v["axis"])
    for t in ts[1:]:
        if len(t.shape) != n or any(t.shape[j] != ts[0].shape[j] for j in range(n) if j != k):
            raise ShapeError("concat shapes")
    s = list(ts[0].shape)
    s[k] = sum(t.shape[k] for t in ts)
    return TType(dt, tuple(s), dev), {"axis": k}


register(
    Prim(
        "concat",
        "concat",
        (("xs", "tensors"),),
        (("axis", "int", REQ),),
        _concat_rule,
        _concat_concrete,
        "shape",
        doc="other dims equal; axis dim is the sum",
    )
)


def _slice_rule(rc: RuleCtx, a: Args) -> SType | None:
    t = a.t[0]
    if t.is_weak:
        rc.fail("K0402", "`slice` needs a tensor, not a scalar", 0)
        return None
    k = axis_index(rc, t.shape, a.v["axis"])
    if k is None:
        return None
    s, e, d = a.v["start"], a.v["stop"], t.shape.dims[k]
    ok = rc.require(Rel("le", D.ZERO, s), "K0406", "slice start must be >= 0", (0,), kw="start")
    ok = ok and rc.require(
        Rel("lt", s, e), "K0406", "slice is empty: start must be below stop", (0,), kw="stop"
    )
    ok = ok and rc.require(
        Rel("le", e, d),
        "K0406",
        f"slice stop exceeds dim {k} of {rc.name(0)}",
        (0,),
        kw="stop",
        help=f"stop at most at {D.fmt_kina(d)}",
    )
    if not ok:
        return None
    dims = list(t.shape.dims)
    dims[k] = D.sub(e, s)
    return SType(t.dtype, SShape(t.shape.group, tuple(dims)), t.device)


def _slice_concrete(a: CArgs) -> tuple[TType, dict[str, Any]]:
    t = a.t[0]
    if t.dtype in (WEAK_F, WEAK_I) or not t.shape:
        raise ShapeError("slice of a scalar")
    k = c_axis(len(t.shape), a.v["axis"])
    s, e = a.v["start"], a.v["stop"]
    if not 0 <= s < e <= t.shape[k]:
        raise ShapeError(f"slice {s}:{e} of {t.shape[k]}")
    sh = list(t.shape)
    sh[k] = e - s
    return TType(t.dtype, tuple(sh), t.device), {"axis": k, "start": s, "stop": e}


register(
    Prim(
        "slice",
        "slice",
        T1,
        (("axis", "int", REQ), ("start", "dim0", REQ), ("stop", "dim0", REQ)),
        _slice_rule,
        _slice_concrete,
        "shape",
        doc="0 <= s < e <= dim; axis dim becomes e - s",
    )
)


def _gather_rule(rc: RuleCtx, a: Args) -> SType | None:
    table, idx = a.t
    if table.is_weak or table.shape.group is not None or len(table.shape.dims) != 2:
        rc.fail(
            "K0412",
            f"the table {rc.name(0)} of `gather` must have shape [V D], not "
            f"{fmt_dims(table.shape) if not table.is_weak else 'a scalar'}",
            0,
        )
        return None
    if idx.dtype not in ("i32", "i64"):
        rc.fail(
            "K0602",
            f"the indices {rc.name(1)} of `gather` must be i32 or i64, not {idx.dtype}",
            1,
            help="cast them: (cast … :to i32)",
        )
        return None
    dev = join_device(rc, [table, idx], [0, 1])
    if dev is None:
        return None
    ish = idx.shape if not idx.is_weak else SShape(None, ())
    return SType(table.dtype, SShape(ish.group, ish.dims + (table.shape.dims[1],)), dev)


def _gather_concrete(a: CArgs) -> tuple[TType, dict[str, Any]]:
    table, idx = a.t
    if len(table.shape) != 2 or idx.dtype not in ("i32", "i64"):
        raise ShapeError("gather operands")
    return TType(table.dtype, idx.shape + (table.shape[1],), c_device([table, idx])), {}


register(
    Prim(
        "gather",
        "gather",
        (("table", "tensor"), ("idx", "tensor")),
        (),
        _gather_rule,
        _gather_concrete,
        "shape",
        doc="[V D] x int[..b] -> [..b D]",
    )
)


def _rep_rule(rc: RuleCtx, a: Args) -> SType | None:
    t = a.t[0]
    if t.is_weak:
        rc.fail("K0402", "`repeat-interleave` needs a tensor, not a scalar", 0)
        return None
    k = axis_index(rc, t.shape, a.v["axis"])
    if k is None:
        return None
    dims = list(t.shape.dims)
    dims[k] = D.mul(dims[k], a.v["repeats"])
    return SType(t.dtype, SShape(t.shape.group, tuple(dims)), t.device)


def _rep_concrete(a: CArgs) -> tuple[TType, dict[str, Any]]:
    t = a.t[0]
    if not t.shape:
        raise ShapeError("repeat_interleave of a scalar")
    k = c_axis(len(t.shape), a.v["axis"])
    r = a.v["repeats"]
    if r < 1:
        raise ShapeError("repeats < 1")
    sh = list(t.shape)
    sh[k] *= r
    return TType(t.dtype, tuple(sh), t.device), {"axis": k, "repeats": r}


register(
    Prim(
        "repeat-interleave",
        "repeat_interleave",
        T1,
        (("repeats", "dim", REQ), ("axis", "int", REQ)),
        _rep_rule,
        _rep_concrete,
        "shape",
        doc="dim d at axis a becomes d * r",
    )
)
