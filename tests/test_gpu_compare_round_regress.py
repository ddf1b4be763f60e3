"""Regression: f16/bf16 values that decide something discrete are rounded first in GPU kernels.

Inside a fused GPU kernel f16/bf16 intermediates stay in f32 (:mod:`kinac.ir.gpu.scalar`).
A comparison of such an unrounded value with its stored (rounded) copy was false:
``(eq y (max y))`` with ``y`` recomputed in the row kernel never matched the maximum, and the
gradient of ``max`` after :func:`kinac.grad.remat.rematerialize` divided by a zero count
(NaN, tests/test_adversary_grad_findings.py). A cast to an integer truncated ``2.9999`` where
the f16 value is ``3``, and a cast to ``bool`` of a product that underflows in f16 was true.
Each case runs the GPU lowering on the CPU emulator against numpy in float64 (the product of
two f16/bf16 values is exact in float64, rounded once as the program stores it).
"""

from __future__ import annotations

import numpy as np
from check_support import Workspace
from gpu_support import run_emulated

from kinac.check import DefnRef, specialise
from kinac.tir.graph import Graph
from kinac.tir.interp import bf16_to_f32, f32_to_bf16

SRC = """
(defn onehot [(x : (tensor f16 [4 8])) (w : (tensor f16 [8]))] -> (tensor f16 [4 8])
  (cast (eq (mul x w) (max (mul x w) :axis -1 :keepdims true)) :to f16))
(defn toint [(x : (tensor f16 [64])) (w : (tensor f16 [64]))] -> (tensor i32 [64])
  (cast (mul x w) :to i32))
(defn tobool [(x : (tensor f16 [64])) (w : (tensor f16 [64]))] -> (tensor bool [64])
  (cast (mul x w) :to bool))
(defn same [(x : (tensor bf16 [64])) (w : (tensor bf16 [64])) (v : (tensor bf16 [64]))]
  -> (tensor bool [64])
  (eq (mul x w) v))
(defn gmax [(x : (tensor f16 [8])) (w : (tensor f16 [8]))] -> f16
  (max (mul (div x (sqrt (add (sum (square x) :axis -1 :keepdims true) 0.25))) w) :axis 0))
"""


def graph(name: str) -> Graph:
    g = specialise(DefnRef("t.kina", name), {}, {}, Workspace({"t.kina": SRC}).env).graph
    assert g is not None
    return g


def f16_product(x: np.ndarray, w: np.ndarray) -> np.ndarray:
    return (x.astype(np.float64) * w.astype(np.float64)).astype(np.float16)


def test_row_kernel_eq_of_a_recomputed_value_and_its_max() -> None:
    """``mul x w`` is computed twice in one row kernel: once for the max (rounded where the
    accumulator is), once for the comparison (was unrounded: no element equal to the max)."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal((4, 8)).astype(np.float16)
    w = rng.standard_normal(8).astype(np.float16)
    y = f16_product(x, w)
    want = (y == y.max(-1, keepdims=True)).astype(np.float16)
    got = run_emulated(graph("onehot"), x, w)[0]
    np.testing.assert_array_equal(got, want)
    assert want.sum() == 4


def test_cast_to_int_truncates_the_f16_value() -> None:
    rng = np.random.default_rng(2)  # two of its 64 products round up to an integer
    x = rng.uniform(1, 60, 64).astype(np.float16)
    w = rng.uniform(0.5, 2, 64).astype(np.float16)
    exact = x.astype(np.float64) * w.astype(np.float64)
    want = np.trunc(f16_product(x, w).astype(np.float64)).astype(np.int32)
    assert (np.trunc(exact).astype(np.int32) != want).any()  # the data tells the two apart
    np.testing.assert_array_equal(run_emulated(graph("toint"), x, w)[0], want)


def test_cast_to_bool_of_an_f16_underflow() -> None:
    rng = np.random.default_rng(2)
    x = (rng.standard_normal(64) * 1e-4).astype(np.float16)
    w = (rng.standard_normal(64) * 1e-4).astype(np.float16)
    want = f16_product(x, w) != 0
    assert not want.all()  # some products underflow in f16 (not in f32)
    np.testing.assert_array_equal(run_emulated(graph("tobool"), x, w)[0], want)


def test_bf16_eq_with_the_stored_product() -> None:
    """``v`` is the bf16 product stored: the kernel's product must compare equal to it."""
    rng = np.random.default_rng(3)
    x = f32_to_bf16(rng.standard_normal(64).astype(np.float32))
    w = f32_to_bf16(rng.standard_normal(64).astype(np.float32))
    v = f32_to_bf16(bf16_to_f32(x) * bf16_to_f32(w))  # the f32 product is exact: rounded once
    np.testing.assert_array_equal(run_emulated(graph("same"), x, w, v)[0], np.ones(64, bool))


def test_gradient_of_max_after_rematerialize() -> None:
    """The gradient of ``max`` compares the (recomputed) operand with the stored maximum: the
    mask was all zero, and the gradients NaN. Against float64 central differences."""
    from kinac.grad.remat import rematerialize
    from kinac.grad.transform import value_and_grad

    rng = np.random.default_rng(4)
    x = rng.standard_normal(8).astype(np.float16)
    w = rng.standard_normal(8).astype(np.float16)
    gg = rematerialize(value_and_grad(graph("gmax"), ["x", "w"]))
    _, gx, gw = (np.asarray(a, np.float64) for a in run_emulated(gg, x, w))
    x64, w64 = x.astype(np.float64), w.astype(np.float64)

    def f(x: np.ndarray, w: np.ndarray) -> float:
        return float((x / np.sqrt((x * x).sum() + 0.25) * w).max())

    h = 1e-6
    eye = np.eye(8)
    wx = [(f(x64 + h * e, w64) - f(x64 - h * e, w64)) / (2 * h) for e in eye]
    ww = [(f(x64, w64 + h * e) - f(x64, w64 - h * e)) / (2 * h) for e in eye]
    np.testing.assert_allclose(gx, wx, rtol=2e-2, atol=2e-3)
    np.testing.assert_allclose(gw, ww, rtol=2e-2, atol=2e-3)


def test_rematerialize_keeps_what_an_equality_reads() -> None:
    """The f16 copy of a value is not bit-identical in GPU kernels (rounded at other kernel
    boundaries): the backward's ``eq`` of the ``max`` gradient reads the forward's value."""
    from kinac.grad.remat import rematerialize_elementwise
    from kinac.grad.transform import value_and_grad

    g = value_and_grad(graph("gmax"), ["x", "w"])
    end = g.outputs[0] + 1
    r = rematerialize_elementwise(g)
    assert len(r.nodes) > len(g.nodes)  # other values are still recomputed
    eqs = [n for n in r.nodes[end:] if n.op == "eq"]
    assert eqs
    for n in eqs:
        for a in n.args:
            src = r.nodes[a]
            assert a < end or src.op not in ("mul", "div"), (a, src)
