"""Helpers shared by primitive rules: dtype and placement joins, broadcasting, axes.

Why: elementwise ops, ``where``, matmul's batch dims and ``broadcast-to`` all broadcast the
same way; every primitive joins dtypes and placements the same way. Each helper has a symbolic
form (obligations through the rule context) and a concrete form (integers, raising
:class:`ShapeError`).
"""

from __future__ import annotations

from kinac.check import dims as D
from kinac.check.dims import Poly
from kinac.check.formula import Rel
from kinac.check.prims.base import RuleCtx, ShapeError
from kinac.check.types import ERR, WEAK_F, WEAK_I, SShape, SType, device_annot, is_float
from kinac.tir.graph import FLOAT_DTYPES, TType

ONE = D.const(1)


def join_dtype(rc: RuleCtx, ts: list[SType], idx: list[int]) -> str | None:
    """The common dtype of ``ts`` (weak scalars take the strong one's); None after an error."""
    strong = [(t.dtype, i) for t, i in zip(ts, idx, strict=True) if not t.is_weak]
    if not strong:
        return WEAK_F if any(t.dtype == WEAK_F for t in ts) else WEAK_I
    dt, i0 = strong[0]
    for d, i in strong[1:]:
        if d != dt:
            rc.fail(
                "K0601",
                f"dtype mismatch: {rc.name(i0)} is {dt} but {rc.name(i)} is {d}",
                i,
                help=f"dtypes never promote implicitly; convert one side: (cast … :to {dt})",
            )
            return None
    if dt in ("i32", "i64", "bool"):
        for t, i in zip(ts, idx, strict=True):
            if t.dtype == WEAK_F:
                rc.fail(
                    "K0603",
                    f"the float literal {rc.name(i)} meets {rc.name(i0)} of dtype {dt}",
                    i,
                    help="write an integer literal, or cast the tensor to a float dtype",
                )
                return None
    return dt


def device_number_ok(rc: RuleCtx, dev: str, kw: str | None = None) -> bool:
    """A placement read from a body (``to-device``, ``iota``/``full``'s ``@cuda(N)``) names a
    GPU by a non-negative number (K0702)."""
    if dev.startswith("cuda:") and dev[5:].startswith("-"):
        rc.fail(
            "K0702",
            f"device number {dev[5:]} is negative",
            None,
            help="GPUs are numbered from 0: `@cuda(0)`, `@cuda(1)`, …",
            kw=kw,
        )
        return False
    return True


def join_device(rc: RuleCtx, ts: list[SType], idx: list[int]) -> str | None:
    """The common placement; mixing ``@cpu`` and ``@cuda(N)`` (or two GPUs) is K0701."""
    dev, i0 = "", -1
    for t, i in zip(ts, idx, strict=True):
        if not t.device:
            continue
        if not dev:
            dev, i0 = t.device, i
        elif t.device != dev:
            fix = "(to-host {})" if dev == "cpu" else "(to-device {} " + device_annot(dev) + ")"
            rc.fail(
                "K0701",
                f"placements mixed: {rc.name(i0)} is on {dev} but {rc.name(i)} is on {t.device}",
                i,
                help=f"move it first: {fix.format(rc.name(i).strip('`'))}",
                label=f"on {t.device}",
            )
            return None
    return dev


def bcast_pair(rc: RuleCtx, a: SShape, b: SShape, ia: int, ib: int) -> SShape | None:
    """Broadcast two shapes from the right; a pair of dims must be provably equal unless one is
    the literal 1. Variadic groups broadcast only with themselves (or nothing)."""
    n = min(len(a.dims), len(b.dims))
    out: list[Poly] = []
    ok = True
    for k in range(1, n + 1):
        x, y = a.dims[-k], b.dims[-k]
        if x == ONE:
            out.append(y)
        elif y == ONE or x == y:
            out.append(x)
        elif not rc.proves(Rel("eq", x, y)) and provably_one(rc, x):
            out.append(y)  # 1 under the assumptions (where (= A 1)): it broadcasts
        elif not rc.proves(Rel("eq", x, y)) and provably_one(rc, y):
            out.append(x)
        else:
            what = f"cannot broadcast {rc.name(ia)} with {rc.name(ib)}: dim -{k} differs"
            if not rc.require(
                Rel("eq", x, y),
                "K0401",
                what,
                (ia, ib),
                help="make the dims equal (reshape/broadcast-to), or give one a literal 1 there",
                hint=not_one(x, y),
            ):
                ok = False
            out.append(x)
    if not ok:
        return None
    out.reverse()
    longer, other = (a, b) if len(a.dims) >= len(b.dims) else (b, a)
    extra = list(longer.dims[: len(longer.dims) - n])
    if len(a.dims) == len(b.dims):
        if a.group is not None and b.group is not None and a.group != b.group:
            rc.fail(
                "K0402",
                f"cannot broadcast {rc.name(ia)} with {rc.name(ib)}: variadic groups "
                f"`{a.group}` and `{b.group}` may differ",
                ib,
            )
            return None
        return SShape(a.group or b.group, tuple(out))
    if other.group is not None:
        rc.fail(
            "K0402",
            f"cannot broadcast {rc.name(ia)} with {rc.name(ib)}: group "
            f"`{other.group}` would align with fixed dims of the other",
            ib,
            help="give both operands the same leading group",
        )
        return None
    return SShape(longer.group, tuple(extra + out))


