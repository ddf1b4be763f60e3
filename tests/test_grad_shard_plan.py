"""The gradient's sharding stage itself: ``grad_shard_propagate`` / ``grad_device_program``
as queries, and the two small additions to ``kinac.shard`` it needs (soft pins on outputs,
outputs returned in their own layouts)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

import kinac
from kinac import pipeline_grad, pipeline_grad_shard
from kinac.pipeline_support import EntryKey
from kinac.session import Session

SHARED_ZEROS = """(module m)
(mesh m [2])
(defn f [(x : (tensor f32 [4 8] @sharded(axis=0, mesh=m)))
         (a : (tensor f32 [4 8] @sharded(axis=1, mesh=m)))
         (b : (tensor f32 [4 8] @sharded(axis=0, mesh=m)))] -> f32
  (sum (reshape (mul x x) [32]) :axis 0))
"""


def test_one_gradient_node_returned_in_two_layouts(tmp_path: Path) -> None:
    """``a`` and ``b`` do not reach the loss: their gradients are one hash-consed zeros node,
    which must come back split on dim 1 for ``a`` and on dim 0 for ``b``."""
    src = tmp_path / "m.kina"
    src.write_text(SHARED_ZEROS)
    rng = np.random.default_rng(3)
    x, a, b = (rng.standard_normal((4, 8)).astype(np.float32) for _ in range(3))
    fn = kinac.value_and_grad(src, "f", wrt=["a", "b", "x"], mesh="", no_cache=True)
    value, grads = fn(x, a, b)
    np.testing.assert_allclose(value, np.sum(x * x, dtype=np.float64), rtol=1e-6)
    np.testing.assert_array_equal(grads["a"], np.zeros_like(a))
    np.testing.assert_array_equal(grads["b"], np.zeros_like(b))
    np.testing.assert_allclose(grads["x"], 2 * x, rtol=1e-6)
    lays = [lay.dims for _, _, lay in fn.last_program.outputs]
    assert lays == [(), ((), ("m",)), (("m",), ()), (("m",), ())]
    key = EntryKey("m.kina", "f", (), (), "cpu")
    db = Session(tmp_path, no_cache=True).db
    gp = pipeline_grad_shard.grad_shard_propagate(db, (key, ("a", "b", "x")))
    assert gp is not None and not [d for d in gp.plan.diagnostics if d.is_error]
    graph = pipeline_grad.grad_graph(db, (key, ("a", "b", "x"))).graph
    assert graph is not None and graph.outputs[1] == graph.outputs[2]  # one node, two layouts
    assert gp.outputs[1:] == (((), ("m",)), (("m",), ()), (("m",), ()))


def test_queries(tmp_path: Path) -> None:
    """The program is a query value (the API runs exactly it); an unannotated loss has none."""
    src = tmp_path / "m.kina"
    src.write_text(SHARED_ZEROS)
    db = Session(tmp_path, no_cache=True).db
    key = (EntryKey("m.kina", "f", (), (), "cpu"), ("x",))
    prog = pipeline_grad_shard.grad_device_program(db, key)
    assert prog is not None and prog.mesh.shape == (2,)
    assert prog.params[0][1].shape == (2, 8)  # x's local rows
    # the loss's partial sum is all-reduced; x's gradient is local (2x, split like x)
    assert prog.count("all-reduce") == 1 and prog.count("all-gather") == 0
    plain = tmp_path / "p"
    plain.mkdir()
    (plain / "m.kina").write_text(
        SHARED_ZEROS.replace("(mesh m [2])", "")
        .replace(" @sharded(axis=0, mesh=m)", "")
        .replace(" @sharded(axis=1, mesh=m)", "")
    )
    db = Session(plain, no_cache=True).db
    gp = pipeline_grad_shard.grad_shard_propagate(db, key)
    assert gp is not None and gp.plan.mesh is None
    assert pipeline_grad_shard.grad_device_program(db, key) is None


CROSS_ENTROPY = """(module m)
(import "std/loss.kina")
(mesh dp [2])
(defn ce [(h : (tensor f32 [N D])) (head : (tensor f32 [D V]))
          (targets : (tensor i32 [N] @sharded(axis=0, mesh=dp)))] -> f32
  (where (<= (* N V) 2147483647))
  (cross-entropy (matmul h head) targets))
