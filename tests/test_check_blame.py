"""A call whose arguments disagree on a callee's dim blames the arguments that disagree with
the majority (ties: the first binding wins), as the Python API and ``kinac run`` do
(``kinac.call_shapes``), with a second label on the argument that fixed the dim. It blamed
every argument after the first that disagreed: one wrong first argument blamed all the right
ones."""

from __future__ import annotations

from kinac.check import DefnRef
from kinac.check.env import InMemoryEnv
from kinac.diag.model import NodeRef

CALLEE = """(defn g [(a : (tensor f32 [N])) (b : (tensor f32 [N])) (c : (tensor f32 [N]))]
  -> (tensor f32 [N])
  (add a (add b c)))
"""


def _blamed(
    call: str, params: str = "(x : (tensor f32 [M])) (y : (tensor f32 [K]))", where: str = ""
) -> list:  # type: ignore[type-arg]
    src = CALLEE + f"(defn f [{params}] -> (tensor f32 [K])\n  {where}\n  {call})\n"
    env = InMemoryEnv.from_sources({"a.kina": src})
    c = env.checked(DefnRef("a.kina", "f"))
    pf = env.file("a.kina")
    assert pf is not None
    f = next(d for d in pf.defns if d.name == "f")
    names = {}  # nid -> the argument's text

    def walk(e: object) -> None:
        for a in getattr(e, "args", ()):
            if hasattr(a, "name"):
                names[a.nid] = a.name
            walk(a)

    walk(f.body)
    out = []
    for d in c.diagnostics:
        assert d.code == "K0408", d
        assert isinstance(d.primary.loc, NodeRef)
        fixed = [
            (names.get(s.loc.nid), s.message)
            for s in d.secondary
            if isinstance(s.loc, NodeRef) and s.loc.defn == "f"
        ]
        out.append((names.get(d.primary.loc.nid), fixed))
    return out


def test_the_one_argument_against_the_majority_is_blamed() -> None:
    assert _blamed("(g x y y)") == [("x", [("y", "fixes `N` as K")])]


def test_a_wrong_first_argument_no_longer_blames_the_right_ones() -> None:
    # x says N = M, y and z say N = K: only x is wrong (it blamed y and z)
    got = _blamed(
        "(g x y z)", "(x : (tensor f32 [M])) (y : (tensor f32 [K])) (z : (tensor f32 [K]))"
    )
    assert got == [("x", [("y", "fixes `N` as K")])]


def test_a_tie_goes_to_the_first_binding() -> None:
    got = _blamed(
        "(g x y z)", "(x : (tensor f32 [M])) (y : (tensor f32 [K])) (z : (tensor f32 [L]))"
    )
    assert got == [("y", [("x", "fixes `N` as M")]), ("z", [("x", "fixes `N` as M")])]


def test_arguments_equal_under_the_where_clause_vote_together() -> None:
    got = _blamed(
        "(g x y z)",
        "(x : (tensor f32 [M])) (y : (tensor f32 [K])) (z : (tensor f32 [L]))",
        "(where (= L K))",
    )
    assert got == [("x", [("y", "fixes `N` as K")])]
