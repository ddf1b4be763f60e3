"""Discharging obligations inside one defn: normalisation first, then the solver via the env.

Why: every shape rule states what must hold as a :class:`Rel`; this class decides it under the
defn's assumptions, counts how each was closed (the benchmark reports the share closed without
Z3), and turns a refutation into a diagnostic whose message evaluates both sides at the
counterexample ("D = 3 but F = 5 with D = 3, F = 5").
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from kinac.check import dims as D
from kinac.check.codes import error, warning
from kinac.check.dims import DimEvalError
from kinac.check.formula import (
    Facts,
    Formula,
    Rel,
    SolveResult,
    canon_rel,
    decide_cheap,
    divides_under,
    divisibility_facts,
    make_formula,
    rel_subst,
    rel_vars,
)
from kinac.diag.model import Diagnostic, Label
from kinac.rules.codec import record


@record
class Deferred:
    """An obligation that ``solver.on_unknown = "runtime-check"`` deferred (K0502): what it was
    and where, so that specialisation checks it at the concrete dims of every instance."""

    rel: Rel
    code: str
    what: str
    primary: Label


@record
class ObStats:
    """How the obligations of one defn were closed."""

    total: int = 0
    by_norm: int = 0
    by_solver: int = 0


class Prover:
    """Obligations of one defn under its assumptions."""

    def __init__(
        self,
        assumptions: Sequence[Rel],
        solve: Callable[[Formula], SolveResult],
        on_unknown: str = "error",
    ) -> None:
        self.facts = Facts(assumptions)
        self._dvd_facts = divisibility_facts(self.facts.residual)
        self.solve = solve
        self.on_unknown = on_unknown  # "error", or "runtime-check": defer to specialisation
        self.total = self.norm = self.solver = 0
        self.diags: list[Diagnostic] = []
        self.deferred: list[Deferred] = []
        # each obligation decided once per defn (the facts never change during its check): a
        # model chaining one block 32 times proves the same ~17 obligations at each call
        self._decided: dict[Rel, tuple[SolveResult, bool]] = {}  # rel -> (result, by_norm)

    def stats(self) -> ObStats:
        return ObStats(self.total, self.norm, self.solver)

    def check(self, rel: Rel) -> SolveResult:
        """Decide ``rel`` (no diagnostic); counts towards the statistics. A refutation's model
        satisfies every assumption that bears on the variables of ``rel``."""
        self.total += 1
        hit = self._decided.get(rel)
        if hit is not None:  # counted as the first time was
            if hit[1]:
                self.norm += 1
            else:
                self.solver += 1
            return hit[0]
        g = self._normal(rel)
        cheap = decide_cheap(canon_rel(g))
        if cheap is True or (g.op == "dvd" and divides_under(g.lhs, g.rhs, self._dvd_facts)):
            self.norm += 1
            r, by_norm = SolveResult("proved"), True
        else:
            self.solver += 1
            r, by_norm = self._solve(rel, g, self.facts.residual), False
        self._decided[rel] = (r, by_norm)
        return r

    def by_norm(self, rel: Rel) -> bool:
        """Whether ``rel``, decided in this defn, was closed without the solver."""
        return self._decided[rel][1]

    def proved_before_quietly(self, rel: Rel) -> bool:
        """Whether ``rel`` was proved in this defn (not counted)."""
        hit = self._decided.get(rel)
        return hit is not None and hit[0].status == "proved"

    def count_proved(self, by_norm: int, by_solver: int) -> None:
        """Count obligations proved before as :meth:`check` would count them again."""
        self.total += by_norm + by_solver
        self.norm += by_norm
        self.solver += by_solver

    def proved_before(self, rel: Rel) -> bool:
        """True (and counted as :meth:`check` counts it) when ``rel`` was already proved in
        this defn: its caller may skip building the labels of a diagnostic it cannot emit."""
        hit = self._decided.get(rel)
        if hit is None or hit[0].status != "proved":
            return False
        self.check(rel)
        return True

    def _normal(self, rel: Rel) -> Rel:
        """``rel`` rewritten by the equalities, exact quotients times their divisors cleared."""
        g = rel_subst(rel, self.facts.subst)
        return Rel(g.op, D.clear_divs(g.lhs), D.clear_divs(g.rhs))

    def _solve(self, rel: Rel, g: Rel, assumptions: Sequence[Rel]) -> SolveResult:
        formula, back = make_formula(g, assumptions, self._mentioned(rel))
        r = self.solve(formula)
        if r.status == "refuted":
            r = SolveResult("refuted", tuple((back.get(k, k), v) for k, v in r.model), r.reason)
        return r

    def _mentioned(self, rel: Rel) -> frozenset[str]:
        """The variables a counterexample of ``rel`` shows or needs: those of ``rel`` and, for
        the ones the equalities eliminate, those they are rewritten to."""
        out = set(rel_vars(rel))
        for v in rel_vars(rel):
            p = self.facts.subst.get(v)
            if p is not None:
                out |= D.variables(p)
        return frozenset(out)

    def require(
        self,
        rel: Rel,
        code: str,
        what: str,
        primary: Label,
        secondary: tuple[Label, ...] = (),
        help: str | None = None,
        notes: tuple[str, ...] = (),
        hint: tuple[Rel, ...] = (),
    ) -> bool:
        """Prove ``rel`` or record a diagnostic; True when proved. ``hint``: extra assumptions
        tried first when looking for the counterexample (e.g. dims other than 1, so that the
        counterexample breaks numpy broadcasting too)."""
        r = self.check(rel)
        if r.status == "proved":
            return True
        if r.status == "unknown" and self.on_unknown == "runtime-check":
            self.deferred.append(Deferred(rel, code, what, primary))
            self.diags.append(
                warning(
                    "K0502",
                    f"cannot decide whether {fmt_rel(rel)} ({what}): {r.reason}; "
                    "it will be checked at the concrete dims of each entry and call",
                    primary,
                    secondary,
                    notes + ('solver.on_unknown = "runtime-check" in kina.toml defers it',),
                    help="add a `where` clause that states it to have it proved once for all dims",
                )
            )
            return True
        if r.status == "unknown":
            self.diags.append(
                error(
                    "K0501",
                    f"cannot decide whether {fmt_rel(rel)} ({what}): {r.reason}",
                    primary,
                    secondary,
                    notes + (f"the obligation was: {fmt_rel(rel)}",),
                    help="add a `where` clause that states it, or simplify the dim expression",
                )
            )
            return False
        env = self.counterexample(rel, r, hint)
        cex = tuple((v, env[v]) for v in _order(rel, env))
        self.diags.append(
            error(code, f"{what}: {explain(rel, env)}", primary, secondary, notes, help, cex)
        )
        return False

    def counterexample(
        self, rel: Rel, refuted: SolveResult, hint: tuple[Rel, ...] = ()
    ) -> dict[str, int]:
        """Dims that satisfy the assumptions and break ``rel`` (refuted by ``refuted``):
        preferably ones that also satisfy ``hint``."""
        r = refuted
        if hint:
            g = self._normal(rel)
            extra = tuple(rel_subst(h, self.facts.subst) for h in hint)
            r2 = self._solve(rel, g, (*self.facts.residual, *extra))
            if r2.status == "refuted":
                r = r2
        return self.complete(dict(r.model), rel)

    def complete(self, model: dict[str, int], rel: Rel) -> dict[str, int]:
        """Values for every variable of ``rel``: the model, eliminated variables through the
        equalities, and 1 for variables the residue did not mention."""
        env = dict(model)
        for v in rel_vars(rel):
            if v not in env and v not in self.facts.subst:
                env[v] = 1
        for p in self.facts.subst.values():
            for w in D.variables(p):
                env.setdefault(w, 1)
        for v, p in self.facts.subst.items():
            try:
                env[v] = D.evaluate(p, env)
            except DimEvalError:
                pass
        return env


def _order(rel: Rel, env: dict[str, int]) -> list[str]:
    seen: list[str] = []
    for side in (rel.lhs, rel.rhs):
        for m, _ in side.terms:
            for a, _e in m:
                names = (
                    [a] if isinstance(a, str) else sorted(D.variables(a.num) | D.variables(a.den))
                )
                for n in names:
                    if n not in seen and n in env:
                        seen.append(n)
    return seen


_OPS = {"eq": "=", "le": "<=", "lt": "<", "dvd": "divides"}


def fmt_rel(r: Rel) -> str:
    """``D = H*Dh``, ``H divides D``."""
    return f"{D.fmt_infix(r.lhs)} {_OPS[r.op]} {D.fmt_infix(r.rhs)}"


def _side(p: D.Poly, env: dict[str, int]) -> tuple[str, str]:
    text = D.fmt_infix(p)
    try:
        v = str(D.evaluate(p, env))
    except DimEvalError:
        v = "?"
    return text, v


def explain(rel: Rel, env: dict[str, int]) -> str:
    """Both sides of ``rel`` evaluated at ``env``: ``2*D = 6 but H = 5 with D = 3``; the
    values of variables a side already states are not repeated."""
    (lt, lv), (rt, rv) = _side(rel.lhs, env), _side(rel.rhs, env)
    ls = lt if lt == lv else f"{lt} = {lv}"
    rs = rt if rt == rv else f"{rt} = {rv}"
    if rel.op == "eq" and (lt == lv) != (rt == rv):  # one side a number: "N = 2, not 1"
        body = f"{rs}, not {lv}" if lt == lv else f"{ls}, not {rv}"
    elif rel.op == "eq":
        body = f"{ls} but {rs}" if (lt != lv or rt != rv) else f"{lv} is not {rv}"
    elif rel.op == "le":
        body = f"{ls} exceeds {rs}"
    elif rel.op == "lt":
        body = f"{ls} is not below {rs}"
    else:
        body = f"{ls} does not divide {rs}"
    stated = {t for t in (lt, rt) if t in env}  # a side that is one variable shows its value
    names = [n for n in _order(rel, env) if n not in stated]
    with_ = ", ".join(f"{n} = {env[n]}" for n in names)
    return body + (f" with {with_}" if with_ else "")
