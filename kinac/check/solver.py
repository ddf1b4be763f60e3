"""The Z3 back end: decide one canonical :class:`Formula` within a deterministic budget.

Why a module of its own: it is the only place that imports z3 (lazily, so a check that
normalisation closes never pays for it). Validity is asked as unsatisfiability of
``assumptions and not goal`` with every variable >= 1; a model is a counterexample, which is
then minimised (z3 ``Optimize`` on the sum of the dims, falling back to tightening the bound
with the plain solver) so diagnostics show small numbers.

Why a resource budget and not a wall clock: a result is memoised in the content-addressed
store, so it must be a function of the formula and the budget only. z3's wall-clock
``timeout`` made a proof that normally takes milliseconds come back "unknown" on a loaded
machine (and that "unknown" was then cached). Every check here runs in a fresh z3 context
(so earlier queries of the process cannot change the search) under z3's deterministic
resource counter (``rlimit``): the user's ``solver.budget_ms`` is converted to
``budget_ms * RLIMIT_PER_MS`` units (:func:`budget_units`), calibrated so that the default
2000 ms covers what a 2000 ms wall clock covered on the reference machine. A generous wall
clock (:func:`safety_net_ms`) remains only as a safety net; its expiry is an unusual,
load-dependent outcome: it is reported as such (:data:`SAFETY_NET`) and the caller marks
the result volatile so that it is never stored (see ``Database.volatile``).
"""

from __future__ import annotations

from typing import Any

from kinac.check import dims as D
from kinac.check.formula import Formula, Rel, SolveResult

# z3 resource units per millisecond of ``solver.budget_ms``. Measured 2026-12-01 on the
# project's 2-core reference machine (z3-solver 5.4.1, nonlinear residues run to a 200-2000 ms
# wall clock): 2,000 to 5,000 units/ms depending on the formula and the load, so the default
# 2000 ms = 10M units is 2 to 5 s of z3 there: at least what the old 2 s wall clock allowed.
# At most 600,000 ms * 5000 = 3e9 units (z3's rlimit is a 32-bit unsigned). Changing it
# changes which results are "unknown"; solver.py is in the solve query's code identity, so
# cached results are then recomputed.
RLIMIT_PER_MS = 5000
# Marker that starts the reason of an outcome decided by the wall-clock safety net.
SAFETY_NET = "the solver's wall-clock safety net"


def budget_units(budget_ms: int) -> int:
    """z3 ``rlimit`` units for a user budget in (reference-machine) milliseconds."""
    return max(1, int(budget_ms)) * RLIMIT_PER_MS


def safety_net_ms(budget_ms: int) -> int:
    """Wall-clock limit that should never be reached: ten times the budget, plus 10 s."""
    return 10 * max(1, int(budget_ms)) + 10_000


def by_safety_net(r: SolveResult) -> bool:
    """Whether ``r`` depends on the machine's load (the wall-clock safety net fired)."""
    return r.reason.startswith(SAFETY_NET)


class _Tr:
    """Translation of polynomials to z3 terms; division atoms become constrained integers."""

    def __init__(self, z3: Any, ctx: Any) -> None:
        self.z3 = z3
        self.ctx = ctx
        self.vars: dict[str, Any] = {}
        self.divs: dict[str, Any] = {}
        self.side: list[Any] = []

    def var(self, name: str) -> Any:
        v = self.vars.get(name)
        if v is None:
            v = self.z3.Int(name, self.ctx)
            self.vars[name] = v
            self.side.append(v >= 1)
        return v

    def poly(self, p: D.Poly) -> Any:
        z3 = self.z3
        total: Any = z3.IntVal(0, self.ctx)
        for m, c in p.terms:
            t: Any = z3.IntVal(c, self.ctx)
            for a, e in m:
                x = self.var(a) if isinstance(a, str) else self.div(a)
                for _ in range(e):
                    t = t * x
            total = total + t
        return total

    def div(self, d: D.Div) -> Any:
        q = self.divs.get(d.key)
        if q is None:
            q = self.z3.Int(f"q{len(self.divs)}", self.ctx)
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


