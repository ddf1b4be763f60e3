"""f16/bf16 ``mean`` divides by the exact count; f16 constants past the range are infinities
(adversarial round 2026-12-02e).

The GPU divided an f16/bf16 mean's f32 sum by the count rounded to the dtype: 2049 is the f16
2048 and 383 the bf16 384, so the mean of 2049 f16 threes was 3.002 and of 383 bf16 hundreds
99.5 (the host and the interpreter: 3 and 100); a count past 65504 (a mean over 65536 f16
values) was an ``OverflowError`` in the lowering, as was any f16 literal past 65520 (IEEE: it
rounds to infinity, as on the host).
"""

from __future__ import annotations

import numpy as np
import pytest
from gpu_support import run_emulated

from kinac.graph_build import compile_graph
from kinac.ir.testing import GraphBuilder
from kinac.tir.interp import bf16_to_f32, evaluate, f32_to_bf16


def _as(x: np.ndarray, dt: str) -> np.ndarray:
    return f32_to_bf16(x.astype(np.float32)) if dt == "bf16" else x.astype(np.float16)


def _f64(x: np.ndarray, dt: str) -> np.ndarray:
    return bf16_to_f32(x).astype(np.float64) if dt == "bf16" else x.astype(np.float64)


@pytest.mark.parametrize(
    ("dt", "shape", "axis"),
    [
        ("f16", (3, 2049), 1),  # a row kernel
        ("bf16", (3, 383), 1),
        ("f16", (2049, 3), 0),  # a column kernel
        ("bf16", (383, 3), 0),
        ("f16", (2, 70000), 1),  # a count past the f16 range
        ("f16", (65536,), 0),  # split in two stages
    ],
)
def test_mean_of_constant_rows_is_exact(dt: str, shape: tuple[int, ...], axis: int) -> None:
    x = np.full(shape, 3.0)
    x[(slice(None),) * axis + (slice(0, None, 2),)] = 100.0  # two values, any count
    g = GraphBuilder("m")
    graph = g.build(g.reduce("reduce_mean", g.param("x", dt, shape), axis, False))
    xs = _as(x, dt)
    want = _f64(_as(x.astype(np.float64).mean(axis), dt), dt)
    got = _f64(run_emulated(graph, xs)[0], dt)
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(got, _f64(np.asarray(evaluate(graph, xs)[0]), dt))


def test_f16_literal_past_the_range_is_infinity() -> None:
    g = GraphBuilder("c")
    graph = g.build(g.binary("mul", g.param("x", "f16", (8,)), g.const(70000.0, "f16")))
    x = np.array([1, -1, 0.5, 2, -3, 1e-3, 4, -8], np.float16)
    got = run_emulated(graph, x)[0]
    np.testing.assert_array_equal(got, np.asarray(compile_graph(graph)(x)))
    np.testing.assert_array_equal(got, np.where(x > 0, np.inf, -np.inf).astype(np.float16))
