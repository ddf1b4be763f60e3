"""Gather's gradient, the scatter-add (graph op ``scatter_add``): its host kernel and its GPU
kernel (emulated on the CPU, and on a GPU under ``-m gpu``) against the interpreter, with
repeated and out-of-range indices. Deterministic by design (docs/language.md, "Gradients"):
rows are added in index order with one writer per element, so results are exact and repeat
bitwise. (The VJP itself, gather to scatter-add, is checked with every other primitive's in
``tests/test_grad_prims.py``.)
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from kinac.ir.testing import GraphBuilder
from kinac.tir.interp import evaluate


@pytest.mark.parametrize("dt", ["f32", "bf16", "f64"])
def test_scatter_add_kernel_matches_the_interpreter(dt: str) -> None:
    """Repeated and out-of-range indices; bf16 accumulates in f32 and rounds once."""
    from kinac.graph_build import compile_graph
    from kinac.tir.graph import TType
    from kinac.tir.interp import f32_to_bf16

    g = GraphBuilder("s")
    idx = g.param("idx", "i64", (3, 5))
    src = g.param("src", dt, (3, 5, 6))
    graph = g.build(g._add("scatter_add", (idx, src), TType(dt, (4, 6))))
    rng = np.random.default_rng(3)
    i = rng.integers(-2, 6, size=(3, 5)).astype(np.int64)
    s = rng.standard_normal((3, 5, 6)).astype(np.float32)
    s = f32_to_bf16(s) if dt == "bf16" else s.astype("float64" if dt == "f64" else "float32")
    (want,) = evaluate(graph, i, s)
    got = compile_graph(graph)(i, s)
    if dt == "bf16":
        np.testing.assert_array_equal(np.asarray(got).view(np.uint16), want.view(np.uint16))
    else:
        np.testing.assert_allclose(got, want, rtol=1e-6)


@pytest.mark.parametrize(("v", "d", "ishape"), [(5, 3, (2, 4)), (300, 2, (7,)), (4, 6, (3, 5))])
def test_gpu_scatter_add_kernel_emulated(v: int, d: int, ishape: tuple[int, ...]) -> None:
    """Row chunks of one row or many, repeated and out-of-range indices."""
    from gpu_support import run_emulated

    from kinac.tir.graph import TType

    g = GraphBuilder("s")
    idx = g.param("idx", "i32", ishape)
    src = g.param("src", "f32", (*ishape, d))
    graph = g.build(g._add("scatter_add", (idx, src), TType("f32", (v, d))))
    rng = np.random.default_rng(v)
    i = rng.integers(-1, v + 1, size=ishape).astype(np.int32)
    s = rng.standard_normal((*ishape, d)).astype(np.float32)
    (got,) = run_emulated(graph, i, s)
    (want,) = evaluate(graph, i, s)
    np.testing.assert_array_equal(got, want)  # one writer per element, index order: exact


EMBED = """(defn emb-loss [(table : (tensor f32 [V D])) (idx : (tensor i32 [N]))
                (w : (tensor f32 [N D]))] -> f32
  (sum (reshape (mul (gather table idx) w) [(* N D)]) :axis 0))
"""


def _no_cuda() -> bool:
    import torch

    return not torch.cuda.is_available()


@pytest.mark.gpu
@pytest.mark.skipif(_no_cuda(), reason="no CUDA GPU with PyTorch")
def test_embedding_gradient_on_the_gpu_is_an_ordered_scatter_add(tmp_path: Path) -> None:
    """Gather's VJP on the GPU: rows added in index order (bitwise numpy's ``add.at``), the
    same bits on a second run (no atomics)."""
    import torch

    import kinac

    path = tmp_path / "emb.kina"
    path.write_text(EMBED)
    fn = kinac.value_and_grad(path, "emb-loss", wrt=["table"], target="cuda", no_cache=True)
    rng = np.random.default_rng(11)
    v, d, n = 1000, 64, 4096
    table = rng.standard_normal((v, d)).astype(np.float32)
    idx = rng.integers(0, 50, size=n).astype(np.int32)  # many repeats per row
    w = rng.standard_normal((n, d)).astype(np.float32)
    args = [torch.tensor(a, device="cuda") for a in (table, idx, w)]
    _, grads = fn(*args)
    got = torch.from_dlpack(grads["table"]).cpu().numpy()
    want = np.zeros_like(table)
    np.add.at(want, idx, w)
    np.testing.assert_array_equal(got, want)
    _, again = fn(*args)
    assert torch.from_dlpack(again["table"]).cpu().numpy().tobytes() == got.tobytes()
