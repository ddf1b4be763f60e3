"""Deep programs: a chain of 1,500 calls and 1,500 chained lets check in linear time without
recursion (the recursion check walked every defn's callees again: 13 s for 1,500 calls)."""

from __future__ import annotations

from kinac.check import DefnRef, find_recursion
from kinac.check.env import InMemoryEnv
from kinac.check.module import recursion_of

DEPTH = 1500
PARAM = "[(x : (tensor f32 [N]))] -> (tensor f32 [N])"


def _chain(n: int, close_cycle: bool = False) -> str:
    lines = [f"(defn f0 {PARAM} {'(f' + str(n - 1) + ' x)' if close_cycle else '(neg x)'})"]
    lines += [f"(defn f{i} {PARAM} (f{i - 1} x))" for i in range(1, n)]
    return "\n".join(lines) + "\n"


def test_a_chain_of_1500_calls_checks_and_has_no_recursion() -> None:
    env = InMemoryEnv.from_sources({"p.kina": _chain(DEPTH)})
    checked = env.check_file("p.kina")
    assert len(checked) == DEPTH and all(c.ok for c in checked)
    assert recursion_of([c.ref for c in checked], env) == {}
    assert find_recursion(DefnRef("p.kina", f"f{DEPTH - 1}"), env) is None


def test_a_long_cycle_is_k0204_for_every_member_with_a_short_message() -> None:
    n = 300
    env = InMemoryEnv.from_sources({"p.kina": _chain(n, close_cycle=True)})
    refs = [DefnRef("p.kina", f"f{i}") for i in range(n)]
    found = recursion_of(refs, env)
    assert set(found) == set(refs)
    d = found[refs[3]]
    assert d.code == "K0204"
    want = f"`f3` is recursive: f3 -> f2 -> f1 -> f0 -> … ({n} calls) … -> f6 -> f5 -> f4 -> f3"
    assert d.message == want
    assert len(d.secondary) == 8


def test_1500_chained_lets_check() -> None:
    binds = " ".join(f"(a{i} (neg a{i - 1}))" for i in range(1, DEPTH))
    src = f"(defn g {PARAM} (let [(a0 x) {binds}] a{DEPTH - 1}))\n"
    env = InMemoryEnv.from_sources({"p.kina": src})
    (c,) = env.check_file("p.kina")
    assert c.ok and c.diagnostics == ()


def test_specialising_a_chain_of_1500_calls_inlines_without_recursion() -> None:
    from kinac.check import specialise

    env = InMemoryEnv.from_sources({"p.kina": _chain(DEPTH)})
    spec = specialise(DefnRef("p.kina", f"f{DEPTH - 1}"), {"N": 3}, {}, env)
    assert spec.diagnostics == () and spec.graph is not None
    assert [n.op for n in spec.graph.nodes] == ["param", "neg"]
