"""Property tests: random well-typed programs never fail a concrete shape evaluation (nor their
graph, run with numpy); random ill-typed ones that are rejected with a counterexample really
fail at it, at the node the diagnostic points at."""

from __future__ import annotations

import itertools
import random
import re

import numpy as np
from check_gen import Gen, mutate
from check_support import Workspace, run_graph
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kinac.check import DefnRef, specialise
from kinac.check.concrete import eval_all, eval_defn
from kinac.check.formula import holds
from kinac.check.sig import analyse
from kinac.diag.model import Diagnostic, NodeRef

_CACHE: dict = {}
SETTINGS = settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _check(text: str):
    ws = Workspace({"p.kina": text}, solve_cache=_CACHE)
    ref = DefnRef("p.kina", "f")
    return ws, ref, ws.env.checked(ref)


def _dims(sig, rng: random.Random) -> dict[str, int]:
    env = {v: rng.randint(1, 5) for v in sig.dim_vars}
    if "P" in env:
        env["P"] = env.get("A", 1) * env.get("B", 1)
    return env


@SETTINGS
@given(seed=st.integers(0, 2**31 - 1), steps=st.integers(1, 7))
def test_well_typed_programs_never_fail_concretely(seed: int, steps: int) -> None:
    prog = Gen(seed).run(steps)
    ws, ref, c = _check(prog.text)
    assert c.ok, prog.text + "\n" + ws.render(c.diagnostics)
    defn = ws.env.defn(ref)
    rng = random.Random(seed)
    for k in range(4):
        env = _dims(c.sig, rng)
        assert all(holds(r, env) for r in c.sig.assumptions)
        out = eval_defn("p.kina", defn, env, {}, ws.env)
        if k == 0:
            sp = specialise(ref, env, {}, ws.env)
            assert sp.diagnostics == (), sp.diagnostics
            g = sp.graph
            args = [np.ones(t.shape, np.float32) * 0.5 for _, t in g.params]  # type: ignore[union-attr]
            res = run_graph(g, args)  # type: ignore[arg-type]
            assert res.shape == out.shape


def _complete(sig, fixed: dict[str, int]) -> dict[str, int] | None:
    free = [v for v in sig.dim_vars if v not in fixed]
    for combo in itertools.product(range(1, 7), repeat=len(free)):
        env = dict(fixed)
        env.update(zip(free, combo, strict=True))
        if all(holds(r, env) for r in sig.assumptions):
            return env
    return None


# Errors that need no counterexample: a dim variable the mutation took out of every parameter
# type, still used in the result type (K0301), a type in the body (K0302) or as a value (K0202).
SCOPE_CODES = {"K0301", "K0302", "K0202"}


def _param_vars(text: str) -> set[str]:
    """The dim variables the parameters determine, read from the text (not the checker): those
    their types mention, and the third of ``P = A*B`` when two of them are known."""
    head = text.partition("->")[0].partition("(defn f")[2]
    known = set(re.findall(r"\b[A-Z]\b", head))
    if "(where (= P (* A B)))" in text and len(known & {"P", "A", "B"}) >= 2:
        known |= {"P", "A", "B"}
    return known


def _assert_out_of_scope(text: str, d: Diagnostic) -> None:
    """A rejection without a counterexample must be a scope error that is true of the text."""
    assert d.code in SCOPE_CODES, (text, "rejected without a counterexample", d.code, d.message)
    names = re.findall(r"`([A-Z])`", d.message)
    assert names, (text, d.message)
    assert names[0] not in _param_vars(text), (text, d.message, "but a parameter binds it")


def _draw_dims(sig, rng: random.Random) -> dict[str, int] | None:
    """Random dims 1..5 completed to meet the assumptions (``P = A*B`` computed, not searched)."""
    env = {v: rng.randint(1, 5) for v in sig.dim_vars if v != "P"}
    if "P" in sig.dim_vars:
        env["P"] = env.get("A", 1) * env.get("B", 1)
    return env if all(holds(r, env) for r in sig.assumptions) else _complete(sig, env)


@SETTINGS
@given(seed=st.integers(0, 2**31 - 1), steps=st.integers(1, 6), mseed=st.integers(0, 99))
def test_mutated_programs_sound_and_counterexamples_valid(
    seed: int, steps: int, mseed: int
) -> None:
    """A mutation (one dim variable of a parameter swapped) is either accepted, and then the
    program runs at every dims drawn, or rejected with a counterexample at which it fails, at
    the node the diagnostic points at. Nothing passes unchecked: an accepted program with no
    dims to run it at, or a rejection without a counterexample, fails the test."""
    text = mutate(Gen(seed).run(steps).text, mseed)
    ws, ref, c = _check(text)
    defn = ws.env.defn(ref)
    sig = analyse("p.kina", defn.signature)
    used = set(re.findall(r"\b[A-Z]\b", text.partition("(defn f")[2])) - {"P"}
    if used - _param_vars(text):  # a dim no parameter binds is used: must be rejected
        assert not c.ok, (text, "accepts dims no parameter binds", used - _param_vars(text))
    if c.ok:
        rng = random.Random(seed)
        envs = [env for env in (_draw_dims(sig, rng) for _ in range(4)) if env is not None]
        assert envs, (text, "accepted, but no dims meet its assumptions: nothing was run")
        for env in envs:
            eval_defn("p.kina", defn, env, {}, ws.env)
        return
    errors = [d for d in c.diagnostics if d.is_error]
    assert errors, (text, c.diagnostics)
    for d in errors:
        if d.counterexample is None:
            _assert_out_of_scope(text, d)
            continue
        env = _complete(sig, dict(d.counterexample))  # type: ignore[assignment]
        assert env is not None, (text, d.counterexample)
        _out, fails = eval_all("p.kina", defn, env, {}, ws.env)
        loc = d.primary.loc
        assert isinstance(loc, NodeRef)
        assert any(loc.nid in f.nids for f in fails), (
            text,
            d.message,
            env,
            [(str(f), f.nids) for f in fails],
        )
