"""A ``@sharded`` axis that falls in a callee's variadic group has no name to assume or prove,
so the checker cannot judge it at a call that passes a group through; specialisation judges it
at the dims the call computes (K0802 at the call, as at an entry). It built the graph
silently."""

from __future__ import annotations

from kinac.check import DefnRef, specialise
from kinac.check.env import InMemoryEnv

SRC = """(mesh tp [2])
(defn g [(x : (tensor f32 [..b D] @sharded(axis=0, mesh=tp)))] -> (tensor f32 [..b D]) x)
(defn f [(x : (tensor f32 [..b D]))] -> (tensor f32 [..b D]) (g x))
"""


def test_a_group_axis_sharded_by_the_callee_is_checked_at_the_call() -> None:
    env = InMemoryEnv.from_sources({"a.kina": SRC})
    assert all(c.ok for c in env.check_file("a.kina"))
    ok = specialise(DefnRef("a.kina", "f"), {"..b": (4,), "D": 3}, {}, env)
    assert ok.graph is not None, ok.diagnostics
    bad = specialise(DefnRef("a.kina", "f"), {"..b": (3,), "D": 4}, {}, env)
    assert bad.graph is None
    (d,) = bad.diagnostics
    assert d.code == "K0802" and d.primary.loc.defn == "f"  # type: ignore[union-attr]
    assert "2 does not divide 3" in d.message and "mesh `tp`" in d.message
