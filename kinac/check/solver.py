"""The Z3 back end: decide one canonical :class:`Formula` within a time budget.

Why a module of its own: it is the only place that imports z3 (lazily, so a check that
normalisation closes never pays for it). Validity is asked as unsatisfiability of
``assumptions and not goal`` with every variable >= 1; a model is a counterexample, which is
then minimised (z3 ``Optimize`` on the sum of the dims, falling back to tightening the bound
with the plain solver) so diagnostics show small numbers.
"""

from __future__ import annotations

import time
from typing import Any

from kinac.check import dims as D
from kinac.check.formula import Formula, Rel, SolveResult


class _Tr:
    """Translation of polynomials to z3 terms; division atoms become constrained integers."""

    def __init__(self, z3: Any) -> None:
        self.z3 = z3
        self.vars: dict[str, Any] = {}
        self.divs: dict[str, Any] = {}
        self.side: list[Any] = []

    def var(self, name: str) -> Any:
        v = self.vars.get(name)
        if v is None:
            v = self.z3.Int(name)
            self.vars[name] = v
            self.side.append(v >= 1)
        return v

    def poly(self, p: D.Poly) -> Any:
        z3 = self.z3
        total: Any = z3.IntVal(0)
        for m, c in p.terms:
            t: Any = z3.IntVal(c)
            for a, e in m:
                x = self.var(a) if isinstance(a, str) else self.div(a)
                for _ in range(e):
                    t = t * x
            total = total + t
        return total

    def div(self, d: D.Div) -> Any:
        q = self.divs.get(d.key)
        if q is None:
            q = self.z3.Int(f"q{len(self.divs)}")
            self.divs[d.key] = q
            self.side.append(q * self.poly(d.den) == self.poly(d.num))
        return q

    def rel(self, r: Rel) -> Any:
        a = self.poly(r.lhs)
        if r.op == "eq0":
            return a == 0
        if r.op == "ge0":
            return a >= 0
        b = self.poly(r.rhs)
        return b % a == 0


def solve_formula(formula: Formula, budget_ms: int) -> SolveResult:
    """Prove ``formula.goal`` under its assumptions, or refute it with a minimal model."""
    import z3

    t0 = time.monotonic()
    tr = _Tr(z3)
    goal = tr.rel(formula.goal)
    hyps = [tr.rel(a) for a in formula.assumptions]
    s = z3.Solver()
    s.set("timeout", max(1, int(budget_ms)))
    s.add(*tr.side, *hyps, z3.Not(goal))
    r = s.check()
    if r == z3.unsat:
        return SolveResult("proved")
    if r == z3.unknown:
        why = s.reason_unknown()
        if why in ("timeout", "canceled"):
            why = f"the solver ran out of its {budget_ms} ms budget"
        else:
            why = f"the solver gave up ({why}); the residue is nonlinear"
        return SolveResult("unknown", reason=why)
    model = _values(tr, s.model())
    left = budget_ms - int((time.monotonic() - t0) * 1000)
    model = _minimise(z3, tr, [*tr.side, *hyps, z3.Not(goal)], model, left)
    return SolveResult("refuted", tuple(sorted(model.items())))


def _natural(name: str) -> tuple[int, str]:
    return (int(name[1:]), name) if name[1:].isdigit() else (1 << 30, name)


def _values(tr: _Tr, m: Any) -> dict[str, int]:
    return {n: m.eval(v, model_completion=True).as_long() for n, v in tr.vars.items()}


def _minimise(
    z3: Any, tr: _Tr, cs: list[Any], model: dict[str, int], left_ms: int
) -> dict[str, int]:
    if not tr.vars or left_ms <= 5:
        return model
    total = z3.Sum(list(tr.vars.values())) if len(tr.vars) > 1 else next(iter(tr.vars.values()))
    t0 = time.monotonic()
    opt = z3.Optimize()
    opt.set("timeout", max(1, left_ms // 2))
    opt.add(*cs)
    opt.set("priority", "lex")
    opt.minimize(total)
    for name in sorted(tr.vars, key=_natural):
        opt.minimize(tr.vars[name])  # ties broken per variable: the answer is unique
    if opt.check() == z3.sat:
        return _values(tr, opt.model())
    left = left_ms - int((time.monotonic() - t0) * 1000)
    # Tighten further with the plain solver (Optimize may stop early on nonlinear residues).
    s = z3.Solver()
    s.add(*cs)
    for _ in range(16):
        if left <= 5:
            break
        t1 = time.monotonic()
        s.push()
        s.set("timeout", max(1, left // 2))
        s.add(total < sum(model.values()))
        r = s.check()
        if r == z3.sat:
            model = _values(tr, s.model())
        s.pop()
        left -= int((time.monotonic() - t1) * 1000)
        if r != z3.sat:
            break
    return model
