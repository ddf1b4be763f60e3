"""The solver's outcome is a function of the formula and ``solver.budget_ms`` only.

Why: solve results are memoised in the content-addressed store, so an outcome that depended on
the machine's load (z3's wall-clock timeout) could differ between two machines and be served
stale from the cache. The budget is z3's deterministic resource counter; the wall clock is only
a safety net whose expiry is reported and never stored (docs/language.md, "Solver budget")."""

from __future__ import annotations

import itertools
import multiprocessing
import time
from pathlib import Path
from typing import Any

import pytest

from kinac.check import dims as D
from kinac.check import solver
from kinac.check.formula import Rel, SolveResult, make_formula
from kinac.cli import main
from kinac.rules import Database, input_query, query
from kinac.rules.store import Store

A, B, C, H, Dh = (D.var(n) for n in ("A", "B", "C", "H", "Dh"))
NONLINEAR = (Rel("eq", A, D.const(1)), [Rel("eq", D.mul(A, A), D.mul(D.const(2), B, B))])
CASES = [
    (Rel("eq", D.mul(H, Dh), D.var("D")), []),  # refuted, minimised
    (Rel("dvd", H, D.var("D")), [Rel("eq", D.var("D"), D.mul(H, Dh))]),  # proved
    (Rel("le", D.add(A, B), D.mul(A, B, C)), [Rel("le", D.const(2), A)]),  # refuted, nonlinear
    (Rel("eq", D.mul(A, B), D.mul(B, C)), [Rel("le", A, D.add(C, D.const(3)))]),
]


def _solve_all(budget_ms: int = 2000) -> list[SolveResult]:
    out = []
    for goal, hyps in CASES:
        out.append(solver.solve_formula(make_formula(goal, hyps)[0], budget_ms))
    out.append(solver.solve_formula(make_formula(*NONLINEAR)[0], 20))
    return out


def _burn(stop: float, done: Any) -> None:
    while time.monotonic() < stop and not done.is_set():
        pass


def test_outcomes_and_models_repeat_and_ignore_load() -> None:
    first = _solve_all()
    assert [r.status for r in first] == ["refuted", "proved", "refuted", "refuted", "unknown"]
    assert first[-1].reason == "the solver ran out of its 20 ms budget"
    assert not any(solver.by_safety_net(r) for r in first)
    assert _solve_all() == first
    # CPU-starved: busy processes on every core while the same formulas are solved again
    ctx = multiprocessing.get_context("fork")
    done = ctx.Event()
    hogs = [ctx.Process(target=_burn, args=(time.monotonic() + 5.0, done)) for _ in range(3)]
    for p in hogs:
        p.start()
    try:
        starved = _solve_all()
    finally:
        done.set()
        for p in hogs:
            p.join()
    assert starved == first


def test_counterexample_ignores_a_starved_clock(monkeypatch: pytest.MonkeyPatch) -> None:
    """A process starved of CPU sees 10 s pass between two reads of the clock; the wall-clock
    budget (before this change) then skipped the minimisation and showed d0=4, d1=10, d2=16."""
    f = make_formula(*CASES[0])[0]
    calm = solver.solve_formula(f, 2000)
    ticks = itertools.count()
    real = time.monotonic
    monkeypatch.setattr(time, "monotonic", lambda: real() + 10.0 * next(ticks))
    starved = solver.solve_formula(f, 2000)
    monkeypatch.undo()
    assert starved == calm and sum(v for _, v in calm.model) == 4


def test_budget_maps_to_resource_units() -> None:
    assert solver.budget_units(2000) == 2000 * solver.RLIMIT_PER_MS
    assert solver.budget_units(1) == solver.RLIMIT_PER_MS
    assert solver.safety_net_ms(2000) > 2000 * 5  # a safety net, not the budget
    # a formula a larger budget cannot decide either is "unknown" for the budget, not the clock
    r = solver.solve_formula(make_formula(*NONLINEAR)[0], 60)
    assert r.status == "unknown" and r.reason == "the solver ran out of its 60 ms budget"


