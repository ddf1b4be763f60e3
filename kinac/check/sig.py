"""Signature analysis: a defn's parameter types, assumptions and determination plan.

Why: a caller is checked against its callees' signatures only (a body edit never re-checks a
caller), so everything a call needs is derived here from the signature alone: the symbolic
parameter and result types, the ``where`` assumptions, and the *plan*, the order in which the
dimension variables are fixed by the arguments (spec section 2: a variable standing alone, a
``dim`` parameter, or the one unknown left in a parameter dim or a ``where`` equality). A
variable the plan cannot reach is reported as undetermined (K0301).
"""

from __future__ import annotations

from functools import lru_cache

from kinac.check import dims as D
from kinac.check.codes import at, error
from kinac.check.convert import TypeConv
from kinac.check.dims import Poly
from kinac.check.dtypenames import dtype_lookalikes
from kinac.check.formula import Rel
from kinac.check.shard import shard_divs as shard_divs_of
from kinac.check.shard_even import concrete_diag, concrete_uneven
from kinac.check.types import SType, is_dtype_var
from kinac.diag.model import Diagnostic
from kinac.reader import ast
from kinac.rules.codec import record


@record
class DefnRef:
    """A defn of the workspace: its file and name."""

    file: str
    name: str


@record
class PInfo:
    """One parameter: a tensor (``type`` set) or a ``dim`` parameter."""

    name: str
    nid: int
    is_dim: bool
    type: SType | None


@record
class Step:
    """Fix ``var``: from a ``dim`` parameter (``dimparam``), from dim ``dim`` of tensor parameter
    ``param`` (``param``: that dim is ``coeff*var + rest``), or from where clause ``param``
    (``where``: ``lhs - rhs = coeff*var + rest``)."""

    var: str
    kind: str
    param: int
    dim: int
    coeff: Poly
    rest: Poly


@record
class SigInfo:
    """Everything callers and the defn's own check need from a signature."""

    ref: DefnRef
    params: tuple[PInfo, ...]
    ret: SType
    where: tuple[tuple[int, Rel], ...]
    assumptions: tuple[Rel, ...]
    type_divs: tuple[Rel, ...]
    dim_vars: tuple[str, ...]
    groups: tuple[str, ...]
    dtype_vars: tuple[str, ...]
    plan: tuple[Step, ...]
    first_nid: tuple[tuple[str, int], ...]
    diagnostics: tuple[Diagnostic, ...]
    # (param index, size divides dim, what) per @sharded annotation of a parameter (shard.py):
    # assumptions here, obligations at calls; and those of the result, obligations on the body
    shard_divs: tuple[tuple[int, Rel, str], ...] = ()
    ret_shard_divs: tuple[tuple[Rel, str], ...] = ()
    # (param index, axis, mesh size, what) for axes counted from the left past a variadic
    # group: checked where the group is bound (calls.instantiate, bind.complete_dims)
    shard_group_divs: tuple[tuple[int, int, int, str], ...] = ()

    @property
    def ok(self) -> bool:
        return not any(d.is_error for d in self.diagnostics)

    def nid_of(self, name: str) -> int:
        for n, i in self.first_nid:
            if n == name:
                return i
        return 0


_RELS = {"=": "eq", "<": "lt", "<=": "le", ">": "lt", ">=": "le", "divides": "dvd"}


