"""Graphs of the products ``gpu-small-gemm`` takes (and a few it must not), shared by the CPU
tests of the pass (tests/test_small_gemm.py) and the GPU tests (tests/test_small_gemm_gpu.py)."""

from __future__ import annotations

from kinac.ir.testing import GraphBuilder, rms_norm
from kinac.tir.graph import Graph


def residual(m: int, k: int, n: int, dt: str = "bf16") -> Graph:
    """``x @ w + r``."""
    g = GraphBuilder("residual")
    x, w, r = g.param("x", dt, (m, k)), g.param("w", dt, (k, n)), g.param("r", dt, (m, n))
    return g.build(g.binary("add", r, g.matmul(x, w)))


def norm_product(b: int, s: int, k: int, n: int, dt: str = "bf16") -> Graph:
    """``rms_norm(x, wn) @ w`` over a batch."""
    g = GraphBuilder("norm_product")
    x, wn, w = g.param("x", dt, (b, s, k)), g.param("wn", dt, (k,)), g.param("w", dt, (k, n))
    return g.build(g.matmul(rms_norm(g, x, wn), w))


def norm_swiglu(m: int, k: int, f: int, dt: str = "bf16") -> Graph:
    """``silu(n @ wg) * (n @ wu)`` with ``n = rms_norm(x, wn)``."""
    g = GraphBuilder("norm_swiglu")
    x, wn = g.param("x", dt, (m, k)), g.param("wn", dt, (k,))
    wg, wu = g.param("wg", dt, (k, f)), g.param("wu", dt, (k, f))
    n = rms_norm(g, x, wn)
    return g.build(g.binary("mul", g.unary("silu", g.matmul(n, wg)), g.matmul(n, wu)))


def norm_two_multiplied(m: int, k: int, n: int, dt: str = "bf16") -> Graph:
    """``(n @ w1) * (n @ w2)``: two products side by side in one output, a map reading them as
    slices (an add would be one product's residual epilogue instead)."""
    g = GraphBuilder("norm_two_multiplied")
    x, wn = g.param("x", dt, (m, k)), g.param("wn", dt, (k,))
    w1, w2 = g.param("w1", dt, (k, n)), g.param("w2", dt, (k, n))
    nx = rms_norm(g, x, wn)
    return g.build(g.binary("mul", g.matmul(nx, w1), g.matmul(nx, w2)))