def provably_one(rc: RuleCtx, p: Poly) -> bool:
    """Whether the defn's assumptions make ``p`` equal to 1 (a literal 1 is seen syntactically)."""
    return D.as_const(p) is None and rc.proves(Rel("eq", p, ONE))


def not_one(*ps: Poly) -> tuple[Rel, ...]:
    """Hints that steer a counterexample away from dims equal to 1 (numpy would broadcast)."""
    return tuple(Rel("lt", ONE, p) for p in ps if D.as_const(p) is None)


def broadcast(rc: RuleCtx, ts: list[SType], idx: list[int]) -> SShape | None:
    """Broadcast several operands (weak scalars are rank 0)."""
    cur: SShape | None = None
    cur_i = idx[0]
    for t, i in zip(ts, idx, strict=True):
        s = t.shape  # weak scalars are rank 0; a weak `where` has its condition's shape
        if cur is None:
            cur, cur_i = s, i
            continue
        nxt = bcast_pair(rc, cur, s, cur_i, i)
        if nxt is None:
            return None
        if len(s.dims) > len(cur.dims):
            cur_i = i
        cur = nxt
    return cur


def axis_index(
    rc: RuleCtx, s: SShape, axis: int, arg: int = 0, extra: int = 0, what: str | None = None
) -> int | None:
    """Index into ``s.dims`` of ``axis`` (negative counts from the end); with a variadic group
    only negative axes reaching the fixed tail are static. ``extra`` admits ``rank`` itself.
    ``what`` names the shape when it is not tensor argument ``arg`` (``iota``'s own shape)."""
    n = len(s.dims)
    name = what if what is not None else rc.name(arg)
    if s.group is not None:
        if axis >= 0 or -axis > n:
            rc.fail(
                "K0405",
                f"axis {axis} of {name} is not static: its shape starts with "
                f"the variadic group `{s.group}`",
                kw="axis",
                help=f"count from the end (-1 … -{n}) to address the dims after the group",
            )
            return None
        return n + axis
    if not -(n + extra) <= axis < n + extra:
        rc.fail(
            "K0405",
            f"axis {axis} is out of range for {name} of rank {n}",
            kw="axis",
            help=f"use an axis in {-n} … {n - 1}",
        )
        return None
    return axis + n + extra if axis < 0 else axis


# ---------------------------------------------------------------- concrete forms


def c_dtype(ts: list[TType]) -> str:
    strong = {t.dtype for t in ts if t.dtype not in (WEAK_F, WEAK_I)}
    if len(strong) > 1:
        raise ShapeError(f"dtype mismatch {sorted(strong)}")
    if not strong:
        return WEAK_F if any(t.dtype == WEAK_F for t in ts) else WEAK_I
    dt = strong.pop()
    if dt not in FLOAT_DTYPES and any(t.dtype == WEAK_F for t in ts):
        raise ShapeError("float literal meets an integer tensor")
    return dt


def c_device(ts: list[TType]) -> str:
    devs = {t.device for t in ts if t.dtype not in (WEAK_F, WEAK_I) and t.device}
    if len(devs) > 1:
        raise ShapeError(f"placements mixed: {sorted(devs)}")
    return devs.pop() if devs else ""


def c_broadcast(shapes: list[tuple[int, ...]]) -> tuple[int, ...]:
    out: list[int] = []
    n = max((len(s) for s in shapes), default=0)
    for k in range(1, n + 1):
        ds = {s[-k] for s in shapes if len(s) >= k}
        ds.discard(1)
        if len(ds) > 1:
            raise ShapeError(f"cannot broadcast {shapes}")
        out.append(ds.pop() if ds else 1)
    return tuple(reversed(out))


def c_axis(rank: int, axis: int, extra: int = 0) -> int:
    if not -(rank + extra) <= axis < rank + extra:
        raise ShapeError(f"axis {axis} out of range for rank {rank}")
    return axis + rank + extra if axis < 0 else axis


def need_float(rc: RuleCtx, t: SType, i: int, op: str) -> bool:
    if t.dtype == ERR:
        return False
    if not is_float(t.dtype):
        rc.fail(
            "K0602",
            f"`{op}` needs a float dtype but {rc.name(i)} is {t.dtype}",
            i,
            help=f"cast it first: (cast {rc.name(i).strip('`')} :to f32)",
        )
        return False
    return True