"""


def test_an_op_computed_whole_is_sliced_when_a_consumer_splits_it(tmp_path: Path) -> None:
    """Cross-entropy's gradient under data parallelism: gather's VJP ``scatter_add`` has no
    factor rule (every factor whole) but its consumer's layout splits its rows. It must be
    computed whole and sliced; planning gave it a split result with whole operands, so each
    rank scattered global row indices into a half-size table (every gradient wrong)."""
    src = tmp_path / "m.kina"
    src.write_text(CROSS_ENTROPY)
    rng = np.random.default_rng(5)
    h = rng.standard_normal((8, 4)).astype(np.float32)
    head = rng.standard_normal((4, 6)).astype(np.float32)
    targets = rng.integers(0, 6, 8).astype(np.int32)
    want = kinac.value_and_grad(src, "ce", wrt=["h", "head"], no_cache=True)(h, head, targets)
    fn = kinac.value_and_grad(src, "ce", wrt=["h", "head"], mesh="", no_cache=True)
    got = fn(h, head, targets)
    np.testing.assert_allclose(got[0], want[0], rtol=1e-6)
    for k in ("h", "head"):
        np.testing.assert_allclose(got[1][k], want[1][k], rtol=1e-5, atol=1e-6)
    prog = fn.last_program
    assert any(s.kind == "slice" for s in prog.steps if hasattr(s, "kind"))


def test_annotation_edit_reruns_only_that_losss_gradient(tmp_path: Path) -> None:
    """Two losses of two defns, each differentiated; one annotation changes (split dim 0 ->
    dim 1): only that loss's grad_shard_propagate and grad_device_program re-run; its
    entry_graph re-runs to the same graph (layouts are not in it), so its grad_graph is reused
    too, and the other loss's gradient program is reused as it was."""
    ws = tmp_path / "w"
    ws.mkdir()
    src = ws / "m.kina"

    def write(axis: int) -> None:
        src.write_text(
            "(mesh tp [2])\n"
            f"(defn f [(x : (tensor f32 [N D] @sharded(axis={axis}, mesh=tp)))] -> f32\n"
            "  (sum (reshape (exp x) [(* N D)]) :axis 0))\n"
            "(defn g [(x : (tensor f32 [N D] @sharded(axis=0, mesh=tp)))\n"
            "         (w : (tensor f32 [D D]))] -> f32\n"
            "  (sum (reshape (matmul x w) [(* N D)]) :axis 0))\n"
        )

    keys = {
        "f": (EntryKey("m.kina", "f", (("D", 4), ("N", 4)), (), "cpu"), ("x",)),
        "g": (EntryKey("m.kina", "g", (("D", 4), ("N", 4)), (), "cpu"), ("w",)),
    }

    def build() -> tuple[Session, dict[str, object]]:
        sess = Session(ws)
        progs = {n: pipeline_grad_shard.grad_device_program(sess.db, k) for n, k in keys.items()}
        sess.db.commit()
        return sess, progs  # type: ignore[return-value]

    write(0)
    _, before = build()
    write(1)
    sess, after = build()
    ran = sess.db.events.executed_names(None)
    for q in ("grad_shard_propagate", "grad_device_program"):
        assert {k for n, k in ran if n == q} == {keys["f"]}, q
    assert {k for n, k in ran if n == "entry_graph"} == {keys["f"][0]}
    assert not {k for n, k in ran if n == "grad_graph"}
    assert before["g"] == after["g"]
    prog = after["f"]
    assert prog is not None and prog.params[0][2].dims == ((), ("tp",))  # type: ignore[attr-defined]


