"""The GPU's ``div`` is IEEE at every vector width (adversarial round 2026-12-02e).

A vectorised GPU kernel turned a divisor uniform over its lanes (``x / rms``, ``x / b[:, None]``)
into one reciprocal and ``V`` multiplies; a scalar kernel (a last dim that ``V`` does not
divide) divided. ``x * (1 / b)`` is not ``x / b`` (about one ulp off at a third of the
elements), so the same program gave different bits by shape, and differed from the host and
the interpreter. The rule (docs/gpu-precision.md): ``div`` is correctly rounded everywhere;
the reciprocal belongs only to algorithms of their own (softmax's normalisation).
"""

from __future__ import annotations

import numpy as np
import pytest
from gpu_support import assert_ptxas_accepts, run_emulated

from kinac.graph_build import compile_graph
from kinac.ir.testing import GraphBuilder, rms_norm
from kinac.tir.graph import Graph
from kinac.tir.interp import NP_DTYPES, f32_to_bf16


def _host(graph: Graph, *xs: np.ndarray) -> np.ndarray:
    r = compile_graph(graph)(*xs)
    return np.asarray(r[0] if isinstance(r, tuple | list) else r)


def _data(rng: np.random.Generator, shape: tuple[int, ...], dt: str) -> np.ndarray:
    x = (rng.standard_normal(shape) * 3).astype(np.float32)
    if dt == "bf16":
        return f32_to_bf16(x)
    return x.astype(NP_DTYPES[dt])


@pytest.mark.parametrize("dt", ["f32", "f64", "f16", "bf16"])
@pytest.mark.parametrize("n", [8, 7, 32])
def test_div_by_a_row_uniform_divisor_is_the_hosts_bits(dt: str, n: int) -> None:
    """``a / b`` with ``b`` broadcast along the row: vectorised (8, 32) and scalar (7) kernels
    give the host's (and numpy's, in f32/f64) bits."""
    rng = np.random.default_rng(n)
    g = GraphBuilder("d")
    graph = g.build(g.binary("div", g.param("a", dt, (5, n)), g.param("b", dt, (5, 1))))
    a, b = _data(rng, (5, n), dt), _data(rng, (5, 1), dt)
    got = run_emulated(graph, a, b)[0]
    assert got.tobytes() == _host(graph, a, b).tobytes()
    if dt in ("f32", "f64"):
        assert got.tobytes() == (a / b).tobytes()


def test_rms_norm_divides_like_the_host() -> None:
    """RMSNorm's ``x / rms`` in a fused row kernel is a division too (it was a reciprocal).
    Small integers: the sum of squares is exact in any order, so only the division differs."""
    rng = np.random.default_rng(3)
    g = GraphBuilder("rms")
    y = rms_norm(g, g.param("x", "f32", (6, 64)), g.param("w", "f32", (64,)))
    graph = g.build(y)
    x = rng.integers(-8, 9, (6, 64)).astype(np.float32)
    w = _data(rng, (64,), "f32")
    assert run_emulated(graph, x, w)[0].tobytes() == _host(graph, x, w).tobytes()


def test_no_reciprocal_in_a_vectorised_division() -> None:
    """The PTX of a vectorised ``a / b[:, None]`` has IEEE divisions, no ``rcp``."""
    from kinac.codegen.ptx import compile_ptx
    from kinac.ir.gpu.pipeline import lower_graph_gpu

    g = GraphBuilder("d")
    graph = g.build(g.binary("div", g.param("a", "f32", (4, 64)), g.param("b", "f32", (4, 1))))
    ptx = compile_ptx(lower_graph_gpu(graph).llvm_ir, "sm_90")
    assert "div.rn.f32" in ptx and "rcp" not in ptx
    assert_ptxas_accepts(graph)
