"""Findings of the reverse-mode adversary (2026-12-02d) outside its owner's files, with their
reproducers; each asserts the right answer (all fixed: regression tests; the f16 NaN after
``rematerialize`` at the end in ``kinac.ir.gpu.scalar``).

A row reduction fused into the map kernel that reads it (the host's ``row_fuse``, the GPU's
``gpu-fuse-rows``) only compares shapes: the map's output must have the reduction's rows.
When the map transposes its result (``(transpose (mul x (sum x :axis 1 :keepdims true)))``)
the shapes agree exactly when the matrix is square, and the fusion is taken although the
rows do not line up: the host lowering then stops with an internal compiler error ("reduce_sum
cannot be recomputed inside a kernel"), the GPU lowering (on the CPU emulator) returns
``x^T * rowsum(x)`` instead of ``(x * rowsum(x))^T``. Found by
``test_adversary_grad.py::test_gradient_graph_gpu_lowering_emulated_equals_torch``: the
gradient of an RMSNorm of a transposed parameter transposes a row-broadcast product back.
The GPU pass was fixed in e66f148; the host's ``row_fuse`` in 48d514a (its test here had
called ``rms-norm`` without importing ``std/nn.kina``, so it failed on that, not on the fusion).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from check_support import Workspace
from gpu_support import run_emulated

import kinac
from kinac.check import DefnRef, specialise

SRC = """(defn h [(x : (tensor f32 [2 2]))] -> (tensor f32 [2 2])
  (transpose (mul x (sum x :axis 1 :keepdims true)) :perm [1 0]))
(defn n [(x : (tensor f64 [2 2])) (w : (tensor f64 [2]))] -> f64
  (sum (sum (rms-norm (transpose x :perm [1 0]) w) :axis 0) :axis 0))
"""
X = np.array([[1, 2], [3, 4]], np.float32)
WANT = (X * X.sum(1, keepdims=True)).T  # [[3 21] [6 28]]; the GPU lowering gives [[3 9] [14 28]]


def test_host_transposed_row_map_square(tmp_path: Path) -> None:
    (tmp_path / "t.kina").write_text('(import "std/nn.kina")\n' + SRC)
    np.testing.assert_array_equal(kinac.compile(tmp_path / "t.kina", "h")(X), WANT)


def test_gpu_transposed_row_map_square_emulated() -> None:
    ws = Workspace({"t.kina": SRC})
    g = specialise(DefnRef("t.kina", "h"), {}, {}, ws.env).graph
    assert g is not None
    np.testing.assert_array_equal(run_emulated(g, X)[0], WANT)


def test_gpu_gradient_of_rms_norm_of_a_transpose_emulated() -> None:
    from kinac.grad.transform import value_and_grad

    ws = Workspace({"t.kina": '(import "std/nn.kina")\n' + SRC})
    g = specialise(DefnRef("t.kina", "n"), {}, {}, ws.env).graph
    assert g is not None
    rng = np.random.default_rng(0)
    x, w = rng.standard_normal((2, 2)), rng.standard_normal(2)
    _, gx = run_emulated(value_and_grad(g, ["x"]), x, w)
    h = 1e-6
    want = np.zeros_like(x)
    for i in np.ndindex(2, 2):  # central differences of the float64 loss
        d = np.zeros_like(x)
        d[i] = h
        f = [
            float(
                ((t := (x + s * d).T) / np.sqrt((t * t).mean(-1, keepdims=True) + 1e-6) * w).sum()
            )
            for s in (1, -1)
        ]
        want[i] = (f[0] - f[1]) / (2 * h)
    np.testing.assert_allclose(gx, want, rtol=1e-6, atol=1e-8)


N2 = """(import "std/nn.kina")
(defn f [(q0 : (tensor f16 [1])) (q1 : (tensor f16 [1])) (q2 : (tensor f16 [1]))
         (q3 : (tensor f16 []))] -> f16
  (let [(r (rms-norm q0 q1))]
    (mul (max (mul (div r (sqrt (add (sum (square r) :axis -1 :keepdims true) 0.25))) q2)
              :axis 0)
         q3)))
"""


@pytest.mark.parametrize(
    "inputs",
    [
        ([0.1257], [-0.1321], [0.6406], 0.1049),
        ([0.00123], [0.2988], [-0.2742], -0.8906),  # the copy's rounding differed (remat.KEEP_FOR)
    ],
)
def test_gpu_f16_gradient_after_rematerialize_emulated(inputs: tuple[object, ...]) -> None:
    """The GPU gradient's graph after ``kinac.grad.remat.rematerialize`` (free elementwise
    values recomputed, then the memory order) computes the right gradients in the
    interpreter, but its GPU lowering on the CPU emulator returned NaN for q0, q1 and q2 at
    almost every input (299 of 300 seeds). Found by the f16 hunt of
    ``test_gradient_graph_gpu_lowering_emulated_equals_torch``. Cause: the gradient of ``max``
    is ``where(eq(y, max y), ...) / count``; ``y`` recomputed in the backward's map kernel
    stayed in f32 (unrounded) and never equalled the stored f16 maximum: count 0, NaN. Fixed
    in ``kinac.ir.gpu.scalar`` (comparison operands are rounded to f16/bf16 first;
    tests/test_gpu_compare_round_regress.py). With that, 2 of 300 inputs were still NaN: the
    copy of ``y`` recomputed ``x / rms * w`` from ``x`` in one kernel where the forward had
    stored ``x / rms * w``'s first half (rounded), an ulp apart; ``rematerialize`` now keeps a
    value an equality reads (``kinac.grad.remat.KEEP_FOR``)."""
    from kinac.grad.remat import rematerialize
    from kinac.grad.transform import value_and_grad
    from kinac.tir.interp import evaluate

    ws = Workspace({"t.kina": N2})
    g = specialise(DefnRef("t.kina", "f"), {}, {}, ws.env).graph
    assert g is not None
    args = [np.array(v, np.float16) for v in inputs]
    gg = rematerialize(value_and_grad(g, ["q0", "q1", "q2", "q3"]))
    want = evaluate(gg, *args)
    assert all(np.isfinite(np.asarray(w, np.float64)).all() for w in want)
    for k, (got, w) in enumerate(zip(run_emulated(gg, *args), want, strict=True)):
        np.testing.assert_allclose(
            np.asarray(got, np.float64), np.asarray(w, np.float64), rtol=2e-2, err_msg=str(k)
        )
