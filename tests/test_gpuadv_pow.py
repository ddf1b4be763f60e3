"""``pow``'s special cases on the GPU (adversarial round 2026-12-02e).

The GPU's ``pow`` (``ir/gpu/scalar_f64.py``, also behind f32/f16/bf16, rounded once) gave
NaN for ``(-0) ** 0.5`` and ``(-inf) ** 2.5`` (C99 and numpy: ``+0`` and ``+inf``: a
non-integral exponent is "not an odd integer", not "undefined", at zero and infinity), and
*finite garbage* for a NaN base (``nan ** 2 = inf``, ``nan ** -0.5 = 6e-155``: the
logarithm of NaN's bits was taken as a number). The host and the interpreter were right.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from gpu_support import assert_ptxas_accepts, run_emulated

from kinac.graph_build import compile_graph
from kinac.ir.testing import GraphBuilder
from kinac.tir.interp import NP_DTYPES, bf16_to_f32, f32_to_bf16

_VALS = [0.0, -0.0, 1.0, -1.0, 2.0, -2.0, 0.5, -0.5, 3.0, -3.0, 2.5, -2.5, np.inf, -np.inf, np.nan]


def _as(x: np.ndarray, dt: str) -> np.ndarray:
    return f32_to_bf16(x.astype(np.float32)) if dt == "bf16" else x.astype(NP_DTYPES[dt])


def _f64(x: np.ndarray, dt: str) -> np.ndarray:
    return bf16_to_f32(x).astype(np.float64) if dt == "bf16" else x.astype(np.float64)


@pytest.mark.parametrize("dt", ["f64", "f32", "f16", "bf16"])
def test_pow_special_cases_match_numpy_and_the_host(dt: str) -> None:
    pairs = np.array(list(itertools.product(_VALS, _VALS)))
    a, b = _as(pairs[:, 0], dt), _as(pairs[:, 1], dt)
    g = GraphBuilder("p")
    graph = g.build(g.binary("pow", g.param("a", dt, a.shape), g.param("b", dt, b.shape)))
    got = _f64(run_emulated(graph, a, b)[0], dt)
    host = compile_graph(graph)(a, b)
    with np.errstate(divide="ignore", invalid="ignore"):
        want = _f64(_as(np.power(pairs[:, 0], pairs[:, 1]), dt), dt)  # rounded once
    for w in (want, _f64(np.asarray(host), dt)):
        edge = ~np.isfinite(w) | (w == 0) | (np.abs(w) == 1)
        np.testing.assert_array_equal(got[edge], w[edge])  # NaN where NaN, 0, inf, 1 exact
        assert (np.signbit(got) == np.signbit(w))[~np.isnan(w)].all()
        np.testing.assert_allclose(got, w, rtol=4.5e-16 if dt == "f64" else 0)  # f64: 1 ulp
    assert_ptxas_accepts(graph)
