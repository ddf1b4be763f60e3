"""Gradients of programs with hand-written ``reshard``s on a mesh (docs/sharding.md,
"Gradients on a mesh"): the forward's written layouts are pinned in the gradient graph as in
the forward, a mesh named only by a ``reshard`` is the gradient's mesh too, and the cotangent
of a reshard is the reverse reshard (pinned to the layout of the forward's operand). Oracle:
the value and every gradient on the threaded simulator against the unsharded gradient."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

import kinac
from kinac import pipeline_grad, pipeline_grad_shard
from kinac.artifacts.sharded import Collective
from kinac.pipeline_support import EntryKey
from kinac.session import Session

SRC = """(mesh tp [{n}])
(defn hand_dp [(x : (tensor f32 [N D])) (w : (tensor f32 [D D]))] -> f32
  (sum (sum (tanh (matmul (reshard x @sharded(axis=0, mesh=tp)) w)) :axis 1) :axis 0))
(defn columns [(x : (tensor f32 [N D])) (w1 : (tensor f32 [D F] @sharded(axis=1, mesh=tp)))
               (w2 : (tensor f32 [F D]))] -> f32
  (sum (sum (tanh (matmul (reshard (matmul x w1) @replicated) w2)) :axis 1) :axis 0))
(defn layer [(h : (tensor f32 [N D])) (w : (tensor f32 [D D]))] -> (tensor f32 [N D])
  (tanh (matmul (reshard h @sharded(axis=0, mesh=tp)) w)))
(defn two [(x : (tensor f32 [N D])) (w1 : (tensor f32 [D D])) (w2 : (tensor f32 [D D]))] -> f32
  (sum (sum (layer (layer x w1) w2) :axis 1) :axis 0))
"""
SHAPES = {"N": 8, "D": 4, "F": 8}
PARAMS = {
    "hand_dp": ("x:ND", "w:DD"),
    "columns": ("x:ND", "w1:DF", "w2:FD"),
    "two": ("x:ND", "w1:DD", "w2:DD"),
}


def _write(tmp_path: Path, n: int) -> Path:
    src = tmp_path / "m.kina"
    src.write_text(SRC.format(n=n))
    return src


def _args(name: str) -> tuple[list[str], list[np.ndarray]]:
    rng = np.random.default_rng(7)
    names, arrays = [], []
    for p in PARAMS[name]:
        pname, dims = p.split(":")
        names.append(pname)
        arrays.append(rng.uniform(-1, 1, tuple(SHAPES[d] for d in dims)).astype(np.float32))
    return names, arrays


def _oracle(src: Path, name: str) -> Any:
    """Every gradient on the simulated mesh equals the unsharded one; the sharded callable."""
    wrt, args = _args(name)
    fn = kinac.value_and_grad(src, name, wrt=wrt, mesh="", no_cache=True)
    value, grads = fn(*args)
    want, want_grads = kinac.value_and_grad(src, name, wrt=wrt, no_cache=True)(*args)
    np.testing.assert_allclose(value, want, rtol=1e-5, atol=1e-5)
    for w in wrt:
        np.testing.assert_allclose(grads[w], want_grads[w], rtol=1e-5, atol=1e-5, err_msg=w)
    return fn


def _plan(src: Path, name: str) -> tuple[Any, Any]:
    wrt, _ = _args(name)
    dims = tuple(sorted((k, v) for k, v in SHAPES.items() if name == "columns" or k != "F"))
    key = (EntryKey(src.name, name, dims, (), "cpu"), tuple(wrt))
    db = Session(src.parent, no_cache=True).db
    graph = pipeline_grad.grad_graph(db, key).graph
    gp = pipeline_grad_shard.grad_shard_propagate(db, key)
    assert graph is not None and gp is not None
    return gp.graph or graph, gp.plan


def _reverse(graph: Any) -> list[int]:
    return [i for i, n in enumerate(graph.nodes) if n.op == "reshard" and n.attr("cotangent")]


@pytest.mark.parametrize("n", [2, 4])
def test_a_mesh_named_only_by_a_reshard_shards_the_gradient(tmp_path: Path, n: int) -> None:
    """Data parallelism written as one ``reshard``: the gradient runs on its mesh (it used to
    find no mesh: a usage error), the batch split as written, both weight and loss partial
    sums all-reduced, and ``x``'s cotangent brought back to ``x``'s layout by the reverse."""
    src = _write(tmp_path, n)
    fn = _oracle(src, "hand_dp")
    assert fn.last_program.mesh.shape == (n,)
    steps = [(s.kind, s.axis) for s in fn.last_program.steps if isinstance(s, Collective)]
    assert steps.count(("all-reduce", "tp")) == 2  # the loss and dw
    graph, plan = _plan(src, "hand_dp")
    fwd = [i for i, nd in enumerate(graph.nodes) if nd.op == "reshard" and not nd.attr("cotangent")]
    (rev,) = _reverse(graph)
    assert plan.layouts[fwd[0]].dims == (("tp",), ())  # the written layout, pinned
    x_layout = plan.layouts[graph.nodes[fwd[0]].args[0]].dims
    assert plan.layouts[rev].dims == x_layout  # the reverse: back to the operand's layout


def test_the_cotangent_of_a_gather_is_computed_split(tmp_path: Path) -> None:
    """Column-parallel ``x @ w1`` gathered by a written ``reshard``: the reverse reshard keeps
    its cotangent split on columns as ``x @ w1`` was, so the backward of that matmul runs
    column-parallel (dw1 local, dx one all-reduce) and w1 is never gathered."""
    src = _write(tmp_path, 2)
    fn = _oracle(src, "columns")
    steps = [(s.kind, s.reason) for s in fn.last_program.steps if isinstance(s, Collective)]
    assert [k for k, _ in steps].count("all-gather") == 1  # the forward's, written
    assert not any("w1" in r for _, r in steps)
    graph, plan = _plan(src, "columns")
    (rev,) = _reverse(graph)
    assert plan.layouts[rev].dims == ((), ("tp",))
    (back,) = [c for c in plan.collectives if c.consumer == rev]
    assert (back.kind, back.reason) == (
        "slice",
        "the cotangent of `reshard`, back to its operand's layout",
    )


def test_a_reshard_reached_twice_with_two_layouts(tmp_path: Path) -> None:
    """One written ``reshard`` in a layer called twice, whose operands have two layouts (``x``
    whole, then the first layer's row-split output): its reverses are left to propagation,
    and the gradient is still the unsharded one."""
    src = _write(tmp_path, 2)
    _oracle(src, "two")
    graph, plan = _plan(src, "two")
    assert len(_reverse(graph)) == 2
