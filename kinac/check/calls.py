"""Instantiating a callee's signature at a call: dims, groups and dtypes from the arguments.

Why: one routine serves the symbolic check of a call inside a defn (arguments have symbolic
types; the needs it returns become obligations under the caller's assumptions) and the
concrete binding of an entry point to the arrays a Python caller passes (arguments have
integer dims; the needs are then ground and just evaluated). The plan from ``sig.py`` says
which argument dim fixes which variable; every other dim pair and every ``where`` clause is a
need.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from kinac.check import dims as D
from kinac.check.blame import binding_sites, pick_majority
from kinac.check.callrecords import Bound, Inst, Issue, Need
from kinac.check.dims import Poly
from kinac.check.dtypenames import lookalike
from kinac.check.formula import Rel, canon_rel, decide_cheap, rel_subst
from kinac.check.sig import SigInfo
from kinac.check.types import (
    WEAK_F,
    WEAK_I,
    SShape,
    SType,
    device_annot,
    fmt_type,
    is_dtype_var,
    is_float,
    subst_shape,
)

__all__ = ["Bound", "Inst", "Issue", "Need", "fmt_rel", "instantiate"]


def _strong(dt: str) -> str:
    return "f32" if dt in (WEAK_F, WEAK_I) else dt


def _dtype_ok(pd: str, ad: str) -> bool:
    if ad == WEAK_F:
        return is_float(pd)
    if ad == WEAK_I:
        return pd != "bool"
    return pd == ad


def instantiate(
    sig: SigInfo,
    args: Sequence[SType | Poly],
    callee: str,
    majority: Callable[[Poly], Poly] | None = None,
) -> Bound:
    """Bind ``sig``'s variables from ``args`` (declared order; a ``Poly`` for a dim parameter).

    With ``majority`` (the caller's normal form of a dim), a variable that several arguments
    give as a plain dim takes the value most of them agree on (a tie: the first binding), so
    the needs blame the arguments that disagree with the majority, not every one after the
    first; the Python API and ``kinac run`` judge concrete arguments the same way
    (``kinac.call_shapes``)."""
    b = Bound()
    pairs: list[tuple[int, int, Poly, Poly]] = []
    defining: set[tuple[int, int]] = set()
    used_where: set[int] = set()
    devices: list[str] = []
    weak_vars: list[str] = []
    group_args: dict[str, list[tuple[int, SShape]]] = {}  # each group's value, per argument
    for i, (p, a) in enumerate(zip(sig.params, args, strict=True)):
        if p.is_dim or p.type is None:
            assert isinstance(a, Poly)
            b.dims[p.name] = a
            if not _surely_positive(a):
                b.needs.append(
                    Need(
                        Rel("le", ONE, a),
                        "K0408",
                        f"the dim parameter `{p.name}` of `{callee}` is {D.fmt_infix(a)} but "
                        "must be at least 1",
                        i,
                    )
                )
            continue
        assert isinstance(a, SType)
        if a.is_err:
            b.result = None
            continue
        pt = p.type
        if is_dtype_var(pt.dtype):
            ad = _strong(a.dtype)
            if a.is_weak:
                weak_vars.append(pt.dtype)  # a literal takes the dtype a tensor fixes (spec §4)
            elif not is_float(ad):
                meant = lookalike(pt.dtype)
                b.issues.append(
                    Issue(
                        "K0602",
                        f"`{p.name}` of `{callee}` has dtype `{pt.dtype}`, a "
                        f"float dtype variable, but the argument is {ad}",
                        i,
                        f"`{pt.dtype}` is a dtype variable (K0304): write `{meant}` in the "
                        f"signature of `{callee}` for the dtype"
                        if meant
                        else "cast the argument: (cast … :to f32)",
                    )
                )
            elif pt.dtype in b.dtypes and b.dtypes[pt.dtype] != ad:
                b.issues.append(
                    Issue(
                        "K0601",
                        f"`{p.name}` of `{callee}` needs dtype `{pt.dtype}` = "
                        f"{b.dtypes[pt.dtype]} (fixed by an earlier argument), but "
                        f"the argument is {ad}",
                        i,
                        f"cast it: (cast … :to {b.dtypes[pt.dtype]})",
                    )
                )
            else:
                b.dtypes[pt.dtype] = ad
        elif not _dtype_ok(pt.dtype, a.dtype):
            b.issues.append(
                Issue(
                    "K0601",
                    f"`{p.name}` of `{callee}` is {pt.dtype} but the "
                    f"argument is {_strong(a.dtype)}",
                    i,
                    f"cast it: (cast … :to {pt.dtype})",
                )
            )
        if pt.device and a.device and pt.device != a.device:
            fix = (
                "(to-host …)" if pt.device == "cpu" else f"(to-device … {device_annot(pt.device)})"
            )
            b.issues.append(
                Issue(
                    "K0701",
                    f"`{p.name}` of `{callee}` is placed on {pt.device} but the "
                    f"argument is on {a.device}",
                    i,
                    f"move the argument: {fix}",
                )
            )
        if a.device:
            devices.append(a.device)
        ps, as_ = pt.shape, a.shape  # weak scalars are rank 0; a weak `where` has a shape
        if ps.group is None:
            if as_.group is not None or len(as_.dims) != len(ps.dims):
                b.issues.append(
                    Issue(
                        "K0402",
                        f"`{p.name}` of `{callee}` has rank {len(ps.dims)} "
                        f"but the argument is {fmt_type(a)}",
                        i,
                    )
                )
                continue
            k = 0
        else:
            k = len(as_.dims) - len(ps.dims)
            if k < 0:
                b.issues.append(
                    Issue(
                        "K0402",
                        f"`{p.name}` of `{callee}` has at least "
                        f"{len(ps.dims)} dims but the argument is {fmt_type(a)}",
                        i,
                    )
                )
                continue
            gval = SShape(as_.group, as_.dims[:k])
            for j, g in enumerate(gval.dims):
                if not _surely_positive(g):
                    b.needs.append(
                        Need(
                            Rel("le", ONE, g),
                            "K0408",
                            f"dim {j} of group `{ps.group}` in `{p.name}` of `{callee}` is "
                            f"{D.fmt_infix(g)} but must be at least 1",
                            i,
                        )
                    )
            group_args.setdefault(ps.group, []).append((i, gval))
        for j, d in enumerate(ps.dims):
            pairs.append((i, j, d, as_.dims[k + j]))
    for var in weak_vars:
        b.dtypes.setdefault(var, "f32")  # only literals met it: weak alone is f32
    for name, given in group_args.items():
        _bind_group(b, name, given, majority, sig, callee)
    if b.issues:
        return b
    pair_of = {(i, j): (d, v) for i, j, d, v in pairs}
    fixed_at = binding_sites(sig, pairs, majority)
    for st in sig.plan:
        if st.kind == "dimparam":
            continue
        a_ = D.subst(st.coeff, b.dims)
        r_ = D.subst(st.rest, b.dims)
        if st.kind == "param":
            si, sj = fixed_at.get(st.var, (st.param, st.dim))
            defining.add((si, sj))
            target = D.sub(pair_of[(si, sj)][1], r_)
            src = f"dim {sj} of `{sig.params[si].name}`"
            code, pi, wi = "K0408", si, None
        else:
            used_where.add(st.param)
            target = D.neg(r_)
            src = f"its where clause {_fmt_rel(sig.where[st.param][1])}"
            code, pi, wi = "K0409", None, st.param
        b.dims[st.var] = D.div(target, a_)
        divides_needed = D.exact_div(target, a_) is None
        if divides_needed:
            b.needs.append(
                Need(
                    Rel("dvd", a_, target),
                    "K0410",
                    f"`{st.var}` of `{callee}` is fixed by {src} as {D.fmt_quot(target, a_)}",
                    pi,
                    wi,
                )
            )
        # The variable is target/a_ with a_ > 0 (the plan makes coefficients positive), so it
        # is at least 1 exactly when a_ <= target: an obligation whatever the form of target
        # (zero, a constant, a difference), unless normalisation settles it, or the divisibility
        # need above implies it (a_ | target and target >= 1 give target >= a_).
        at_least_one = Rel("le", a_, target)
        implied = divides_needed and _surely_positive(target)
        if not implied and decide_cheap(canon_rel(at_least_one)) is not True:
            b.needs.append(
                Need(
                    at_least_one,
                    code,
                    f"`{st.var}` of `{callee}`, fixed by {src} as "
                    f"{D.fmt_quot(target, a_) if D.as_const(a_) != 1 else D.fmt_infix(target)}, "
                    "must be at least 1",
                    pi,
                    wi,
                )
            )
    for i, j, d, v in pairs:
        if (i, j) in defining:
            continue
        dvar = D.as_var(d)
        site = fixed_at.get(dvar) if dvar is not None else None
        b.needs.append(
            Need(
                Rel("eq", v, D.subst(d, b.dims)),
                "K0408",
                f"dim {j} of `{sig.params[i].name}` of `{callee}` must be {D.fmt_infix(d)}",
                i,
                shown=(d,),
                bound_by=(
                    (site[0], f"fixes `{dvar}` as {D.fmt_infix(pair_of[site][1])}")
                    if site is not None and site[0] != i
                    else None
                ),
            )
        )
    for k, (_nid, r) in enumerate(sig.where):
        if k not in used_where:
            b.needs.append(
                Need(
                    rel_subst(r, b.dims),
                    "K0409",
                    f"`{callee}` requires {_fmt_rel(r)}",
                    where=k,
                    whole_clause=True,
                )
            )
    for i, axis, size, what in sig.shard_group_divs:
        a = args[i]
        if isinstance(a, SType) and a.shape.group is None and axis < len(a.shape.dims):
            b.needs.append(
                Need(
                    Rel("dvd", D.const(size), a.shape.dims[axis]),
                    "K0413",
                    f"`{callee}` has {what}",
                    i,
                )
            )
    for i, r, what in sig.shard_divs:
        rel = rel_subst(r, b.dims)
        b.needs.append(
            Need(
                rel,
                "K0413",
                f"`{callee}` has {what}",
                i,
            )
        )
    stated = {r for _nid, r in sig.where}
    for r in sig.type_divs:
        if r in stated:  # `(where (divides 4 N))` beside `[(/ N 4)]`: one need (K0409), not two
            continue
        b.needs.append(
            Need(
                rel_subst(r, b.dims),
                "K0410",
                f"`{callee}` divides {D.fmt_infix(r.rhs)} by {D.fmt_infix(r.lhs)}",
            )
        )
    ret = sig.ret
    dt = b.dtypes.get(ret.dtype, ret.dtype)
    dev = ret.device or (devices[0] if devices and all(x == devices[0] for x in devices) else "")
    b.result = SType(dt, subst_shape(ret.shape, b.dims, b.groups), dev, ret.shards)
    return b


ONE = D.const(1)


def _surely_positive(p: Poly) -> bool:
    """True when normal forms alone show ``p >= 1`` (every atom is >= 1)."""
    lb = D.lower_bound(p)
    return lb is not None and lb >= 1


def _bind_group(
    b: Bound,
    name: str,
    given: list[tuple[int, SShape]],
    majority: Callable[[Poly], Poly] | None,
    sig: SigInfo,
    callee: str,
) -> None:
    """Fix the variadic group ``name`` from the arguments that give it (``given``: argument
    index, value), by the same rule as single dims (:mod:`kinac.check.blame`): the value most
    arguments agree on, ties to the first; without ``majority`` the first. The others are
    blamed: a different rank is an issue, different dims are needs."""
    site, fixed = pick_majority(given, majority)
    b.groups[name] = fixed
    fixed_by = (site, f"fixes group `{name}` as {_fmt_group(fixed)}")
    for i, gval in given:
        if i == site:
            continue
        pname = sig.params[i].name
        if fixed.group != gval.group or len(fixed.dims) != len(gval.dims):
            b.issues.append(
                Issue(
                    "K0402",
                    f"`{pname}` of `{callee}`: group `{name}` stands for {_fmt_group(fixed)} "
                    f"from `{sig.params[site].name}` but for {_fmt_group(gval)} here",
                    i,
                )
            )
            continue
        for j, (x, y) in enumerate(zip(fixed.dims, gval.dims, strict=True)):
            b.needs.append(
                Need(
                    Rel("eq", y, x),
                    "K0408",
                    f"dim {j} of group `{name}` in `{pname}` of `{callee}` differs from "
                    f"`{sig.params[site].name}`'s",
                    i,
                    bound_by=fixed_by,
                )
            )


def _fmt_group(s: SShape) -> str:
    items = ([s.group] if s.group else []) + [D.fmt_infix(d) for d in s.dims]
    return "[" + " ".join(items) + "]"


_OPS = {"eq": "=", "le": "<=", "lt": "<", "dvd": "divides"}


def _fmt_rel(r: Rel) -> str:
    if r.op == "dvd":
        return f"{D.fmt_infix(r.lhs)} divides {D.fmt_infix(r.rhs)}"
    return f"{D.fmt_infix(r.lhs)} {_OPS[r.op]} {D.fmt_infix(r.rhs)}"


def fmt_rel(r: Rel) -> str:
    """Infix text of a relation: ``D = H*Dh``."""
    return _fmt_rel(r)
