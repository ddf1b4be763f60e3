"""Relations over dims, canonical solver formulas, and the cheap decision procedure.

Why: an obligation is a :class:`Rel` under the defn's assumptions. Equalities ``v = p`` among the
assumptions become a substitution (:class:`Facts`), after which most goals are closed by
:func:`decide_cheap` on canonical polynomials. What is left is put in a canonical
:class:`Formula` (goal as ``p = 0``, ``p >= 0`` or ``a | b``; only the assumptions that share
variables with the goal; variables alpha-renamed ``d0, d1, ...``), so equal residues in any file
are the same value, and the rule engine solves each once.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence

from kinac.check import dims as D
from kinac.check.dims import Poly
from kinac.rules.codec import record

RELS = ("eq", "le", "lt", "dvd")


@record
class Rel:
    """``lhs OP rhs`` with OP ``eq le lt`` or ``dvd`` (``lhs`` divides ``rhs``)."""

    op: str
    lhs: Poly
    rhs: Poly


@record
class Formula:
    """A canonical solver query: is ``goal`` valid under ``assumptions``, all variables >= 1?

    Ops are ``eq0`` (``lhs = 0``), ``ge0`` (``lhs >= 0``) and ``dvd``.
    """

    goal: Rel
    assumptions: tuple[Rel, ...]


@record
class SolveResult:
    """``proved``; ``refuted`` with ``model`` (minimised dims); or ``unknown`` with ``reason``."""

    status: str
    model: tuple[tuple[str, int], ...] = ()
    reason: str = ""


def rel_vars(r: Rel) -> frozenset[str]:
    """Variables of both sides."""
    return D.variables(r.lhs) | D.variables(r.rhs)


def rel_subst(r: Rel, s: Mapping[str, Poly]) -> Rel:
    """Apply a substitution to both sides."""
    return Rel(r.op, D.subst(r.lhs, s), D.subst(r.rhs, s))


def holds(r: Rel, env: Mapping[str, int]) -> bool:
    """Evaluate a relation at concrete dims (raises ``DimEvalError`` if a side has no value)."""
    a, b = D.evaluate(r.lhs, env), D.evaluate(r.rhs, env)
    if r.op == "eq":
        return a == b
    if r.op == "le":
        return a <= b
    if r.op == "lt":
        return a < b
    return a != 0 and b % a == 0


def _sign_normal(p: Poly) -> Poly:
    return D.neg(p) if p.terms and p.terms[0][1] < 0 else p


def canon_rel(r: Rel) -> Rel:
    """The canonical form of a relation: ``eq0``, ``ge0`` (integers: ``a < b`` is ``b-a-1 >= 0``)
    or ``dvd``."""
    if r.op == "eq":
        return Rel("eq0", _sign_normal(D.sub(r.lhs, r.rhs)), D.ZERO)
    if r.op == "le":
        return Rel("ge0", D.sub(r.rhs, r.lhs), D.ZERO)
    if r.op == "lt":
        return Rel("ge0", D.sub(D.sub(r.rhs, r.lhs), D.const(1)), D.ZERO)
    if r.op == "dvd":
        return r
    raise ValueError(f"unknown relation {r.op!r}")


def decide_cheap(c: Rel) -> bool | None:
    """Decide a canonical relation by normal forms alone: True (valid), False (ground and false)
    or None (needs the solver). Sound because every atom is an integer >= 1."""
    if c.op == "eq0":
        k = D.as_const(c.lhs)
        return None if k is None else k == 0
    if c.op == "ge0":
        lb = D.lower_bound(c.lhs)
        if lb is not None and lb >= 0:
            return True
        k = D.as_const(c.lhs)
        return None if k is None else k >= 0
    a, b = c.lhs, c.rhs
    if D.exact_div(b, a) is not None:
        return True
    ka, kb = D.as_const(a), D.as_const(b)
    if ka is not None and kb is not None:
        return ka != 0 and kb % ka == 0
    if ka is not None and ka != 0 and all(co % ka == 0 for _, co in b.terms):
        return True
    return None


def divides_under(a: Poly, b: Poly, facts: Sequence[tuple[Poly, Poly]], depth: int = 6) -> bool:
    """Whether ``a | b`` follows from the divisibility ``facts`` (pairs ``p | q``) in the
    divisibility lattice over polynomials: ``b`` a polynomial multiple of ``a``; a fact ``p | q``
    with ``b = k*q`` reduces the goal to ``a | k*p`` (transitivity, factors of a divisor, both
    sides multiplied by ``k``); a sum is divided when each of its terms is.

    Why not Z3: divisibility is nonlinear integer arithmetic, where the solver's search runs out
    of its budget on facts as plain as ``G | H, H | D => G | D``. Sound (every step is a
    divisibility law over the integers) and bounded (``depth`` steps, no fact reused on a path, at most 4096 goals visited).
    """
    seen: set[tuple[Poly, Poly]] = set()

    def go(x: Poly, y: Poly, left: int, used: frozenset[int]) -> bool:
        if not y.terms or D.exact_div(y, x) is not None:
            return True
        k = D.as_const(x)
        if k is not None and k != 0 and all(c % k == 0 for _, c in y.terms):
            return True
        if left == 0 or (x, y) in seen or len(seen) > 4096:
            return False
        seen.add((x, y))
        for i, (p, q) in enumerate(facts):
            if i in used:
                continue
            m = D.exact_div(y, q)
            if m is not None and go(x, D.mul(m, p), left - 1, used | {i}):
                return True
        if len(y.terms) > 1:
            return all(go(x, Poly((t,)), left - 1, used) for t in y.terms)
        return False

    return go(a, b, depth, frozenset())


def divisibility_facts(assumptions: Sequence[Rel]) -> tuple[tuple[Poly, Poly], ...]:
    """The ``p | q`` pairs the assumptions state: divisibility, and equalities both ways."""
    out: list[tuple[Poly, Poly]] = []
    for r in assumptions:
        if r.op == "dvd":
            out.append((r.lhs, r.rhs))
        elif r.op == "eq":
            out.extend(((r.lhs, r.rhs), (r.rhs, r.lhs)))
    return tuple(out)


class Facts:
    """A defn's assumptions, with equalities ``v = p`` turned into a substitution.

    ``subst`` maps an eliminated variable to a polynomial over the others; ``residual`` keeps the
    assumptions that are not such equalities (inequalities, divisibility, nonlinear equalities),
    already rewritten by ``subst``.
    """

    def __init__(self, assumptions: Sequence[Rel]) -> None:
        self.subst: dict[str, Poly] = {}
        residual: list[Rel] = []
        for r in assumptions:
            r2 = rel_subst(r, self.subst)
            if r2.op == "eq" and self._orient(r2):
                continue
            residual.append(r2)
        self.residual = tuple(
            rr
            for rr in (rel_subst(r, self.subst) for r in residual)
            if decide_cheap(canon_rel(rr)) is not True
        )

    def _orient(self, r: Rel) -> bool:
        for v, p in ((D.as_var(r.lhs), r.rhs), (D.as_var(r.rhs), r.lhs)):
            if v is not None and v not in D.variables(p):
                for k in list(self.subst):
                    self.subst[k] = D.subst(self.subst[k], {v: p})
                self.subst[v] = p
                return True
        return False

    def normal(self, p: Poly) -> Poly:
        """``p`` rewritten by the equalities."""
        return D.subst(p, self.subst)


def relevant(goal_vars: frozenset[str], assumptions: Sequence[Rel]) -> list[Rel]:
    """The assumptions connected to the goal's variables (transitively), in order."""
    seen = set(goal_vars)
    chosen = [False] * len(assumptions)
    avars = [rel_vars(a) for a in assumptions]
    changed = True
    while changed:
        changed = False
        for i, vs in enumerate(avars):
            if not chosen[i] and vs & seen:
                chosen[i] = True
                seen |= vs
                changed = True
    return [a for a, c in zip(assumptions, chosen, strict=True) if c]


