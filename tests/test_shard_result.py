"""Declared result layouts (``-> (tensor … @sharded …)``, docs/sharding.md "Result layouts"):
the entry returns the layout its result type declares, reached by collectives planned at the
end (consumer ``-1``, caused by the result's annotation), an unannotated body is planned
toward it, a declared ``@partial(sum)`` keeps the partial sum, and an unreachable declaration is
K0708. Each program runs on every rank (lockstep and the threaded simulator) against the
unsharded graph; partial inputs carry unequal shares."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from shard_support import run_lockstep, run_simulated, shard

import kinac
from kinac import pipeline, pipeline_shard
from kinac.artifacts.sharded import Collective
from kinac.pipeline_support import EntryKey
from kinac.rt.comm.layout import assemble  # sums a partial output's shares
from kinac.session import Session
from kinac.tir.interp import evaluate

SRC = """(mesh tp [{n}])
(defn rows_whole [(x : (tensor f32 [N D] @sharded(axis=0, mesh=tp))) (w : (tensor f32 [D D]))]
  -> (tensor f32 [N D] @replicated(mesh=tp))
  (exp (matmul x w)))
(defn rows_to_cols [(x : (tensor f32 [N D] @sharded(axis=0, mesh=tp)))]
  -> (tensor f32 [N D] @sharded(axis=1, mesh=tp)) (where (divides {n} D))
  (exp x))
(defn open_rows [(x : (tensor f32 [N D])) (w : (tensor f32 [D D]))]
  -> (tensor f32 [N D] @sharded(axis=0, mesh=tp)) (where (divides {n} N))
  (tanh (matmul x w)))
(defn kept_partial [(x : (tensor f32 [N D] @sharded(axis=1, mesh=tp)))
                    (w : (tensor f32 [D D] @sharded(axis=0, mesh=tp)))]
  -> (tensor f32 [N D] @partial(sum, mesh=tp))
  (matmul x w))
(defn partial_scattered [(x : (tensor f32 [N D] @sharded(axis=1, mesh=tp)))
                         (w : (tensor f32 [D D] @sharded(axis=0, mesh=tp)))]
  -> (tensor f32 [N D] @sharded(axis=0, mesh=tp)) (where (divides {n} N))
  (matmul x w))
(defn same_param [(x : (tensor f32 [N D] @sharded(axis=0, mesh=tp)))]
  -> (tensor f32 [N D] @replicated(mesh=tp))
  x)
"""
DIMS = (("D", 8), ("N", 8))


def _db(tmp_path: Path, n: int) -> Any:
    (tmp_path / "kina.toml").write_text('[workspace]\nname = "r"\nsources = ["*.kina"]\n')
    (tmp_path / "a.kina").write_text(SRC.format(n=n))
    return Session(tmp_path, no_cache=True).db


def _run(db: Any, defn: str, seed: int = 0) -> tuple[Any, Any]:
    """The entry's program on every rank against the unsharded graph; (program, plan)."""
    key = EntryKey("a.kina", defn, DIMS, (), "cpu")
    graph = pipeline.entry_graph(db, key).graph
    plan = pipeline.shard_propagate(db, key)
    prog = pipeline_shard.device_program(db, key)
    assert graph is not None and prog is not None, plan
    rng = np.random.default_rng(seed)
    glob = [rng.uniform(-1, 1, t.shape).astype(np.float32) for _, t in graph.params]
    want = evaluate(graph, *glob)[0]
    per = [shard(a, lay, prog.mesh, rng) for a, (_, _, lay) in zip(glob, prog.params, strict=True)]
    local = [[p[r] for p in per] for r in range(prog.mesh.size)]
    segs = [lambda *a, s=s: evaluate(s, *a) for s in prog.segments]
    for runner in (run_lockstep, run_simulated):
        outs = runner(prog, segs, local)
        got = assemble([o[0] for o in outs], prog.outputs[0][2], prog.mesh, check=True)
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    return prog, plan


def _steps(prog: Any) -> list[tuple[str, str]]:
    return [(s.kind, s.axis) for s in prog.steps if isinstance(s, Collective)]


@pytest.mark.parametrize("n", [2, 4])
def test_declared_layouts_are_returned(tmp_path: Path, n: int) -> None:
    db = _db(tmp_path, n)
    prog, plan = _run(db, "rows_whole")  # computed on rows, gathered at the end
    assert prog.outputs[0][2].dims == ((), ()) and _steps(prog) == [("all-gather", "tp")]
    end = [c for c in plan.collectives if c.consumer == -1]
    assert [(c.kind, c.reason) for c in end] == [
        ("all-gather", "the entry returns its declared result layout")
    ]
    prog, plan = _run(db, "rows_to_cols")  # rows to columns: one all-to-all, at the end
    assert prog.outputs[0][2].dims == ((), ("tp",)) and _steps(prog) == [("all-to-all", "tp")]
    prog, _ = _run(db, "same_param")  # the parameter itself, gathered
    assert prog.outputs[0][2].dims == ((), ()) and _steps(prog) == [("all-gather", "tp")]


@pytest.mark.parametrize("n", [2, 4])
def test_an_open_body_is_planned_toward_the_result(tmp_path: Path, n: int) -> None:
    """No parameter annotated: the result's annotation names the mesh and its split flows back
    (x split on rows, no traffic); it used to be planned on no mesh at all."""
    prog, plan = _run(_db(tmp_path, n), "open_rows")
    assert plan.mesh == "tp" and _steps(prog) == []
    assert prog.params[0][2].dims == (("tp",), ()) and prog.outputs[0][2].dims == (("tp",), ())


@pytest.mark.parametrize("n", [2, 4])
def test_a_partial_result(tmp_path: Path, n: int) -> None:
    """``@partial(sum)`` returns each device's share unreduced (no all-reduce); a split result
    of a partial sum is one reduce-scatter (not an all-reduce then a slice)."""
    db = _db(tmp_path, n)
    prog, _ = _run(db, "kept_partial")
    assert _steps(prog) == [] and prog.outputs[0][2].partial == ("tp",)
    prog, _ = _run(db, "partial_scattered")
    assert _steps(prog) == [("reduce-scatter", "tp")]


def test_a_split_a_resized_mesh_does_not_divide_is_k0708(tmp_path: Path) -> None:
    """The checker proves the declared split for every dim (K0413); a mesh resized by
    ``--simulate N`` / ``mesh=N`` is checked at the concrete dims."""
    (tmp_path / "kina.toml").write_text('[workspace]\nname = "r"\nsources = ["*.kina"]\n')
    (tmp_path / "a.kina").write_text(
        "(mesh tp [2])\n(defn f [(x : (tensor f32 [N D]))]\n"
        "  -> (tensor f32 [N D] @sharded(axis=0, mesh=tp)) (where (divides 2 N))\n  (exp x))\n"
    )
    fn = kinac.compile(tmp_path, "f", mesh=3, no_cache=True)
    with pytest.raises(kinac.KinaCompileError) as e:
        fn(np.zeros((4, 2), np.float32))
    assert (
        "error[K0708]: the declared result of `f` splits dim 0 over `tp` (3 devices), which "
        "does not divide it at these dims: the result is f32[4 2] (dim 0 = 4)"
    ) in str(e.value)
    got = kinac.compile(tmp_path, "f", mesh=2, no_cache=True)(np.ones((4, 2), np.float32))
    np.testing.assert_allclose(got, np.exp(np.ones((4, 2), np.float32)))
