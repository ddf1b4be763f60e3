"""Host f32 ``exp`` near its underflow and overflow edges (task M, 2026-12-02e).

The host clamped the argument at -87 (``kinac/ir/host/expand_math.py``), so ``exp(x)`` for
``x`` in (-103.97, -87.3), whose results are subnormal floats, was 0 (``exp(-100)`` is 3.8e-44
in numpy, PyTorch, the interpreter and the GPU), and ``x`` in (88.7, 88.72) gave inf for a
finite result. Now the scaling by ``2^n`` is done in two steps when ``2^(n-1)`` is subnormal.
"""

from __future__ import annotations

import numpy as np
from host_support import run

from kinac.ir.testing import GraphBuilder
from kinac.tir.graph import Graph

F32_MAX = float(np.finfo(np.float32).max)


def _exp(n: int) -> Graph:
    g = GraphBuilder(f"exp_edges_{n}")
    return g.build(g.unary("exp", g.param("x", "f32", (n,))))


def _want(x: np.ndarray) -> np.ndarray:
    with np.errstate(over="ignore"):
        return np.exp(x.astype(np.float64)).astype(np.float32)  # numpy's f64, rounded


def _assert_within_1_ulp(x: np.ndarray, got: np.ndarray) -> None:
    want = _want(x)
    exact = (got == want) | (np.isnan(got) & np.isnan(want))
    finite = np.isfinite(want) & np.isfinite(got)
    assert (exact | finite).all(), x[~(exact | finite)][:5]  # inf and 0 where numpy has them
    xs, gs, ws = x[~exact], got[~exact].astype(np.float64), want[~exact]
    ulps = np.abs(gs - ws) / np.spacing(ws).astype(np.float64)
    worst = int(np.argmax(ulps)) if ulps.size else 0
    assert (ulps <= 1).all(), f"exp({xs[worst]!r}) = {gs[worst]!r}, numpy {ws[worst]!r}"


def test_subnormal_results_near_the_underflow_edge() -> None:
    x = np.linspace(-104.5, -86.0, 40001).astype(np.float32)
    got = run(_exp(x.size), x)[0]
    _assert_within_1_ulp(x, got)
    assert (got[(x > -103.0) & (x < -87.4)] > 0).all()  # subnormal, not flushed


def test_the_overflow_edge() -> None:
    x = np.linspace(88.0, 89.0, 4001).astype(np.float32)
    ln_max = np.float32(np.log(F32_MAX))  # 88.72284: the largest x whose exp is finite
    x = np.concatenate([x, [np.nextafter(ln_max, np.float32(0)), ln_max]]).astype(np.float32)
    got = run(_exp(x.size), x)[0]
    _assert_within_1_ulp(x, got)
    assert np.isfinite(got[x < ln_max]).all()


def test_special_values() -> None:
    x = np.array([-np.inf, np.inf, np.nan, 0.0, -0.0, -1e30, 1e30, -103.97, -100.0], np.float32)
    got = run(_exp(x.size), x)[0]
    _assert_within_1_ulp(x, got)
    assert got[-1] == np.float32(3.7835059e-44)  # exp(-100): the subnormal numpy gives
