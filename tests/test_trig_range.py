"""f32/bf16 ``sin``/``cos`` of every finite argument (task M, 2026-12-02e).

The generated f32 code reduced ``x mod pi/2`` in f32 (``kinac/prims/defs.py``), within 2 ulp for
``|x| <= 1e6`` only: ``sin(3e7)`` was 5e-4 off, ``sin(1e9) = 13.3``, ``sin(1e10) = -2.5e16``.
``|x| > 1e6`` now takes a rarely taken path, the f64 ``sin`` rounded to f32
(``kinac.prims.rare``): on the GPU a branch (helper H's Payne-Hanek past 2^50), on the host a
versioned loop (``kinac/ir/host/rare_loops.py``: the vectorised loop, then, only if some
argument was large, the loop again with libm behind a branch). Checked against numpy's f64
result rounded to f32 over the whole f32 range, the hard cases included, on the host, in the
GPU emulator and through ``ptxas``. ``sin(-0)`` was ``+0`` on both.
"""

from __future__ import annotations

import numpy as np
import pytest
from gpu_support import assert_ptxas_accepts, run_emulated
from host_support import run

from kinac.ir.testing import GraphBuilder
from kinac.tir.graph import Graph
from kinac.tir.interp import bf16_to_f32, f32_to_bf16

F32_MAX = float(np.finfo(np.float32).max)


def _unary(op: str, n: int, dtype: str = "f32") -> Graph:
    g = GraphBuilder(f"{op}_{dtype}_{n}")
    return g.build(g.unary(op, g.param("x", dtype, (n,))))


def _whole_range(rng: np.random.Generator, n: int) -> np.ndarray:
    """Random finite f32 of every binade (uniform exponent, random mantissa and sign)."""
    bits = rng.integers(0, 0xFF, n, dtype=np.uint32) << 23  # biased exponent 0..254
    bits |= rng.integers(0, 1 << 23, n, dtype=np.uint32)
    bits |= rng.integers(0, 2, n, dtype=np.uint32) << 31
    return bits.view(np.float32)


def _near_multiples_of_pio2(rng: np.random.Generator, n: int) -> np.ndarray:
    """The f32 nearest to ``k pi/2`` for ``k pi/2`` in 1e7 .. 1e38 (sin or cos tiny there
    when the f32 lands close: the hard case of a reduction), and their neighbours."""
    k = np.floor(10.0 ** rng.uniform(7, 38, n) / (np.pi / 2))
    x = (k * (np.pi / 2)).astype(np.float32)
    return np.concatenate([x, np.nextafter(x, np.float32(np.inf)), -x])


HARD = [1e9, 1e10, -1e10, 3e7, 1e6, np.nextafter(np.float32(1e6), np.float32(2e6)), 2.0**24]
HARD += [2.0**50, 2.0**63, 1e20, 1e30, 1e38, F32_MAX, -F32_MAX, 2.0**127, 16367173 * 2.0**72]
HARD += [1e-45, -1e-45, 1e-40, 1.17549435e-38, 0.0, -0.0, 1.0, -1.5707964]


