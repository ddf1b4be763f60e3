"""solver.on_unknown = "runtime-check": an undecided obligation becomes a warning (K0502) and is
checked at concrete dims when the defn is specialised (K0804 when it fails)."""

from __future__ import annotations

from kinac.check import DefnRef, SolveResult, specialise
from kinac.check.env import InMemoryEnv

SRC = """(defn take [(x : (tensor f32 [N])) (K : dim)] -> (tensor f32 [K])
  (slice x :axis 0 :start 0 :stop K))
"""


def _env(policy: str) -> InMemoryEnv:
    env = InMemoryEnv.from_sources({"a.kina": SRC})
    env.on_unknown = policy
    env.solve = lambda formula: SolveResult("unknown", reason="budget exhausted")  # type: ignore[method-assign]
    return env


def test_unknown_is_an_error_by_default() -> None:
    (checked,) = _env("error").check_file("a.kina")
    assert [d.code for d in checked.diagnostics] == ["K0501"] and not checked.ok


def test_runtime_check_defers_to_specialisation() -> None:
    env = _env("runtime-check")
    (checked,) = env.check_file("a.kina")
    assert [(d.code, d.severity) for d in checked.diagnostics] == [("K0502", "warning")]
    assert checked.ok
    good = specialise(DefnRef("a.kina", "take"), {"N": 8, "K": 3}, {}, env)
    assert good.graph is not None and good.graph.nodes[-1].type.shape == (3,)
    bad = specialise(DefnRef("a.kina", "take"), {"N": 4, "K": 8}, {}, env)
    assert bad.graph is None
    assert [d.code for d in bad.diagnostics] == ["K0804"]
    assert "K = 8 exceeds N = 4" in bad.diagnostics[0].message
