"""Subnormal results of the f32 transcendentals on the GPU (adversarial round 2026-12-02e).

The emulator runs the kernels' LLVM IR on the CPU, where ``ex2`` and an ``afn`` division are
exact, so two PTX instructions' range limits went unseen: ``ex2.approx.ftz`` flushed
subnormal results (f32 ``exp`` of x in (-104, -87.3) was 0: ``exp(-100)`` is 3.7e-44 on the
host), and ``div.approx.f32`` returns 0 for a divisor in (2^126, 2^128) (``silu(-88)`` was
-0, not -1.4e-36). Now ``ex2.approx.f32`` (subnormals kept) and ``a * rcp.approx(b)``
(full range). These tests read the PTX, and check the emulated values against the host.
"""

from __future__ import annotations

import numpy as np
import pytest
from gpu_support import assert_ptxas_accepts, run_emulated

from kinac.codegen.ptx import compile_ptx
from kinac.ir.gpu.pipeline import lower_graph_gpu
from kinac.ir.testing import GraphBuilder
from kinac.tir.graph import Graph

_OPS = ["exp", "sigmoid", "silu", "softplus", "tanh", "gelu", "erf"]


def _unary(op: str, dt: str, n: int) -> Graph:
    g = GraphBuilder("u")
    return g.build(g.unary(op, g.param("x", dt, (n,))))


@pytest.mark.parametrize("dt", ["f32", "bf16"])
@pytest.mark.parametrize("op", _OPS)
def test_no_flush_to_zero_and_no_short_range_division_in_the_ptx(op: str, dt: str) -> None:
    graph = _unary(op, dt, 64)
    ptx = compile_ptx(lower_graph_gpu(graph).llvm_ir, "sm_90")
    assert ".ftz" not in ptx
    if op in ("sigmoid", "silu"):  # approx_div's divisor 1 + exp(-x) reaches 2^126
        assert "div.approx" not in ptx
    assert_ptxas_accepts(graph)


def test_exp_silu_sigmoid_near_the_bottom_of_f32_agree_with_numpy() -> None:
    """Against numpy's f32 formulas (the host's f32 ``exp`` clamps its input at -87 and gives
    0 below: reported, not the GPU's)."""
    x = np.concatenate([np.linspace(-103.9, -85.0, 60), [-100.0, -88.0, -87.5, -87.3]])
    x = x.astype(np.float32)
    with np.errstate(over="ignore"):
        e = np.exp(-x)
        refs = {"exp": np.exp(x), "silu": x / (1 + e), "sigmoid": 1 / (1 + e)}
    tiny = np.float64(np.finfo(np.float32).smallest_subnormal)
    for op, want in refs.items():
        got = run_emulated(_unary(op, "f32", x.size), x)[0].astype(np.float64)
        assert (np.abs(want) > 0).sum() >= 10  # subnormal and tiny normal values are drawn
        np.testing.assert_allclose(got, want.astype(np.float64), rtol=5e-7, atol=2 * tiny)
