"""Divisibility that follows from the ``where`` clause is decided by normalisation (issue 15).

``G | H`` and ``H | D`` give ``G | D`` (grouped-query attention), ``2H | D`` gives ``H | D``,
``H | D`` gives ``2H | 2D``, ``H^2 | D`` gives ``H | D``: Z3's nonlinear search ran out of its
budget on each (K0501). The divisibility lattice over monomials (transitivity, factors of a
divisor divide, multiplying both sides, sums) proves them in microseconds, without the solver;
what does not follow is still refuted, with a counterexample.
"""

from __future__ import annotations

import random
import time

import pytest
from check_support import Workspace
from hypothesis import given, settings
from hypothesis import strategies as st

from kinac.check import DefnRef
from kinac.check import dims as D
from kinac.check.formula import Formula, Rel, SolveResult, divides_under, holds
from kinac.check.oblig import Prover
from kinac.check.solver import solve_formula

A, B, G, H, K, N = (D.var(n) for n in ("A", "B", "G", "H", "K", "N"))
Dv = D.var("D")
TWO = D.const(2)


def dvd(a: D.Poly, b: D.Poly) -> Rel:
    return Rel("dvd", a, b)


def _no_solver(f: Formula) -> SolveResult:
    raise AssertionError(f"normalisation should have decided this, not the solver: {f}")


IMPLIED = [
    ("transitive (GQA)", [dvd(G, H), dvd(H, Dv)], dvd(G, Dv)),
    ("a factor of a divisor", [dvd(D.mul(TWO, H), Dv)], dvd(H, Dv)),
    ("both sides times 2", [dvd(H, Dv)], dvd(D.mul(TWO, H), D.mul(TWO, Dv))),
    ("both sides times K", [dvd(H, Dv)], dvd(D.mul(K, H), D.mul(K, Dv))),
    ("a square's root", [dvd(D.mul(H, H), Dv)], dvd(H, Dv)),
    ("a constant's factor", [dvd(D.const(12), N)], dvd(D.const(4), N)),
    ("a multiple of the dividend", [dvd(H, Dv)], dvd(H, D.mul(Dv, N))),
    ("a sum", [dvd(H, Dv), dvd(H, N)], dvd(H, D.add(Dv, N, D.mul(H, K)))),
    ("three steps", [dvd(A, B), dvd(B, H), dvd(H, Dv)], dvd(A, D.mul(Dv, K))),
    ("an equality as two divisibilities", [Rel("eq", D.mul(H, H), Dv)], dvd(H, Dv)),
    ("product of two divisors' factors", [dvd(D.mul(G, H), Dv)], dvd(G, Dv)),
]


@pytest.mark.parametrize("name,facts,goal", IMPLIED, ids=[c[0] for c in IMPLIED])
def test_implied_divisibility_is_proved_without_the_solver(
    name: str, facts: list[Rel], goal: Rel
) -> None:
    prover = Prover(facts, _no_solver)
    t0 = time.perf_counter()
    assert prover.check(goal).status == "proved", name
    assert time.perf_counter() - t0 < 0.1
    assert prover.stats().by_norm == 1


NOT_IMPLIED = [
    ("the converse of a factor", [dvd(H, Dv)], dvd(D.mul(TWO, H), Dv)),
    ("a root's square", [dvd(H, Dv)], dvd(D.mul(H, H), Dv)),
    ("against the arrow", [dvd(G, H), dvd(H, Dv)], dvd(Dv, H)),
    ("a sum with a stranger", [dvd(H, Dv)], dvd(H, D.add(Dv, N))),
]


@pytest.mark.parametrize("name,facts,goal", NOT_IMPLIED, ids=[c[0] for c in NOT_IMPLIED])
def test_what_does_not_follow_is_refuted(name: str, facts: list[Rel], goal: Rel) -> None:
    prover = Prover(facts, lambda f: solve_formula(f, 2000))
    r = prover.check(goal)
    assert r.status == "refuted", (name, r)
    env = prover.counterexample(goal, r)
    assert all(holds(f, env) for f in facts) and not holds(goal, env), (name, env)


GQA = """
(defn groups [(x : (tensor f32 [S D])) (KV : dim) (H : dim)] -> (tensor f32 [S D])
  (where (divides H D) (divides KV H))
  (reshape (reshape x [S KV (/ D KV)]) [S D]))
(defn halves [(x : (tensor f32 [S D])) (H : dim)] -> (tensor f32 [S D])
  (where (divides (* 2 H) D))
  (reshape (reshape x [S H (/ D H)]) [S D]))
(defn doubled [(x : (tensor f32 [S (* 2 D)])) (H : dim)] -> (tensor f32 [S (* 2 D)])
  (where (divides H D))
  (reshape (reshape x [S (* 2 H) (/ (* 2 D) (* 2 H))]) [S (* 2 D)]))
(defn square [(x : (tensor f32 [S D])) (H : dim)] -> (tensor f32 [S D])
  (where (divides (* H H) D))
  (reshape (reshape x [S H (/ D H)]) [S D]))
"""


def test_programs_with_implied_divisibility_check_fast() -> None:
    ws = Workspace({"p.kina": GQA})
    ws.env.solve = _no_solver  # type: ignore[assignment,method-assign]
    for name in ("groups", "halves", "doubled", "square"):
        t0 = time.perf_counter()
        c = ws.env.checked(DefnRef("p.kina", name))
        assert c.ok, ws.render(c.diagnostics)
        assert time.perf_counter() - t0 < 0.5, name


# ---------------------------------------------------------------- soundness of the rewrites

_ENVS = [{"A": a, "B": b, "H": h} for a in range(1, 7) for b in range(1, 7) for h in range(1, 7)]


def _mono(r: random.Random) -> D.Poly:
    names = [r.choice("ABH") for _ in range(r.randint(1, 2))]
    return D.scale(D.mul(*(D.var(n) for n in names)), r.choice((1, 1, 2, 3, 4)))


def _sum(r: random.Random) -> D.Poly:
    return D.add(*(_mono(r) for _ in range(r.randint(1, 2))))


@settings(max_examples=300, deadline=None)
@given(seed=st.integers(0, 2**31 - 1))
def test_divides_under_is_sound(seed: int) -> None:
    r = random.Random(seed)
    facts = [(_mono(r), _sum(r)) for _ in range(r.randint(1, 3))]
    goal = (_mono(r), _sum(r))
    if not divides_under(*goal, facts):
        return
    for env in _ENVS:
        if all(D.evaluate(q, env) % D.evaluate(p, env) == 0 for p, q in facts):
            assert D.evaluate(goal[1], env) % D.evaluate(goal[0], env) == 0, (facts, goal, env)


@settings(max_examples=200, deadline=None)
@given(seed=st.integers(0, 2**31 - 1))
def test_clearing_quotients_keeps_the_value(seed: int) -> None:
    r = random.Random(seed)
    q = D.div(_sum(r), _mono(r))
    p = D.add(D.mul(_sum(r), q), _sum(r))
    cleared = D.clear_divs(p)
    for env in _ENVS[::7]:
        try:
            want = D.evaluate(p, env)
        except D.DimEvalError:
            continue  # the quotient is not exact here: no value to keep
        assert D.evaluate(cleared, env) == want, (p, cleared, env)
