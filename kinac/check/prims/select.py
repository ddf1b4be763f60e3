"""Selection and repetition primitives: concat, slice, gather, repeat-interleave.

Why together: each picks or repeats parts of its operands along one axis, and their
obligations are about that axis (a sum, bounds, a product by the repeat count).
"""

from __future__ import annotations

from typing import Any

from kinac.check import dims as D
from kinac.check import shard_factors as SF
from kinac.check import vjp_rules as VJ
from kinac.check.formula import Rel
from kinac.check.prims.base import REQ, Args, CArgs, Prim, RuleCtx, ShapeError, register
from kinac.check.prims.common import (
    axis_index,
    c_axis,
    c_device,
    c_dtype,
    join_device,
    join_dtype,
)
from kinac.check.types import WEAK_F, WEAK_I, SShape, SType, fmt_dims
from kinac.tir.graph import TType

T1 = (("x", "tensor"),)


def _concat_rule(rc: RuleCtx, a: Args) -> SType | None:
    ts = a.t
    if not ts:
        rc.fail(
            "K0203",
            "`concat` needs at least one tensor",
            None,
            help="list the tensors to join: (concat [x y] :axis 0)",
        )
        return None
    idx = list(range(len(ts)))
    for t, i in zip(ts, idx, strict=True):
        if t.is_weak:
            rc.fail(
                "K0402",
                "`concat` needs tensors, not scalars",
                i,
                help="make a tensor of the value first: (full DT [DIM …] v)",
            )
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
        shard_rule=SF.whole_axis,
        vjp_rule=VJ.concat,
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
        traits=frozenset({"view"}),
        shard_rule=SF.whole_axis,
        vjp_rule=VJ.slice_,
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
            help="gather reads rows of a 2-D table: reshape the table to [V D] (a vector "
            "[V] as [V 1])",
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
        shard_rule=SF.gather,
        vjp_rule=VJ.gather,
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
        shard_rule=SF.repeat_interleave,
        vjp_rule=VJ.repeat_interleave,
        doc="dim d at axis a becomes d * r",
    )
)
