"""Whether a parameter's ``@sharded`` split can ever be even: checked before anything runs.

Why: the split of a parameter is an *assumption* inside its defn and an *obligation* at every
call (:mod:`kinac.check.shard`), so a split no dims can satisfy (``[3]`` over 2 devices,
``[(+ (* 2 D) 1)]`` over 2, ``[D]`` over 2 with ``(where (= D 3))``) made the defn's
assumptions contradictory: its body checked vacuously, ``kinac check`` said nothing, and the
first report was K0802 when an entry ran. Spec section 7 promises such errors before anything
runs, with a concrete counterexample. They are K0413 ("a sharded dim is not divisible by its
mesh"), reported at the parameter's type:

* a concrete dim (``[3]``): decided by arithmetic in the signature analysis
  (:func:`concrete_uneven`, no solver), so a caller sees a signature error;
* a symbolic dim (:func:`impossible_splits`, in the defn's check): decided without the solver
  when normal forms settle it (the ``where`` equalities substituted; a gcd argument; a dim whose
  variables nothing else constrains; a small witness), else the solver is asked whether the other assumptions
  and the split can hold together; when they cannot, the counterexample is a model of the other
  assumptions (every such model breaks the split).

A split that only *some* dims break (``[D]`` over 2) stays an assumption, as before. Layouts
written in a body (an ascription, ``reshard``, the collectives) are checked by arithmetic
only (:func:`uneven_written`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from math import gcd
from typing import TYPE_CHECKING

from kinac.check import dims as D
from kinac.check.codes import error
from kinac.check.dims import DimEvalError
from kinac.check.formula import (
    Facts,
    Formula,
    Rel,
    SolveResult,
    canon_rel,
    decide_cheap,
    holds,
    make_formula,
    rel_subst,
    rel_vars,
    relevant,
)
from kinac.check.oblig import Prover, explain
from kinac.check.shard import shard_divs
from kinac.check.types import SType
from kinac.diag.model import Diagnostic, Label
from kinac.reader import ast

if TYPE_CHECKING:
    from kinac.check.sig import SigInfo

_NOTE = (
    "`@sharded` splits the dim evenly: every device holds the same number of rows "
    "(spec section 7), so the mesh's size must divide it"
)


def concrete_uneven(rel: Rel) -> bool:
    """Whether ``rel`` (``size divides dim``) has a concrete dim that ``size`` does not divide."""
    size, dim = D.as_const(rel.lhs), D.as_const(rel.rhs)
    return size is not None and dim is not None and (size == 0 or dim % size != 0)


def concrete_diag(rel: Rel, what: str, primary: Label) -> Diagnostic:
    """K0413 for a concrete dim that its mesh does not divide (``primary``: the type)."""
    size, dim = D.as_const(rel.lhs), D.as_const(rel.rhs)
    return error(
        "K0413",
        f"{what} cannot be even: {explain(rel, {})}",
        Label(primary.loc, f"{dim} is not a multiple of {size}"),
        notes=(_NOTE,),
        help=f"make the dim a multiple of {size}, shard another dim, or split it over a mesh "
        f"whose size divides {dim}",
    )


def impossible_splits(
    sig: SigInfo,
    params: Sequence[ast.Param],
    solve: Callable[[Formula], SolveResult],
    label: Callable[[int], Label],
) -> list[Diagnostic]:
    """K0413 for each symbolic split of ``sig``'s parameters (``shard_divs``) that no dims
    satisfy together with its other assumptions (which contain the splits); ``params``: the
    signature's, whose type nodes ``label(nid)`` locates. Concrete dims are
    :func:`concrete_uneven`'s."""
    out: list[Diagnostic] = []
    for i, rel, what in sig.shard_divs:
        if D.as_const(rel.rhs) is not None:
            continue
        p = params[i]
        primary = label(p.type.nid if p.type is not None else p.nid)
        others = list(sig.assumptions)
        others.remove(rel)  # one occurrence: a second split of the same dim still counts
        facts = Facts(others)
        g = rel_subst(rel, facts.subst)
        g = Rel(g.op, D.clear_divs(g.lhs), D.clear_divs(g.rhs))
        cheap = decide_cheap(canon_rel(g))
        if cheap is True:
            continue
        prover = Prover(others, solve)
        if cheap is False:  # ground after the where equalities: no solver
            env = prover.complete({}, rel)
        else:
            if not _never(g) and (
                _free(g, facts.residual)
                or _witness(g, facts.residual)
                or not _contradicts(g, facts.residual, solve)
            ):
                continue
            r = prover.check(rel)
            if r.status != "refuted":  # the other assumptions contradict themselves
                continue
            env = prover.complete(dict(r.model), rel)
        cex = tuple(sorted(env.items()))  # the split's dims and those the where clauses tie
        out.append(
            error(
                "K0413",
                f"{what} can never be even: {explain(rel, env)}",
                Label(primary.loc, f"never a multiple of {D.fmt_infix(rel.lhs)}"),
                notes=(
                    _NOTE,
                    "no dims satisfy both this split and the signature's other assumptions, "
                    "so every call would fail",
                ),
                help="shard another dim, change the dim expression or the `where` clauses, "
                "or use a mesh whose size can divide it",
                counterexample=cex or None,
            )
        )
    return out


