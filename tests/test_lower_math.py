"""Accuracy of the expanded f32 transcendentals (``expand_math``) over their whole range.

Compiled through the full pipeline and compared with numpy in float64: the bound is in units
in the last place (ulp) of the f32 result, or absolute for ``erf`` (as PyTorch's own).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from host_support import run

from kinac.ir.testing import GraphBuilder

N = 200_000


def _graph(op: str) -> Any:
    g = GraphBuilder(f"acc_{op}")
    x = g.param("x", "f32", (N,))
    if op == "erf":  # gelu(x) = x (1 + erf(x / sqrt 2)) / 2, so recover erf from gelu
        return g.build(g.unary("gelu", x))
    return g.build(g.unary(op, x))


def ulps(got: np.ndarray, want: np.ndarray) -> float:
    spacing = np.spacing(np.abs(want.astype(np.float32))).astype(np.float64)
    return float(np.max(np.abs(got.astype(np.float64) - want) / spacing))


def test_exp_log_tanh_within_2_ulp() -> None:
    rng = np.random.default_rng(0)
    x = np.concatenate([rng.uniform(-86, 88.5, N // 2), rng.uniform(-3, 3, N // 2)]).astype(
        np.float32
    )
    assert ulps(run(_graph("exp"), x)[0], np.exp(x.astype(np.float64))) < 2.0
    y = np.exp(rng.uniform(-87, 88, N)).astype(np.float32)
    y[:100] = rng.uniform(1e-44, 1e-38, 100)  # subnormals
    assert ulps(run(_graph("log"), y)[0], np.log(y.astype(np.float64))) < 2.0
    z = rng.uniform(-12, 12, N).astype(np.float32)
    assert ulps(run(_graph("tanh"), z)[0], np.tanh(z.astype(np.float64))) < 2.0


def test_erf_absolute_error() -> None:
    x = np.linspace(-8, 8, N).astype(np.float32)
    got = run(_graph("erf"), x)[0].astype(np.float64)
    erf = np.frompyfunc(math.erf, 1, 1)
    want = 0.5 * x * (1.0 + erf(x.astype(np.float64) / math.sqrt(2)).astype(np.float64))  # type: ignore[union-attr]
    assert np.max(np.abs(got - want)) < 1e-6 * 8


def test_special_values() -> None:
    inf, nan = np.inf, np.nan
    x = np.array([-inf, inf, nan, 0.0, -0.0, -100.0, 100.0] + [1.0] * (N - 7), np.float32)
    e = run(_graph("exp"), x)[0][:7]
    np.testing.assert_array_equal(
        e, [0.0, inf, nan, 1.0, 1.0, np.float32(3.7835059e-44), inf]
    )  # subnormal (task M)
    lg = run(
        _graph("log"), np.abs(x) * np.array([1, 1, 1, 1, 1, -1, 1] + [1] * (N - 7), np.float32)
    )[0][:7]
    np.testing.assert_array_equal(lg, [inf, inf, nan, -inf, -inf, nan, np.log(np.float32(100))])
    t = run(_graph("tanh"), x)[0][:7]
    np.testing.assert_array_equal(t, [-1.0, 1.0, nan, 0.0, 0.0, -1.0, 1.0])
