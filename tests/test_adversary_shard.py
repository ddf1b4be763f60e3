"""Sharding findings of the adversary hunt (2026-12-02), each against the unsharded run.

A reshape whose result dim is split on a factor that is the *minor* part of an operand dim
(``[6] -> [3 2]`` with the result split on its last axis: the 2 is the minor factor of the
6) was planned as a local reshape of the whole operand, computed "split": every device got
the first block (``[0 0 1 1 2 2]`` for ``arange(6)``). Its blocks are strided in the
operand, so the plan now computes that result whole and slices it locally
(``kinac/shard/plan.py``, ``_factor_axes``). The gradient of a parameter split on its minor
axis and flattened hit the same plan (its cotangent is that reshape)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

import kinac

SRC = """(mesh m [2])
(defn fwd [(g : (tensor f32 [6])) (x : (tensor f32 [3 2] @sharded(axis=1, mesh=m)))]
  -> (tensor f32 [3 2])
  (add (reshape g [3 2]) x))
(defn out [(g : (tensor f32 [6]))] -> (tensor f32 [1 3 2] @sharded(axis=2, mesh=m))
  (reshape g [1 3 2]))
(defn loss [(p : (tensor f32 [1 3 2] @sharded(axis=2, mesh=m))) (w : (tensor f32 [6]))] -> f32
  (sum (mul (reshape p [6]) w) :axis 0))
"""


def test_reshape_split_on_a_minor_factor_equals_unsharded(tmp_path: Path) -> None:
    path = tmp_path / "r.kina"
    path.write_text(SRC)
    g = np.arange(6, dtype=np.float32)
    x = np.full((3, 2), 10.0, np.float32)
    want = g.reshape(3, 2) + x
    np.testing.assert_array_equal(kinac.compile(path, "fwd", mesh="m")(g, x), want)
    np.testing.assert_array_equal(kinac.compile(path, "out", mesh="m")(g), g.reshape(1, 3, 2))


def test_gradient_of_a_flattened_minor_split_equals_unsharded(tmp_path: Path) -> None:
    path = tmp_path / "r.kina"
    path.write_text(SRC)
    rng = np.random.default_rng(0)
    p = rng.standard_normal((1, 3, 2)).astype(np.float32)
    w = rng.standard_normal(6).astype(np.float32)
    val, grads = kinac.value_and_grad(path, "loss", wrt=["p", "w"], mesh="m")(p, w)
    np.testing.assert_allclose(val, (p.ravel() * w).sum(), rtol=1e-6)
    np.testing.assert_array_equal(grads["p"], w.reshape(1, 3, 2))
    np.testing.assert_array_equal(grads["w"], p.ravel())
