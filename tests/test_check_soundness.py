"""Property tests: random well-typed programs never fail a concrete shape evaluation (nor their
graph, run with numpy); random ill-typed ones that are rejected with a counterexample really
fail at it, at the node the diagnostic points at."""

from __future__ import annotations

import itertools
import random

import numpy as np
from check_gen import Gen, mutate
from check_support import Workspace, run_graph
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kinac.check import DefnRef, specialise
from kinac.check.concrete import eval_all, eval_defn
from kinac.check.formula import holds
from kinac.check.sig import analyse
from kinac.diag.model import NodeRef

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
            args = [np.ones(t.shape, np.float32) * 0.5 for _, t in g.params]
            res = run_graph(g, args)
            assert res.shape == out.shape


def _complete(sig, fixed: dict[str, int]) -> dict[str, int] | None:
    free = [v for v in sig.dim_vars if v not in fixed]
    for combo in itertools.product(range(1, 7), repeat=len(free)):
        env = dict(fixed)
        env.update(zip(free, combo, strict=True))
        if all(holds(r, env) for r in sig.assumptions):
            return env
    return None


@SETTINGS
@given(seed=st.integers(0, 2**31 - 1), steps=st.integers(1, 6), mseed=st.integers(0, 99))
def test_mutated_programs_sound_and_counterexamples_valid(
    seed: int, steps: int, mseed: int
) -> None:
    text = mutate(Gen(seed).run(steps).text, mseed)
    ws, ref, c = _check(text)
    defn = ws.env.defn(ref)
    sig = analyse("p.kina", defn.signature)
    if c.ok:
        rng = random.Random(seed)
        for _ in range(4):
            env = _complete(sig, {v: rng.randint(1, 5) for v in sig.dim_vars if v != "P"})
            if env is not None:
                eval_defn("p.kina", defn, env, {}, ws.env)
        return
    for d in c.diagnostics:
        if d.counterexample is None:
            continue
        env = _complete(sig, dict(d.counterexample))
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