def test_wall_clock_expiry_is_flagged_and_the_model_stays_deterministic(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(solver, "safety_net_ms", lambda budget_ms: 1)
    r = solver.solve_formula(make_formula(*NONLINEAR)[0], 2000)
    assert r.status == "unknown" and solver.by_safety_net(r)
    assert "not cached" in r.reason and "2000 ms budget" in r.reason
    # a refuted obligation whose minimisation the clock cuts short shows the first model,
    # itself decided within the budget; never partial, load-dependent progress
    f = make_formula(*CASES[0])[0]
    r = solver.solve_formula(f, 2000)
    monkeypatch.undo()
    if r.status == "refuted":
        assert r.model in {solver.solve_formula(f, 2000).model, _unminimised(f)}
    else:
        assert r.status == "unknown" and solver.by_safety_net(r)


def _unminimised(f: object) -> tuple[tuple[str, int], ...]:
    saved = solver._minimise
    try:
        solver._minimise = lambda z3, ctx, tr, cs, model, budget: model  # type: ignore[assignment]
        return solver.solve_formula(f, 2000).model  # type: ignore[arg-type]
    finally:
        solver._minimise = saved  # type: ignore[assignment]


NONLINEAR_KINA = """(defn f [(x : (tensor f32 [A])) (y : (tensor f32 [B]))] -> (tensor f32 [1])
  (where (= (* A A) (* 2 B B)))
  (the (tensor f32 [1]) x))
"""


def test_budget_diagnostic_and_safety_net_results_are_not_cached(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "kina.toml").write_text('[workspace]\nname = "w"\n[solver]\nbudget_ms = 20\n')
    (ws / "f.kina").write_text(NONLINEAR_KINA)
    cache = str(tmp_path / "cache")
    monkeypatch.setattr(solver, "safety_net_ms", lambda budget_ms: 1)
    rc = main(["check", str(ws), "--cache-dir", cache])
    err = capsys.readouterr()
    assert rc != 0 and "K0501" in err.out + err.err and solver.SAFETY_NET in err.out + err.err
    monkeypatch.undo()
    for _ in range(2):  # the safety-net outcome was not stored: the budget decides now
        rc = main(["check", str(ws), "--cache-dir", cache])
        out = capsys.readouterr()
        text = out.out + out.err
        assert rc != 0 and "K0501" in text and "Traceback" not in text
        assert "the solver ran out of its 20 ms budget" in text and solver.SAFETY_NET not in text


CALLS: list[str] = []


@input_query("test_solver_budget.text")
def _text(db: Database, name: str) -> str:
    return name.upper()


@query("test_solver_budget.flaky")
def _flaky(db: Database, name: str) -> str:
    CALLS.append("flaky")
    if name.startswith("v"):
        db.volatile()  # as the solve query does when the wall-clock safety net fired
    return _text(db, name) + "!"


@query("test_solver_budget.reader")
def _reader(db: Database, name: str) -> str:
    CALLS.append("reader")
    return _flaky(db, name) + "?"


def test_volatile_results_are_never_stored(tmp_path: Path) -> None:
    CALLS.clear()
    with Database(Store(tmp_path)) as db:
        assert db.get(_reader, "v") == "V!?" and db.get(_reader, "s") == "S!?"
        assert db.get(_reader, "v") == "V!?" and len(CALLS) == 4  # memoised within a revision
        db.commit()
        db.invalidate()
        CALLS.clear()
        db.get(_reader, "v")
        db.get(_reader, "s")
        assert CALLS == ["reader", "flaky"]  # the volatile one re-ran, and so did its reader
    CALLS.clear()
    with Database(Store(tmp_path)) as db2:  # a new process: nothing volatile was stored
        assert db2.get(_reader, "v") == "V!?" and db2.get(_reader, "s") == "S!?"
        assert CALLS == ["reader", "flaky"]