class _Budget:
    """The resource units left, charged by what each check really used (z3's own counter,
    cumulative over the fresh context of one :func:`solve_formula`)."""

    def __init__(self, units: int, wall_ms: int) -> None:
        self.units = units
        self.left = units
        self.wall_ms = wall_ms
        self.wall_expired = False

    def limit(self, solver: Any, units: int) -> None:
        solver.set("rlimit", max(1, units))
        solver.set("timeout", self.wall_ms)

    def check(self, z3: Any, solver: Any) -> Any:
        r = solver.check()
        self.left = self.units - _used(solver)
        if r == z3.unknown and solver.reason_unknown() == "timeout":
            self.wall_expired = True
        return r


def _used(solver: Any) -> int:
    """Units used so far in the solver's context (z3 counts per context, across checks)."""
    st = solver.statistics()
    return int(st.get_key_value("rlimit count")) if "rlimit count" in st.keys() else 0


def solve_formula(formula: Formula, budget_ms: int) -> SolveResult:
    """Prove ``formula.goal`` under its assumptions, or refute it with a minimal model.

    The outcome depends only on ``formula`` and ``budget_ms`` unless :func:`by_safety_net`
    says otherwise."""
    import z3

    ctx = z3.Context()
    tr = _Tr(z3, ctx)
    goal = tr.rel(formula.goal)
    hyps = [tr.rel(a) for a in formula.assumptions]
    cs = [*tr.side, *hyps, z3.Not(goal)]
    budget = _Budget(budget_units(budget_ms), safety_net_ms(budget_ms))
    s = z3.Solver(ctx=ctx)
    budget.limit(s, budget.left)
    s.add(*cs)
    r = budget.check(z3, s)
    if r == z3.unsat:
        return SolveResult("proved")
    if r == z3.unknown:
        why = s.reason_unknown()
        if budget.wall_expired:
            why = (
                f"{SAFETY_NET} ({budget.wall_ms} ms) expired before its {budget_ms} ms budget "
                "was used up (is the machine overloaded?); this outcome is not cached"
            )
        elif why in ("canceled", "max. resource limit exceeded") or "resource" in why:
            why = f"the solver ran out of its {budget_ms} ms budget"
        else:
            why = f"the solver gave up ({why}); the residue is nonlinear"
        return SolveResult("unknown", reason=why)
    first = _values(tr, s.model())
    model = _minimise(z3, ctx, tr, cs, first, budget)
    if budget.wall_expired:
        # A minimisation cut short by the wall clock depends on load: show the first model
        # (itself deterministic) rather than whatever partial progress was made.
        return SolveResult("refuted", tuple(sorted(first.items())))
    return SolveResult("refuted", tuple(sorted(model.items())))


def _natural(name: str) -> tuple[int, str]:
    return (int(name[1:]), name) if name[1:].isdigit() else (1 << 30, name)


def _values(tr: _Tr, m: Any) -> dict[str, int]:
    return {n: m.eval(v, model_completion=True).as_long() for n, v in tr.vars.items()}


def _minimise(
    z3: Any, ctx: Any, tr: _Tr, cs: list[Any], model: dict[str, int], budget: _Budget
) -> dict[str, int]:
    """Smaller counterexample within what is left of the budget (deterministic: every step
    is bounded by resource units, and its share is a fixed fraction of what is left)."""
    if not tr.vars or budget.left <= 1000:
        return model
    vs = list(tr.vars.values())
    total = z3.Sum(vs) if len(vs) > 1 else vs[0]
    opt = z3.Optimize(ctx=ctx)
    budget.limit(opt, budget.left // 2)
    opt.add(*cs)
    opt.set("priority", "lex")
    opt.minimize(total)
    for name in sorted(tr.vars, key=_natural):
        opt.minimize(tr.vars[name])  # ties broken per variable: the answer is unique
    r = budget.check(z3, opt)
    if r == z3.sat:
        return _values(tr, opt.model())
    # Tighten further with the plain solver (Optimize may stop early on nonlinear residues).
    s = z3.Solver(ctx=ctx)
    s.add(*cs)
    for _ in range(16):
        if budget.left <= 1000 or budget.wall_expired:
            break
        s.push()
        budget.limit(s, budget.left // 2)
        s.add(total < sum(model.values()))
        r = budget.check(z3, s)
        if r == z3.sat:
            model = _values(tr, s.model())
        s.pop()
        if r != z3.sat:
            break
    return model
