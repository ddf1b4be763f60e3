"""Deferred obligations at specialisation (``solver.on_unknown = "runtime-check"``).

Every obligation the checker deferred (K0502) is checked at the concrete dims of every
instance: the entry's, and each callee's at the dims its call computes. A violation is K0804
at the obligation, with the concrete values; an obligation the checker proved that fails at
concrete dims is an internal error (``CheckerBug``), never a K0804 that claims it was deferred.
"""

from __future__ import annotations

import dataclasses
import sys

import pytest

from kinac.check import DefnRef, SolveResult, specialise
from kinac.check.env import InMemoryEnv

LIMIT = """(defn small [(x : (tensor f32 [N]))] -> (tensor f32 [N])
  (where (<= N 64))
  (neg x))

(defn f [(x : (tensor f32 [N]))] -> (tensor f32 [N])
  (small x))
"""

HEAD = """(defn head [(x : (tensor f32 [(+ A B)])) (y : (tensor f32 [B]))] -> (tensor f32 [A])
  (slice x :axis 0 :start 0 :stop A))

(defn f [(x : (tensor f32 [N])) (y : (tensor f32 [M]))] -> (tensor f32 [N])
  (let [(h (head x y))] x))
"""

TAKE = """(defn take [(x : (tensor f32 [N])) (K : dim)] -> (tensor f32 [K])
  (slice x :axis 0 :start 0 :stop K))

(defn f [(x : (tensor f32 [N]))] -> (tensor f32 [3])
  (take x 3))
"""


def _env(src: str, policy: str = "runtime-check", unknown: bool = True) -> InMemoryEnv:
    env = InMemoryEnv.from_sources({"a.kina": src})
    env.on_unknown = policy
    if unknown:  # stands for an obligation the solver cannot decide in its budget
        env.solve = lambda formula: SolveResult("unknown", reason="budget exhausted")  # type: ignore[method-assign]
    for c in env.check_file("a.kina"):
        assert c.ok, c.diagnostics
    return env


def test_a_deferred_where_clause_of_a_callee_is_checked_at_the_call() -> None:
    env = _env(LIMIT)
    f = env.checked(DefnRef("a.kina", "f"))
    assert [d.code for d in f.diagnostics] == ["K0502"] and len(f.deferred) == 1
    assert specialise(DefnRef("a.kina", "f"), {"N": 64}, {}, env).graph is not None
    bad = specialise(DefnRef("a.kina", "f"), {"N": 100}, {}, env)
    assert bad.graph is None
    (d,) = bad.diagnostics
    assert d.code == "K0804"
    assert d.primary.loc.defn == "f"  # type: ignore[union-attr]  # at the call in `f`
    assert "`small` requires N <= 64" in d.message and "N = 100" in d.message
    assert d.counterexample == (("N", 100),)
    assert any("deferred" in n for n in d.notes)


def test_a_deferred_at_least_1_is_reported_at_the_call_not_inside_the_callee() -> None:
    env = _env(HEAD)
    assert specialise(DefnRef("a.kina", "f"), {"N": 5, "M": 2}, {}, env).graph is not None
    bad = specialise(DefnRef("a.kina", "f"), {"N": 3, "M": 3}, {}, env)
    (d,) = bad.diagnostics
    assert d.code == "K0804" and d.primary.loc.defn == "f"  # type: ignore[union-attr]
    assert "`A` of `head`" in d.message and "at least 1" in d.message
    assert d.counterexample == (("M", 3), ("N", 3))


def test_an_obligation_deferred_in_a_callee_is_checked_at_the_dims_of_each_call() -> None:
    env = _env(TAKE)
    assert specialise(DefnRef("a.kina", "f"), {"N": 3}, {}, env).graph is not None
    bad = specialise(DefnRef("a.kina", "f"), {"N": 2}, {}, env)
    (d,) = bad.diagnostics
    assert d.code == "K0804"
    assert d.primary.loc.defn == "take"  # type: ignore[union-attr]  # the deferred obligation
    assert "K = 3 exceeds N = 2" in d.message
    (call,) = d.secondary
    assert call.loc.defn == "f" and "`take` is called here with K = 3, N = 2" in call.message  # type: ignore[union-attr]


PROVED = """(defn take [(x : (tensor f32 [N])) (K : dim)] -> (tensor f32 [K])
  (where (<= K N))
  (slice x :axis 0 :start 0 :stop K))

(defn f [(x : (tensor f32 [N]))] -> (tensor f32 [3])
  (where (<= 3 N))
  (take x 3))
"""


def test_nothing_is_deferred_when_everything_is_proved() -> None:
    env = _env(PROVED, unknown=False)
    assert all(not c.deferred for c in env.check_file("a.kina"))
    assert specialise(DefnRef("a.kina", "f"), {"N": 3}, {}, env).graph is not None


def test_a_proved_obligation_that_fails_concretely_is_an_internal_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A concrete evaluator that disagrees with a proved rule is a kinac bug, said as one: not
    a K0804 whose note claims the obligation was deferred."""
    from kinac.check.deferred import CheckerBug
    from kinac.check.prims.base import ShapeError

    env = _env(PROVED, unknown=False)
    sp = sys.modules["kinac.check.spec_emit"]  # the walk: its table of primitives by op

    def broken(_args: object) -> object:
        raise ShapeError("slice 0:3 of 3")

    monkeypatch.setitem(
        sp._BY_OP, "slice", dataclasses.replace(sp._BY_OP["slice"], concrete=broken)
    )
    with pytest.raises(CheckerBug, match="proved its shape obligations; this is a bug in kinac"):
        specialise(DefnRef("a.kina", "f"), {"N": 3}, {}, env)


def test_a_callee_assumption_that_fails_although_proved_is_an_internal_error() -> None:
    from kinac.check.deferred import CheckerBug
    from kinac.check.typed_ir import CheckedDefn

    env = _env(LIMIT.replace("  (small x))", "  (where (<= N 64))\n  (small x))"), unknown=False)
    f = env.checked(DefnRef("a.kina", "f"))
    assert not f.deferred and f.ok
    # a forged entry check that lets N = 100 through stands for a checker bug
    env._checked[DefnRef("a.kina", "f")] = dataclasses.replace(
        f, sig=dataclasses.replace(f.sig, where=(), assumptions=())
    )
    assert isinstance(env._checked[DefnRef("a.kina", "f")], CheckedDefn)
    with pytest.raises(CheckerBug, match="assumption N <= 64 is false"):
        specialise(DefnRef("a.kina", "f"), {"N": 100}, {}, env)
