"""The concrete interpreter (the tests' referee of the checker) judges deep programs as the
checker does: a chain of 1,500 calls, a nested expression as deep as the reader allows and 1,500 chained lets
evaluate (it stopped at 64 nested calls and called that recursion); only a real cycle of
calls is recursion."""

from __future__ import annotations

import pytest

from kinac.check.concrete import ConcreteError, eval_all, eval_defn
from kinac.check.env import InMemoryEnv

DEPTH = 1500
PARAM = "[(x : (tensor f32 [N]))] -> (tensor f32 [N])"


def _env(src: str) -> InMemoryEnv:
    return InMemoryEnv.from_sources({"p.kina": src})


def _defn(env: InMemoryEnv, name: str):  # type: ignore[no-untyped-def]
    pf = env.file("p.kina")
    assert pf is not None
    return next(d for d in pf.defns if d.name == name)


def test_a_chain_of_1500_calls_evaluates() -> None:
    lines = [f"(defn f0 {PARAM} (neg x))"]
    lines += [f"(defn f{i} {PARAM} (f{i - 1} x))" for i in range(1, DEPTH)]
    env = _env("\n".join(lines))
    out = eval_defn("p.kina", _defn(env, f"f{DEPTH - 1}"), {"N": 3}, {}, env)
    assert out.shape == (3,) and out.dtype == "f32"


def test_a_failure_at_the_bottom_of_a_deep_chain_is_reported() -> None:
    lines = [
        "(defn f0 [(x : (tensor f32 [N]))] -> (tensor f32 [2]) (slice x :axis 0 :start 0 :stop 2))"
    ]
    lines += [
        f"(defn f{i} [(x : (tensor f32 [N]))] -> (tensor f32 [2]) (f{i - 1} x))"
        for i in range(1, 200)
    ]
    env = _env("\n".join(lines))
    assert eval_defn("p.kina", _defn(env, "f199"), {"N": 2}, {}, env).shape == (2,)
    with pytest.raises(ConcreteError, match="slice"):
        eval_defn("p.kina", _defn(env, "f199"), {"N": 1}, {}, env)


def test_deep_nesting_and_long_lets_evaluate() -> None:
    nested = "x"
    for _ in range(60):  # the reader allows 64 levels
        nested = f"(neg {nested})"
    binds = " ".join(f"(a{i} (neg a{i - 1}))" for i in range(1, DEPTH))
    src = f"(defn g {PARAM} {nested})\n(defn h {PARAM} (let [(a0 x) {binds}] a{DEPTH - 1}))\n"
    env = _env(src)
    for name in ("g", "h"):
        out, fails = eval_all("p.kina", _defn(env, name), {"N": 4}, {}, env)
        assert fails == [] and out is not None and out.shape == (4,)


def test_a_cycle_is_still_recursion() -> None:
    env = _env(f"(defn a {PARAM} (b x))\n(defn b {PARAM} (a x))\n")
    out, fails = eval_all("p.kina", _defn(env, "a"), {"N": 2}, {}, env)
    assert out is None and "recursion" in str(fails[0])