def _occurrences(p: Poly, out: dict[str, list[int]], weight: int) -> None:
    for m, c in p.terms:
        for a, e in m:
            if isinstance(a, str):
                out.setdefault(a, []).append(weight * 1000 + e * 10 + min(abs(c), 9))
            else:
                _occurrences(a.num, out, weight)
                _occurrences(a.den, out, weight)


def make_formula(
    goal: Rel, assumptions: Sequence[Rel], keep: frozenset[str] = frozenset()
) -> tuple[Formula, dict[str, str]]:
    """The canonical, alpha-renamed formula for ``goal`` and the map canonical -> original name.

    Only the assumptions connected to the goal's variables, or to ``keep`` (variables the
    obligation mentioned before its sides cancelled or were rewritten), are kept: a model then
    gives every such variable a value that satisfies them, so a counterexample never breaks an
    assumption, even when the goal itself is ground (``2*M + 1 <= 2*M`` under ``M > 7``).

    Variables are ordered by a name-independent invariant (how they occur); variables that tie
    are tried in every order (up to a bound) and the smallest result is kept, so equal residues
    written with other names meet in the solver cache.
    """
    g = canon_rel(goal)
    rel = [canon_rel(a) for a in relevant(rel_vars(g) | keep, assumptions)]
    occ: dict[str, list[int]] = {}
    _occurrences(g.lhs, occ, 2)
    _occurrences(g.rhs, occ, 2)
    for a in rel:
        _occurrences(a.lhs, occ, 1)
        _occurrences(a.rhs, occ, 1)
    inv = {v: sorted(occ[v], reverse=True) for v in occ}
    base = sorted(occ, key=lambda v: (inv[v], v))
    groups: list[list[str]] = []
    for v in base:
        if groups and inv[groups[-1][0]] == inv[v]:
            groups[-1].append(v)
        else:
            groups.append([v])
    best: tuple[str, Formula, dict[str, str]] | None = None
    for order in _orders(groups, limit=48):
        ren = {v: D.var(f"d{i}") for i, v in enumerate(order)}
        g2 = _canon_after_rename(rel_subst(g, ren))
        rel2 = sorted({_canon_after_rename(rel_subst(a, ren)) for a in rel}, key=_rel_key)
        f = Formula(g2, tuple(rel2))
        key = "&".join(_rel_key(r) for r in (g2, *rel2))
        if best is None or key < best[0]:
            best = (key, f, {f"d{i}": v for i, v in enumerate(order)})
    assert best is not None
    return best[1], best[2]


def _orders(groups: list[list[str]], limit: int) -> list[list[str]]:
    out: list[list[str]] = [[]]
    for grp in groups:
        perms = list(itertools.islice(itertools.permutations(grp), limit))
        out = [o + list(p) for o in out for p in perms][:limit]
    return out


def _canon_after_rename(r: Rel) -> Rel:
    if r.op == "eq0":
        return Rel("eq0", _sign_normal(r.lhs), D.ZERO)
    return r


def _rel_key(r: Rel) -> str:
    return f"{r.op}|{D.fmt_infix(r.lhs)}|{D.fmt_infix(r.rhs)}"