def _plain(p: D.Poly) -> bool:
    """Whether ``p`` has no exact-division atom (all its atoms are variables)."""
    return all(isinstance(a, str) for m, _ in p.terms for a, _e in m)


def _never(g: Rel) -> bool:
    """``size divides c0 + sum(c_i * m_i)`` fails for every value of the monomials when
    ``gcd(size, c_i...)`` does not divide ``c0`` (``2*D + 1`` over 2): arithmetic only."""
    size = D.as_const(g.lhs)
    if size is None or size <= 0 or not _plain(g.rhs):
        return False
    k = size
    c0 = 0
    for m, c in g.rhs.terms:
        if m:
            k = gcd(k, c)
        else:
            c0 = c
    return c0 % k != 0


def _free(g: Rel, residual: Sequence[Rel]) -> bool:
    """Satisfiable without the solver: ``size`` constant, the dim's variables constrained by
    nothing but ``k divides v`` facts, and either no constant term (every variable a multiple
    of ``size`` and of those ``k``) or a variable whose only term is ``c*v``, ``c`` coprime to
    ``size`` and ``v`` constrained by nothing (solve ``c*v = -rest`` modulo ``size``)."""
    size = D.as_const(g.lhs)
    if size is None or size <= 0 or not _plain(g.rhs):
        return False
    vs = D.variables(g.rhs)
    bound: set[str] = set()
    for a in residual:
        touched = rel_vars(a) & vs
        if not touched:
            continue
        v = D.as_var(a.rhs)
        if a.op == "dvd" and D.as_const(a.lhs) is not None and v is not None:
            bound.add(v)
            continue
        return False
    if all(m for m, _ in g.rhs.terms):
        return True
    for v in sorted(vs - bound):
        terms = [(m, c) for m, c in g.rhs.terms if any(a == v for a, _e in m)]
        if len(terms) == 1 and terms[0][0] == ((v, 1),) and gcd(terms[0][1], size) == 1:
            return True
    return False


def _witness(g: Rel, residual: Sequence[Rel]) -> bool:
    """Satisfiable without the solver when one value for every variable connected to the
    split (``size * m`` for a few small ``m``) satisfies it and every assumption sharing those
    variables: the Megatron block's splits ``2 | Dh*G*KV`` beside ``2 | Dh*KV``."""
    size = D.as_const(g.lhs)
    if size is None or size <= 0:
        return False
    rels = [g, *relevant(rel_vars(g), residual)]
    names: set[str] = set()
    for r in rels:
        names |= rel_vars(r)
    for m in (1, 2, 3, 4, 6, 12):
        env = dict.fromkeys(names, size * m)
        try:
            if all(holds(r, env) for r in rels):
                return True
        except DimEvalError:
            continue
    return False


def _contradicts(g: Rel, residual: Sequence[Rel], solve: Callable[[Formula], SolveResult]) -> bool:
    """The solver's verdict: the split ``g`` and the assumptions that share its variables
    cannot hold together (validity of ``1 = 0`` under them). Unknown counts as possible: the
    split stays an assumption, checked at every call and entry."""
    false = Rel("eq", D.const(1), D.ZERO)
    formula, _ = make_formula(false, [*residual, g], rel_vars(g))
    return solve(formula).status == "proved"


def uneven_written(
    ty: SType,
    meshes: Sequence[ast.Mesh],
    subst: Mapping[str, D.Poly],
    what: str,
    primary: Label,
) -> list[Diagnostic]:
    """K0413 for each split of a layout written in a body (``(the T e)``, ``(reshard x …)``
    and the collectives' annotations) whose dim, under the defn's ``where`` equalities
    (``subst``), is a constant the mesh does not divide. Arithmetic only: a symbolic split
    there is not an obligation (a generic defn may reshard a dim that each entry's dims
    split evenly; the shard plan checks it at concrete dims), only a ground one is certain
    to fail."""
    rels, _problems = shard_divs(ty, meshes)  # malformed annotations: K0702 elsewhere
    out: list[Diagnostic] = []
    for rel, axis, mesh in rels:
        g = rel_subst(rel, subst)
        if decide_cheap(canon_rel(g)) is False:
            out.append(
                error(
                    "K0413",
                    f"{what} dim {axis} split over {mesh}, which cannot be even: {explain(g, {})}",
                    Label(
                        primary.loc,
                        f"{D.fmt_infix(g.rhs)} is not a multiple of {D.fmt_infix(g.lhs)}",
                    ),
                    notes=(_NOTE,),
                    help="split another dim, or over a mesh (or `over=` axes) whose size "
                    "divides it",
                )
            )
    return out
