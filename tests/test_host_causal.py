"""Causal attention's BLAS products on the host (issue 14, ``kinac/ir/host/causal.py``): the
scores product computes, and ``P @ V`` sums, only the keys each row block sees; the results
equal PyTorch's (float64 reference) on ordinary rows, odd sizes included, and NaN and
infinities behave as docs/host.md says."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from host_support import compiled

from kinac.ir import lower_stages
from kinac.ir.host.causal_blocks import causal_row_blocks, gemm_blocks
from kinac.ir.testing import GraphBuilder, causal_mask
from kinac.tir.graph import Graph


def _attention(b: int, h: int, s: int, dh: int, *, scores_out: bool = False) -> Graph:
    """softmax(q k^T / sqrt(dh) + user mask + causal) @ v; with ``scores_out`` the scores are
    returned as well (a second reader: that product must compute every key)."""
    g = GraphBuilder("causal_attn")
    q, k = g.param("q", "f32", (b, h, s, dh)), g.param("k", "f32", (b, h, s, dh))
    v, um = g.param("v", "f32", (b, h, s, dh)), g.param("mask", "f32", (s, s))
    sc = g.matmul(q, g.transpose(k, (0, 1, 3, 2)))
    x = g.binary("mul", sc, g.unary("rsqrt", g.const(float(dh))))
    x = g.binary("add", g.binary("add", x, um), causal_mask(g, s))
    o = g.matmul(g.softmax(x, -1), v)
    return g.build(o, sc) if scores_out else g.build(o)


def _reference(q: np.ndarray, k: np.ndarray, v: np.ndarray, m: np.ndarray) -> np.ndarray:
    t = [torch.from_numpy(a).double() for a in (q, k, v, m)]
    s = q.shape[-2]
    tri = torch.full((s, s), -math.inf, dtype=torch.float64).triu(1)
    p = torch.softmax(t[0] @ t[1].transpose(-1, -2) / math.sqrt(q.shape[-1]) + t[3] + tri, -1)
    return (p @ t[2]).numpy()


def _inputs(b: int, h: int, s: int, dh: int, seed: int) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    q, k, v = (rng.standard_normal((b, h, s, dh)).astype(np.float32) for _ in range(3))
    return [q, k, v, np.zeros((s, s), np.float32)]


def test_row_blocks_cover_the_rows_once() -> None:
    for m in (1, 16, 31, 100, 128, 129, 1000, 4096):
        blocks = causal_row_blocks(m)
        assert blocks[0][0] == 0 and blocks[-1][1] == m
        assert all(a[1] == b[0] for a, b in zip(blocks, blocks[1:], strict=False))
        assert len(blocks) <= 9 and all(r0 % 16 == 0 for r0, _ in blocks)
    assert causal_row_blocks(128) == [(0, 32), (32, 64), (64, 96), (96, 128)]


@pytest.mark.parametrize("s", [16, 100, 128, 300, 1024])
def test_gemm_blocks_compute_what_the_softmax_reads(s: int) -> None:
    """The scores calls write every (row, key) the causal softmax reads (keys up to the row,
    rounded up to 16) exactly once; the weighted sum's calls cover every row and every key up
    to the row; both do less than the whole product from 64 rows on."""
    seen = np.minimum((np.arange(s) // 16 + 1) * 16, s)  # keys row i reads: [0, seen[i])
    needed = np.arange(s)[None, :] < seen[:, None]
    for roles in (("scores",), ("scores", "weights")):
        count = np.zeros((s, s), np.int64)
        for row, col, rows, cols, _ in gemm_blocks(s, s, 64, roles):
            count[row : row + rows, col : col + cols] += 1
        assert (count[needed] == 1).all() and count.max() == 1, roles
        assert s < 64 or count.sum() < 0.8 * s * s
    used = np.zeros((s, s), bool)  # P @ V: rows x keys summed
    for row, _, rows, _, depth in gemm_blocks(s, 64, s, ("weights",)):
        used[row : row + rows, :depth] = True
    assert used[np.tril_indices(s)].all()
    assert gemm_blocks(s, 64, s, ()) == [(0, 0, s, 64, s)]


@pytest.mark.parametrize("s", [100, 128])
def test_causal_products_skip_masked_keys_and_match_torch(s: int) -> None:
    """Both products are marked and run as blocks (the scores by key blocks, each for the rows
    that read it; P @ V by row blocks, each over the keys its rows see), and the attention
    equals PyTorch's; a row the user's mask hides
    entirely is NaN across the output row (docs/language.md, "Fully masked softmax rows")."""
    b, h, dh = 2, 2, 16
    graph = _attention(b, h, s, dh)
    stages = lower_stages(graph)
    fused, llvm = stages["fuse-kernels"], stages["llvm-ir"]
    assert 'causal = "scores"' in fused and 'causal = "weights"' in fused
    # scores by key blocks: keys [0, 32) for every row, keys [32, 64) for rows [32, s) ...
    assert f"i64 {s}, i64 32, i64 16" in llvm and f"i64 {s - 32}, i64 32, i64 16" in llvm
    # P @ V by row blocks: rows [0, 32) sum keys [0, 32) only (m=32 n=16 k=32)
    assert "i64 32, i64 16, i64 32" in llvm
    q, k, v, m = _inputs(b, h, s, dh, seed=s)
    m[7, :] = -np.inf  # query 7 sees no key
    got = compiled(graph)(q, k, v, m)
    want = _reference(q, k, v, m)
    assert np.isnan(got[:, :, 7]).all() and np.isnan(want[:, :, 7]).all()
    ok = ~np.isnan(want)
    assert ok.sum() == want.size - b * h * dh
    np.testing.assert_allclose(got[ok], want[ok], rtol=2e-5, atol=2e-6)


def test_scores_read_twice_are_computed_whole() -> None:
    """Scores that are also an output of the entry are computed for every key (the product is
    not marked "scores"); the weighted sum still skips the zeros (it is marked "weights")."""
    b, h, s, dh = 1, 2, 64, 16
    graph = _attention(b, h, s, dh, scores_out=True)
    fused = lower_stages(graph)["fuse-kernels"]
    assert 'causal = "weights"' in fused and 'causal = "scores' not in fused
    q, k, v, m = _inputs(b, h, s, dh, seed=1)
    out, sc = compiled(graph)(q, k, v, m)
    np.testing.assert_allclose(sc, q @ k.transpose(0, 1, 3, 2), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(out, _reference(q, k, v, m), rtol=2e-5, atol=2e-6)


def test_a_masked_value_that_is_infinite_is_not_summed() -> None:
    """``v`` at key 40 infinite: rows before 40 never see key 40, and their output stays
    finite (as in the GPU's fused attention kernel, which skips the masked blocks; a full
    product would add ``0 * inf`` = NaN); rows from 40 on see it and are not finite."""
    b, h, s, dh = 1, 1, 64, 16
    graph = _attention(b, h, s, dh)
    q, k, v, m = _inputs(b, h, s, dh, seed=2)
    v[0, 0, 40, 3] = np.inf
    got = compiled(graph)(q, k, v, m)
    assert np.isfinite(got[0, 0, :32]).all()  # rows [0, 32): keys [0, 32) only
    assert not np.isfinite(got[0, 0, 40:, 3]).any()
    v[0, 0, 40, 3] = 0.0
    want = _reference(q, k, v, m)
    np.testing.assert_allclose(got[0, 0, :32], want[0, 0, :32], rtol=2e-5, atol=2e-6)
