"""A batched BLAS product writing straight into its only reader's layout
(``kinac/ir/host/gemm_out.py``): attention's ``P @ V`` written as ``[B, S, H*Dh]`` (the head
merge's map kernel folded in), against numpy / PyTorch in float64 on random data, odd sizes
and the causal products included; where the views or readers forbid it, the map stays."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from host_support import compiled

from kinac.ir import lower_stages
from kinac.ir.testing import GraphBuilder, causal_mask
from kinac.tir.graph import Graph


def _merge(b: int, h: int, s: int, dh: int, *, causal: bool, twice: bool = False) -> Graph:
    """softmax(q k^T [+ causal]) @ v, heads merged to ``[b, s, h*dh]``, then ``@ wo``;
    ``twice``: the product ``P @ V`` is an output too (a second reader)."""
    g = GraphBuilder("merge")
    q, k = g.param("q", "f32", (b, h, s, dh)), g.param("k", "f32", (b, h, s, dh))
    v, wo = g.param("v", "f32", (b, h, s, dh)), g.param("wo", "f32", (h * dh, 7))
    x = g.matmul(q, g.transpose(k, (0, 1, 3, 2)))
    if causal:
        x = g.binary("add", x, causal_mask(g, s))
    pv = g.matmul(g.softmax(x, -1), v)
    merged = g.reshape(g.transpose(pv, (0, 2, 1, 3)), (b, s, h * dh))
    out = g.matmul(merged, wo)
    return g.build(out, pv) if twice else g.build(out)


def _reference(ins: list[np.ndarray], causal: bool) -> tuple[np.ndarray, np.ndarray]:
    q = ins[0]
    t = [torch.from_numpy(a).double() for a in ins]
    x = t[0] @ t[1].transpose(-1, -2)
    if causal:
        s = q.shape[-2]
        x = x + torch.full((s, s), -math.inf, dtype=torch.float64).triu(1)
    pv = torch.softmax(x, -1) @ t[2]
    b, h, s, dh = q.shape
    return (pv.transpose(1, 2).reshape(b, s, h * dh) @ t[3]).numpy(), pv.numpy()


def _inputs(b: int, h: int, s: int, dh: int, seed: int) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    arrays = [rng.standard_normal((b, h, s, dh)) for _ in range(3)]
    arrays[0] /= math.sqrt(dh)  # scores of unit scale, as attention scales them
    arrays.append(rng.standard_normal((h * dh, 7)))
    return [a.astype(np.float32) for a in arrays]


def _kernels(graph: Graph) -> str:
    return lower_stages(graph)["fuse-kernels"]


@pytest.mark.parametrize(
    ("b", "h", "s", "dh", "causal"),
    [(2, 3, 37, 24, True), (1, 4, 128, 64, True), (3, 2, 20, 9, False), (2, 2, 64, 16, False)],
)
def test_product_writes_the_merged_heads_in_place(
    b: int, h: int, s: int, dh: int, causal: bool
) -> None:
    graph = _merge(b, h, s, dh, causal=causal)
    fused = _kernels(graph)
    # q k^T, softmax, P @ V (its result [b, s, h*dh]), @ wo: no map kernel for the merge
    assert fused.count('"kina.kernel"') == 4 and 'kind = "map"' not in fused
    assert f"-> tensor<{b}x{s}x{h * dh}xf32>" in fused
    if s >= 32 and causal:  # the row blocks of the causal weighted sum write in place too
        assert 'causal = "weights"' in fused
    ins = _inputs(b, h, s, dh, seed=s + dh)
    want, _ = _reference(ins, causal=causal)
    np.testing.assert_allclose(compiled(graph)(*ins), want, rtol=2e-5, atol=2e-5)


def test_a_product_read_twice_keeps_its_layout() -> None:
    """``P @ V`` is also an output: it is written whole, and the merge stays a map kernel."""
    graph = _merge(2, 2, 40, 8, causal=True, twice=True)
    fused = _kernels(graph)
    assert 'kind = "map"' in fused
    ins = _inputs(2, 2, 40, 8, seed=1)
    out, pv = compiled(graph)(*ins)
    want_out, want_pv = _reference(ins, causal=True)
    np.testing.assert_allclose(out, want_out, rtol=2e-5, atol=2e-5)
    np.testing.assert_allclose(pv, want_pv, rtol=2e-5, atol=2e-5)


def test_views_that_break_rows_are_not_folded() -> None:
    """A transpose of the product's last two dims would put a row's elements ``ldc`` apart:
    BLAS cannot write that, so the map kernel stays (and the result is still right)."""
    g = GraphBuilder("cols")
    a, w = g.param("a", "f32", (3, 5, 6)), g.param("w", "f32", (3, 6, 4))
    g2 = g.build(g.reshape(g.transpose(g.matmul(a, w), (0, 2, 1)), (3, 20)))
    assert 'kind = "map"' in _kernels(g2)
    rng = np.random.default_rng(2)
    x, y = rng.standard_normal((3, 5, 6)), rng.standard_normal((3, 6, 4))
    got = compiled(g2)(x.astype(np.float32), y.astype(np.float32))
    want = (x @ y).transpose(0, 2, 1).reshape(3, 20)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