@lru_cache(maxsize=4096)
def analyse(file: str, sig: ast.Signature, meshes: tuple[ast.Mesh, ...] = ()) -> SigInfo:
    """Analyse a signature (pure; cached on the signature value). ``meshes``: those visible
    in ``file``, which give ``@sharded`` annotations their sizes (without them, shardings ask
    nothing of their dims)."""
    ref = DefnRef(file, sig.name)
    conv = TypeConv(file, sig.name, None)
    diags = conv.diags
    params: list[PInfo] = []
    seen: dict[str, int] = {}
    for p in sig.params:
        if p.name in seen:
            diags.append(
                error(
                    "K0205",
                    f"parameter `{p.name}` is declared twice",
                    at(file, sig.name, p.nid, "second declaration"),
                    (at(file, sig.name, seen[p.name], "first declaration"),),
                    help=f"rename one of the two `{p.name}` parameters",
                )
            )
        seen.setdefault(p.name, p.nid)
        if p.is_dim or p.type is None:
            conv.note_var(p.name, p.nid)
            params.append(PInfo(p.name, p.nid, True, None))
        else:
            params.append(PInfo(p.name, p.nid, False, conv.type(p.type)))
    ret = conv.type(sig.ret)
    diags.extend(dtype_lookalikes(file, sig))
    where: list[tuple[int, Rel]] = []
    for c in sig.where:
        op = _RELS.get(c.rel)
        lhs, rhs = conv.dim(c.lhs), conv.dim(c.rhs)
        if op is None:
            diags.append(
                error(
                    "K0303",
                    f"unknown relation `{c.rel}` in a where clause",
                    at(file, sig.name, c.nid),
                    help="use one of = < <= > >= divides",
                )
            )
            continue
        if c.rel in (">", ">="):
            lhs, rhs = rhs, lhs
        where.append((c.nid, Rel(op, lhs, rhs)))
    tensor_names = {p.name for p in params if not p.is_dim}
    for v, nid in conv.first.items():
        if v in tensor_names:
            diags.append(
                error(
                    "K0205",
                    f"`{v}` names both a tensor parameter and a dimension",
                    at(file, sig.name, nid, "used as a dimension here"),
                    (at(file, sig.name, seen[v], "tensor parameter"),),
                    help=f"rename the tensor parameter `{v}`",
                )
            )
    type_divs = tuple(conv.div_rels)
    shard_divs: list[tuple[int, Rel, str]] = []
    group_divs: list[tuple[int, int, int, str]] = []
    for i, info in enumerate(params):
        if info.type is not None and info.type.shards:
            gaxes: list[tuple[int, int, str]] = []
            rels, problems = shard_divs_of(info.type, meshes, gaxes)
            group_divs.extend(
                (i, axis, size, f"dim {axis} of `{info.name}` split over {mesh}")
                for axis, size, mesh in gaxes
            )
            for r, axis, mesh in rels:
                what = f"dim {axis} of `{info.name}` split over {mesh}"
                shard_divs.append((i, r, what))
                if concrete_uneven(r):  # [3] over 2 devices: no call could pass it (K0413)
                    t = sig.params[i].type
                    nid = t.nid if t is not None else info.nid
                    diags.append(concrete_diag(r, what, at(file, sig.name, nid)))
            diags.extend(_bad_shard(file, sig.name, info.nid, m) for m in problems)
    ret_rels, ret_problems = shard_divs_of(ret, meshes)
    diags.extend(_bad_shard(file, sig.name, sig.ret.nid, m) for m in ret_problems)
    assumptions = tuple(r for _, r in where) + type_divs + tuple(r for _, r, _ in shard_divs)
    plan, known = _plan(params, where, conv)
    groups_in = {p.type.shape.group for p in params if p.type and p.type.shape.group}
    dt_in = {p.type.dtype for p in params if p.type and is_dtype_var(p.type.dtype)}
    for v in conv.order:
        if v not in known:
            diags.append(_undetermined(file, sig.name, v, conv.first[v]))
    for g, nid in conv.group_first.items():
        if g not in groups_in:
            diags.append(
                error(
                    "K0301",
                    f"variadic group `{g}` is not determined by the parameters",
                    at(file, sig.name, nid, "appears in no parameter's type"),
                    help=f"use `{g}` in the type of a tensor parameter",
                )
            )
    if is_dtype_var(ret.dtype) and ret.dtype not in dt_in and not ret.is_err:
        diags.append(
            error(
                "K0301",
                f"dtype variable `{ret.dtype}` is not determined by the parameters",
                at(file, sig.name, sig.ret.nid, "result dtype"),
                help=f"give a tensor parameter the dtype `{ret.dtype}`, or use a concrete dtype",
            )
        )
    return SigInfo(
        ref,
        tuple(params),
        ret,
        tuple(where),
        assumptions,
        type_divs,
        tuple(conv.order),
        tuple(sorted(groups_in)),
        tuple(sorted(dt_in)),
        tuple(plan),
        tuple(conv.first.items()) + tuple(conv.group_first.items()),
        tuple(diags),
        tuple(shard_divs),
        tuple((r, f"dim {axis} split over {mesh}") for r, axis, mesh in ret_rels),
        tuple(group_divs),
    )


def _bad_shard(file: str, defn: str, nid: int, message: str) -> Diagnostic:
    return error(
        "K0702",
        message,
        at(file, defn, nid),
        help="`@sharded(axis=I, mesh=M)`, with `over=A` (repeatable) naming axes of an N-D mesh",
    )


def _undetermined(file: str, defn: str, v: str, nid: int) -> Diagnostic:
    return error(
        "K0301",
        f"dimension variable `{v}` is not determined by the parameters",
        at(file, defn, nid, f"`{v}` first appears here"),
        notes=(
            "a dimension variable must stand alone as a dim of a parameter, be a `dim` "
            "parameter, or be the one unknown left in a parameter dim or a where equality, "
            "appearing there linearly (`(* 2 E)`, `(+ N 1)`; not `(* N N)`)",
        ),
        help=f"add a parameter `({v} : dim)`, or a where equality that fixes `{v}`",
    )


def _plan(
    params: list[PInfo], where: list[tuple[int, Rel]], conv: TypeConv
) -> tuple[list[Step], set[str]]:
    plan: list[Step] = []
    known: set[str] = set()
    one = D.const(1)
    for i, p in enumerate(params):
        if p.is_dim:
            plan.append(Step(p.name, "dimparam", i, -1, one, D.ZERO))
            known.add(p.name)
    for i, p in enumerate(params):
        if p.type is None:
            continue
        for j, d in enumerate(p.type.shape.dims):
            v = D.as_var(d)
            if v is not None and v not in known:
                plan.append(Step(v, "param", i, j, one, D.ZERO))
                known.add(v)
    used_w: set[int] = set()
    progress = True
    while progress:
        progress = False
        for i, p in enumerate(params):
            if p.type is None:
                continue
            for j, d in enumerate(p.type.shape.dims):
                step = _solve_one(d, known, "param", i, j)
                if step is not None:
                    plan.append(step)
                    known.add(step.var)
                    progress = True
        for k, (_nid, r) in enumerate(where):
            if r.op != "eq" or k in used_w:
                continue
            step = _solve_one(D.sub(r.lhs, r.rhs), known, "where", k, -1)
            if step is not None:
                plan.append(step)
                known.add(step.var)
                used_w.add(k)
                progress = True
    return plan, known


def _solve_one(p: Poly, known: set[str], kind: str, i: int, j: int) -> Step | None:
    unknown = D.variables(p) - known
    if len(unknown) != 1:
        return None
    (x,) = unknown
    lin = D.linear_in(p, x)
    if lin is None:
        return None
    a, r = lin
    if all(c < 0 for _, c in a.terms):
        a, r = D.neg(a), D.neg(r)
    elif not all(c > 0 for _, c in a.terms):
        return None
    return Step(x, kind, i, j, a, r)
