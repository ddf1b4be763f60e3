"""f64 ``sin``/``cos`` of huge arguments on the GPU (adversarial round 2026-12-02e).

The GPU reduced ``x mod pi/2`` with ``pi/2`` in three doubles, which holds to about 2^53:
``sin(1e18)`` was 2.4e24, ``sin(1e300)`` inf (numpy, the host and the interpreter: the true
values in [-1, 1]). Past 2^50 the reduction is now Payne-Hanek
(``kinac/ir/gpu/scalar_f64_trig.py``).
"""

from __future__ import annotations

import numpy as np
import pytest
from gpu_support import assert_ptxas_accepts, run_emulated

from kinac.ir.testing import GraphBuilder
from kinac.tir.graph import Graph

# the hardest double to reduce (within 2^-61 of a multiple of pi/2; Kahan, McDonald)
_WORST = 6381956970095103 * 2.0**797


def _unary(op: str, n: int) -> Graph:
    g = GraphBuilder("t")
    return g.build(g.unary(op, g.param("x", "f64", (n,))))


@pytest.mark.parametrize("op", ["sin", "cos"])
def test_huge_arguments_within_two_ulp_of_numpy(op: str) -> None:
    rng = np.random.default_rng(18 if op == "sin" else 19)
    x = np.ldexp(rng.random(600) + 1.0, rng.integers(30, 1024, 600))
    x *= np.where(rng.random(600) < 0.5, -1.0, 1.0)
    edges = [1e18, 1e22, -1e22, 1e300, np.finfo(np.float64).max, -np.finfo(np.float64).max]
    edges += [2.0**50, np.nextafter(2.0**50, 0.0), 2.0**53 + 2.0, 3.0, -0.0]
    x = np.concatenate([x, edges, [np.inf, -np.inf, np.nan]])
    got = run_emulated(_unary(op, x.size), x)[0]
    with np.errstate(invalid="ignore"):
        want = getattr(np, op)(x)
    finite = np.isfinite(x)
    assert np.isnan(got[~finite]).all()
    ulps = np.abs(got[finite] - want[finite]) / np.spacing(np.abs(want[finite]))
    assert ulps.max() <= 2, x[finite][np.argmax(ulps)]


def test_the_hardest_argument_is_accurate_to_2_pow_minus_100() -> None:
    """``cos`` of it is about 1e-19: the reduction's absolute error stays near 2^-102."""
    x = np.array([_WORST, -_WORST])
    for op in ("sin", "cos"):
        got = run_emulated(_unary(op, 2), x)[0]
        np.testing.assert_allclose(got, getattr(np, op)(x), rtol=0, atol=2.0**-100)
    assert_ptxas_accepts(_unary("sin", 2))
