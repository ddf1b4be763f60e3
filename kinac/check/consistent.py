"""Whether a defn's ``where`` clauses can hold at all: checked before its body is trusted.

Why: the ``where`` clauses are *assumptions* inside the defn (spec section 3), and every
obligation of the body is proved under them. Clauses that no dims satisfy together
(``(where (> N 4) (< N 3))``, ``(= N 3)`` beside ``(divides 2 N)``) made every obligation hold
vacuously: ``(add x y)`` with ``x : [N]`` and ``y : [M]`` passed ``kinac check`` without a word,
and the first report was a K0409 at a caller, if there was one. Such a defn can never be
called, so it is an error at the clauses (K0414), naming the smallest set of them that
contradict each other. The same closes a contradiction hidden behind an ``@sharded`` split
(:mod:`kinac.check.shard_even` leaves the split alone when the other assumptions already
contradict themselves).

Cheap first: the equalities become a substitution and the rest is decided by normal forms
or by a small witness (every free variable set to one of a few values); only what is left
asks the solver whether ``1 = 0`` follows from the clauses (an unknown answer says nothing).
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
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
    rel_vars,
)
from kinac.check.shard import mesh_names
from kinac.check.shard_even import impossible_splits
from kinac.diag.model import Diagnostic, Label
from kinac.reader import ast

if TYPE_CHECKING:
    from kinac.check.protocol import CheckEnv
    from kinac.check.sig import SigInfo

_WITNESS = (1, 2, 3, 4, 5, 6, 7, 8, 12, 24, 60, 120, 720, 5040)
_SAMPLES = 256
_FALSE = Rel("eq", D.const(1), D.ZERO)


def before_body(
    file: str, defn: ast.Defn, sig: SigInfo, env: CheckEnv, label: Callable[..., Label]
) -> list[Diagnostic]:
    """What a defn's check reports of its signature before walking the body: mesh names the
    annotations use (:func:`mesh_names`), contradictory ``where`` clauses (K0414) and splits
    that no dims make even (K0413, :func:`impossible_splits`)."""
    params = defn.signature.params
    typed = [(p.type, ap.nid) for p, ap in zip(sig.params, params, strict=True)]
    typed.append((sig.ret, defn.signature.ret.nid))
    out = list(mesh_names(typed, env.meshes(file), sig.ref.name, label))
    contradiction = contradictory_where(sig, env.solve, label)
    if contradiction is not None:
        out.append(contradiction)
    out.extend(impossible_splits(sig, params, env.solve, label))
    return out


def contradictory_where(
    sig: SigInfo, solve: Callable[[Formula], SolveResult], label: Callable[[int, str], Label]
) -> Diagnostic | None:
    """K0414 when ``sig``'s ``where`` clauses (with the exact divisions of its types) hold for
    no dims, at the clauses of a minimal contradicting subset; ``label(nid, msg)`` locates a
    clause. None when some dims satisfy them or the solver cannot tell."""
    if not sig.where:
        return None
    clauses = list(sig.where)
    background = list(sig.type_divs)
    if _satisfiable([r for _, r in clauses] + background, solve) is not False:
        return None
    core = list(clauses)
    for c in clauses:  # deletion: drop each clause the contradiction does not need
        if len(core) == 1:
            break
        rest = [x for x in core if x is not c]
        if _satisfiable([r for _, r in rest] + background, solve) is False:
            core = rest
    with_divs = bool(background) and _satisfiable([r for _, r in core], solve) is not False
    *others, (last_nid, _last) = core
    notes = (
        "`where` clauses are assumptions inside the defn: under clauses that no dims satisfy, "
        "every shape obligation of the body holds vacuously, so its errors go unreported",
        "every call of this defn would fail",
    )
    name = sig.ref.name
    if others:
        message = f"the `where` clauses of `{name}` contradict each other: no dims satisfy them"
        primary = "no dims satisfy this together with the marked clause" + "s" * (len(others) > 1)
    elif with_divs:
        message = f"the `where` clause of `{name}` contradicts the exact divisions of its types"
        primary = "no dims satisfy this together with the `(/ a b)` of the types"
    else:
        message = f"the `where` clause of `{name}` holds for no dims"
        primary = "no dims satisfy this"
    return error(
        "K0414",
        message,
        label(last_nid, primary),
        tuple(label(nid, "contradicted by this clause") for nid, _ in others),
        notes,
        help="correct or remove "
        + ("one of the marked clauses" if others else "this clause")
        + " (dims are positive integers)",
    )


def _satisfiable(rels: Sequence[Rel], solve: Callable[[Formula], SolveResult]) -> bool | None:
    """Whether some dims >= 1 satisfy all of ``rels``: True (a witness or a model), False
    (ground and false after the equalities, or the solver proves ``1 = 0`` from them), None
    (the solver cannot tell)."""
    facts = Facts(rels)
    residual = list(facts.residual)
    for r in residual:
        if decide_cheap(canon_rel(r)) is False:
            return False
    if _witness(rels, facts):
        return True
    if not residual:
        return True
    keep: frozenset[str] = frozenset()
    for r in residual:
        keep |= rel_vars(r)
    formula, _ = make_formula(_FALSE, residual, keep)
    status = solve(formula).status
    if status == "proved":
        return False
    return True if status == "refuted" else None


def _witness(rels: Sequence[Rel], facts: Facts) -> bool:
    """Some small dims satisfy every relation: the free variables (those the equalities do not
    eliminate) all at one value, then a fixed pseudo-random sample of values per variable
    (``2*K | D`` needs ``D`` above ``K``); the eliminated ones through the equalities."""
    names: set[str] = set()
    for r in rels:
        names |= rel_vars(r)
    free_set = names - set(facts.subst)
    for p in facts.subst.values():
        free_set |= D.variables(p)
    free = sorted(free_set)
    rng = random.Random(len(free))
    envs = [dict.fromkeys(free, m) for m in _WITNESS]
    envs += [{v: rng.choice(_WITNESS) for v in free} for _ in range(_SAMPLES if free else 0)]
    for env in envs:
        try:
            for v, p in facts.subst.items():
                env[v] = D.evaluate(p, env)
            if all(x >= 1 for x in env.values()) and all(holds(r, env) for r in rels):
                return True
        except DimEvalError:
            continue
    return False