def _inputs(seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    x = [_whole_range(rng, 1500), _near_multiples_of_pio2(rng, 300), np.array(HARD)]
    return np.concatenate(x).astype(np.float32)


def _assert_within_2_ulp(op: str, x: np.ndarray, got: np.ndarray) -> None:
    want = getattr(np, op)(x.astype(np.float64)).astype(np.float32)
    assert np.array_equal(np.signbit(got[want == 0]), np.signbit(want[want == 0]))
    spacing = np.spacing(np.abs(want)).astype(np.float64)
    ulps = np.abs(got.astype(np.float64) - want.astype(np.float64)) / spacing
    worst = int(np.argmax(ulps))
    assert ulps.max() <= 2, f"{op}({x[worst]!r}) = {got[worst]!r}, numpy {want[worst]!r}"


@pytest.mark.parametrize("op", ["sin", "cos"])
def test_gpu_f32_every_finite_argument_within_2_ulp(op: str) -> None:
    x = _inputs(3 if op == "sin" else 4)
    graph = _unary(op, x.size)
    _assert_within_2_ulp(op, x, run_emulated(graph, x)[0])
    assert_ptxas_accepts(graph)


@pytest.mark.parametrize("op", ["sin", "cos"])
def test_gpu_inf_and_nan_give_nan(op: str) -> None:
    x = np.array([np.inf, -np.inf, np.nan, -np.nan], np.float32)
    assert np.isnan(run_emulated(_unary(op, x.size), x)[0]).all()


@pytest.mark.parametrize("op", ["sin", "cos"])
def test_gpu_bf16_large_arguments(op: str) -> None:
    """bf16 reaches 3.4e38: its values past 1e6 take the same branch (f32 registers)."""
    x = f32_to_bf16(np.array([1e9, 1e10, -3e7, 1e30, 3.3e38, 0.5, -0.0], np.float32))
    got = bf16_to_f32(run_emulated(_unary(op, 7, "bf16"), x)[0]).astype(np.float64)
    want = getattr(np, op)(bf16_to_f32(x).astype(np.float64))
    np.testing.assert_allclose(got, want, rtol=2.0**-7, atol=2.0**-9)


def test_sin_of_minus_zero_is_minus_zero_on_host_and_gpu() -> None:
    x = np.array([-0.0, 0.0, -1e-45, 1e-45], np.float32)
    for got in (run(_unary("sin", 4), x)[0], run_emulated(_unary("sin", 4), x)[0]):
        assert np.array_equal(got, x) and np.array_equal(np.signbit(got), np.signbit(x))


@pytest.mark.parametrize("op", ["sin", "cos"])
def test_host_ordinary_range_unchanged_within_2_ulp(op: str) -> None:
    """Up to 1e6 (the fast path), near multiples of pi/2, subnormals and zeros included."""
    rng = np.random.default_rng(5)
    k = rng.integers(-600000, 600000, 2000)
    x = np.concatenate([rng.uniform(-1e6, 1e6, 2000), k * (np.pi / 2), [1e-45, -1e-40, 0.0]])
    x = x.astype(np.float32)
    _assert_within_2_ulp(op, x, run(_unary(op, x.size), x)[0])


@pytest.mark.parametrize("op", ["sin", "cos"])
def test_host_f32_every_finite_argument_within_2_ulp(op: str) -> None:
    x = _inputs(6 if op == "sin" else 7)
    _assert_within_2_ulp(op, x, run(_unary(op, x.size), x)[0])
    x = np.array([np.inf, -np.inf, np.nan], np.float32)
    assert np.isnan(run(_unary(op, 3), x)[0]).all()


def test_host_fused_and_reduced_large_arguments() -> None:
    """The versioned loop inside a fusion (``sin(x) * y`` over 2-D), and carrying a reduction
    (``sum(cos(x))`` over rows): the redo starts from the same accumulators."""
    rng = np.random.default_rng(8)
    x = rng.uniform(-100, 100, (6, 50)).astype(np.float32)
    x[2, 7], x[5, 49] = 1e10, -3e30
    y = rng.uniform(-2, 2, (6, 50)).astype(np.float32)
    g = GraphBuilder("fused_sin_6x50")
    xs, ys = g.param("x", "f32", (6, 50)), g.param("y", "f32", (6, 50))
    prod = g.binary("mul", g.unary("sin", xs), ys)
    got = run(g.build(prod), x, y)[0]
    want = (np.sin(x.astype(np.float64)) * y).astype(np.float32)
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)
    g = GraphBuilder("sum_cos_6x50")
    total = g.reduce("reduce_sum", g.unary("cos", g.param("x", "f32", (6, 50))), 1)
    got = run(g.build(total), x)[0]
    np.testing.assert_allclose(got, np.cos(x.astype(np.float64)).sum(1), rtol=0, atol=1e-4)


def test_host_bf16_large_arguments() -> None:
    x = f32_to_bf16(np.array([1e9, 1e10, -3e7, 1e30, 3.3e38, 0.5, -0.0], np.float32))
    got = bf16_to_f32(run(_unary("sin", 7, "bf16"), x)[0]).astype(np.float64)
    want = np.sin(bf16_to_f32(x).astype(np.float64))
    np.testing.assert_allclose(got, want, rtol=2.0**-7, atol=2.0**-9)


def test_gpu_fused_and_reduced_large_arguments() -> None:
    """The branch inside a row reduction (``sum(cos(x))``, ``max(sin(x) + cos(x))``) and a
    fusion (``sin(x) * y``): the values made in the branch stay inside it (ptxas too)."""
    rng = np.random.default_rng(9)
    x = rng.uniform(-100, 100, (6, 300)).astype(np.float32)
    x[2, 7], x[5, 299] = 1e10, -3e30
    y = rng.uniform(-2, 2, (6, 300)).astype(np.float32)
    x64 = x.astype(np.float64)
    g = GraphBuilder("gpu_sum_cos")
    graph = g.build(g.reduce("reduce_sum", g.unary("cos", g.param("x", "f32", (6, 300))), 1))
    np.testing.assert_allclose(run_emulated(graph, x)[0], np.cos(x64).sum(1), rtol=0, atol=1e-4)
    assert_ptxas_accepts(graph)
    g = GraphBuilder("gpu_max_sin_cos")
    xs = g.param("x", "f32", (6, 300))
    graph = g.build(
        g.reduce("reduce_max", g.binary("add", g.unary("sin", xs), g.unary("cos", xs)), 1)
    )
    want = (np.sin(x64) + np.cos(x64)).max(1)
    np.testing.assert_allclose(run_emulated(graph, x)[0], want, rtol=0, atol=1e-6)
    g = GraphBuilder("gpu_sin_mul")
    xs, ys = g.param("x", "f32", (6, 300)), g.param("y", "f32", (6, 300))
    graph = g.build(g.binary("mul", g.unary("sin", xs), ys))
    np.testing.assert_allclose(run_emulated(graph, x, y)[0], np.sin(x64) * y, rtol=1e-6, atol=1e-6)
    assert_ptxas_accepts(graph)