def test_build_shardings_shows_the_gradient(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A kina.toml entry with ``grad = [...]`` on a data-parallel loss: ``kinac build
    --shardings`` prints the forward's plan and the gradient's (one all-reduce per gradient and
    one for the loss, each citing the batch annotation)."""
    from test_grad_shard import mlp_workspace

    from kinac.cli import main

    ws = mlp_workspace(tmp_path, {"x": "@sharded(axis=0, mesh=dp)"})
    with (ws / "kina.toml").open("a") as f:
        f.write(
            '\n[[entry]]\nname = "mlp_loss"\ndefn = "mlp-loss"\n'
            'dims = { B = 4, S = 8, D = 16, F = 32 }\ngrad = ["w1", "b1", "w2", "b2"]\n'
        )
    assert main(["build", str(ws), "--no-cache", "--shardings", "--color", "never"]) == 0
    out = capsys.readouterr().out
    assert "mlp_loss: layouts over mesh `dp` (dp=2)" in out
    assert "mlp_loss gradient wrt w1, b1, w2, b2: 5 planned collectives" in out
    reduces = [line for line in out.splitlines() if "all-reduce" in line]
    assert len(reduces) == 1 + 5 and all("loss.kina:" in r for r in reduces)  # forward: 1


@pytest.mark.skipif(shutil.which("ptxas") is None, reason="ptxas not installed")
def test_gradient_segments_compile_for_the_gpu(tmp_path: Path) -> None:
    """The block's Megatron gradient program for the cuda target: every segment lowers through
    the GPU path (``gpu_segments``) and its PTX passes ptxas for sm_90 (running it on GPUs is
    the NCCL issue)."""
    from test_grad_shard import BLOCK_W, block_workspace, megatron

    from kinac import pipeline_shard

    ws = block_workspace(tmp_path, megatron("tp"), "(mesh tp [2])")
    db = Session(ws, no_cache=True).db
    dims = (("B", 4), ("D", 64), ("F", 128), ("H", 4), ("KV", 2), ("S", 32))
    key = (EntryKey("loss.kina", "block-loss", dims, (("T", "f32"),), "cuda"), tuple(BLOCK_W))
    prog = pipeline_grad_shard.grad_device_program(db, key)
    assert prog is not None and prog.count("all-reduce") == 5 and len(prog.segments) == 4
    for k, (_, ptx) in enumerate(pipeline_shard.gpu_segments(db, prog)):
        f = tmp_path / f"seg{k}.ptx"
        f.write_text(ptx)
        r = subprocess.run(
            ["ptxas", "-arch=sm_90", str(f), "-o", str(tmp_path / f"seg{k}.cubin")],
            capture_output=True,
            text=True,
        )
        assert r.returncode == 0, r.stderr


PARTIAL_PARAM = """(module m)
(mesh m [2])
(defn f [(x : (tensor f32 [4 8] @sharded(axis=0, mesh=m)))
         (w : (tensor f32 [4 8] @partial(sum, mesh=m)))] -> f32
  (sum (reshape (mul (exp x) (mul w w)) [32]) :axis 0))
"""


def test_a_partial_parameters_gradient_is_replicated(tmp_path: Path) -> None:
    """``w`` is ``@partial(sum)``: the loss sees the sum of the shares, so d loss / d share is
    d loss / d w on every rank; it comes back replicated (not partial) and equal to one
    device's (w is a nonlinear use, so the shares are reduced before ``mul``)."""
    src = tmp_path / "m.kina"
    src.write_text(PARTIAL_PARAM)
    rng = np.random.default_rng(7)
    x, w = (rng.standard_normal((4, 8)).astype(np.float32) for _ in range(2))
    want = kinac.value_and_grad(src, "f", wrt=["x", "w"], no_cache=True)(x, w)
    fn = kinac.value_and_grad(src, "f", wrt=["x", "w"], mesh="", no_cache=True)
    got = fn(x, w)
    np.testing.assert_allclose(got[0], want[0], rtol=1e-6)
    for k in ("x", "w"):
        np.testing.assert_allclose(got[1][k], want[1][k], rtol=1e-6, atol=1e-6)
    lays = [lay for _, _, lay in fn.last_program.outputs]
    assert lays[2].dims == ((), ()) and lays[2].partial == ()
    assert lays[1].dims == (("m",), ())
