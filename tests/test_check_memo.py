"""Identical call sites are checked once per defn: a call's binding (``calls.instantiate``)
is memoised per (callee, argument types) and each obligation is decided once per defn, so a
model chaining one block 32 times pays for one call. The result (typed body, diagnostics with
each call site's own labels, obligation statistics) is exactly what checking every call from
scratch gives."""

from __future__ import annotations

from typing import Any

import pytest

from kinac.check import DefnRef, callsite, infer, oblig
from kinac.check.env import InMemoryEnv
from kinac.rules.codec import encode

CALLEE = """(defn g [(a : (tensor f32 [N K])) (w : (tensor f32 [K K]))] -> (tensor f32 [N K])
  (where (divides 2 K))
  (add a (matmul a w)))
"""


def _chain(n: int, bad: bool = False) -> str:
    params = "(x : (tensor f32 [M K]))" + "".join(
        f" (w{i} : (tensor f32 [{'M' if bad else 'K'} K]))" for i in range(n)
    )
    # bad: each call reads x (a failed call's result would silence the ones after it)
    arg = [("x" if i == 0 or bad else f"h{i - 1}") for i in range(n)]
    lets = " ".join(f"(h{i} (g {arg[i]} w{i}))" for i in range(n))
    return (
        CALLEE
        + f"(defn f [{params}] -> (tensor f32 [M K])\n  (where (divides 2 K))\n"
        + f"  (let [{lets}] h{n - 1}))\n"
    )


class _Forgetful(dict):  # type: ignore[type-arg]
    """A memo that remembers nothing: checking as before the memo."""

    def get(self, key: Any, default: Any = None) -> Any:
        return default


def _check(src: str, memo: bool, monkeypatch: pytest.MonkeyPatch) -> Any:
    if not memo:
        checker_init, prover_init = infer.Checker.__init__, oblig.Prover.__init__

        def no_calls(self: Any, *a: Any) -> None:
            checker_init(self, *a)
            self.instantiated = _Forgetful()

        def no_rels(self: Any, *a: Any, **k: Any) -> None:
            prover_init(self, *a, **k)
            self._decided = _Forgetful()

        monkeypatch.setattr(infer.Checker, "__init__", no_calls)
        monkeypatch.setattr(oblig.Prover, "__init__", no_rels)
    try:
        env = InMemoryEnv.from_sources({"a.kina": src})
        return env.checked(DefnRef("a.kina", "f"))
    finally:
        monkeypatch.undo()


@pytest.mark.parametrize("bad", [False, True])
def test_memoised_check_equals_the_check_of_every_call(
    bad: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    src = _chain(6, bad)
    memo = _check(src, True, monkeypatch)
    plain = _check(src, False, monkeypatch)
    assert encode(memo) == encode(plain)
    if bad:  # each call site is blamed at its own argument
        errs = [d for d in memo.diagnostics if d.is_error]
        assert len(errs) == 6 and len({d.primary.loc.nid for d in errs}) == 6
    else:
        assert memo.ok and memo.stats.total > 6


def test_identical_calls_instantiate_once(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[str] = []
    real = callsite.instantiate

    def counting(*a: Any, **k: Any) -> Any:
        calls.append(a[2])
        return real(*a, **k)

    monkeypatch.setattr(callsite, "instantiate", counting)
    env = InMemoryEnv.from_sources({"a.kina": _chain(8)})
    assert env.checked(DefnRef("a.kina", "f")).ok
    assert calls == ["g"]


LIMIT_TWICE = """(defn small [(x : (tensor f32 [N]))] -> (tensor f32 [N])
  (where (<= N 64))
  (neg x))

(defn f [(x : (tensor f32 [N]))] -> (tensor f32 [N])
  (let [(a (small x)) (b (small x)) (c (small x))] c))
"""


def test_deferred_obligations_are_deferred_at_every_identical_call(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``solver.on_unknown = "runtime-check"``: an undecided obligation of a call is a
    warning (K0502) and a deferred check at each call site, memo or not."""
    from kinac.check.formula import SolveResult

    def checked(memo: bool) -> Any:
        if not memo:
            checker_init = infer.Checker.__init__

            def no_calls(self: Any, *a: Any) -> None:
                checker_init(self, *a)
                self.instantiated = _Forgetful()

            monkeypatch.setattr(infer.Checker, "__init__", no_calls)
        try:
            env = InMemoryEnv.from_sources({"a.kina": LIMIT_TWICE})
            env.on_unknown = "runtime-check"
            env.solve = lambda formula: SolveResult("unknown", reason="budget")  # type: ignore[method-assign]
            return env.checked(DefnRef("a.kina", "f"))
        finally:
            monkeypatch.undo()

    memo, plain = checked(True), checked(False)
    assert encode(memo) == encode(plain)
    assert [d.code for d in memo.diagnostics] == ["K0502"] * 3 and len(memo.deferred) == 3
