"""A row reduction fused into the map kernel that reads it (``kinac/ir/host/row_fuse.py``):
RMSNorm and friends as one kernel, each row reduced then mapped; against PyTorch in float64
on random data, odd row lengths, several reductions, f64; where the reduction has another
reader or runs over another axis, the kernels stay apart (and the results are still right)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from host_support import compiled

from kinac.ir import lower_stages
from kinac.ir.testing import GraphBuilder
from kinac.tir.graph import Graph


def _norm(shape: tuple[int, ...], dtype: str, reduce: str) -> Graph:
    """``x / sqrt(reduce(x * x, -1, keepdims) + 1e-6) * w`` (RMSNorm for ``reduce_mean``)."""
    g = GraphBuilder("norm")
    x, w = g.param("x", dtype, shape), g.param("w", dtype, shape[-1:])
    r = g.reduce(reduce, g.unary("square", x), -1, keepdims=True)
    d = g.unary("sqrt", g.binary("add", r, g.const(1e-6, dtype)))
    return g.build(g.binary("mul", g.binary("div", x, d), w))


def _torch_norm(x: np.ndarray, w: np.ndarray, reduce: str) -> np.ndarray:
    t, tw = torch.from_numpy(x).double(), torch.from_numpy(w).double()
    sq = t * t
    r = {
        "reduce_mean": lambda: sq.mean(-1, keepdim=True),
        "reduce_sum": lambda: sq.sum(-1, keepdim=True),
        "reduce_max": lambda: sq.amax(-1, keepdim=True),
    }[reduce]()
    return (t / torch.sqrt(r + 1e-6) * tw).numpy()


def _kernels(graph: Graph) -> str:
    return lower_stages(graph)["fuse-kernels"]


@pytest.mark.parametrize(
    ("shape", "dtype", "reduce"),
    [
        ((4, 128, 256), "f32", "reduce_mean"),
        ((3, 77), "f32", "reduce_sum"),
        ((2, 5, 33), "f32", "reduce_max"),
        ((6, 19), "f64", "reduce_mean"),
    ],
)
def test_norm_is_one_kernel_and_matches_torch(
    shape: tuple[int, ...], dtype: str, reduce: str
) -> None:
    graph = _norm(shape, dtype, reduce)
    fused = _kernels(graph)
    assert fused.count('"kina.kernel"') == 1 and 'kind = "map"' in fused
    assert f"kina.{reduce}" in fused
    rng = np.random.default_rng(len(shape) + shape[-1])
    npdt = np.float32 if dtype == "f32" else np.float64
    x = rng.standard_normal(shape).astype(npdt)
    w = (rng.standard_normal(shape[-1:]) + 1).astype(npdt)
    tol = 2e-6 if dtype == "f32" else 1e-12
    got = compiled(graph)(x, w)
    np.testing.assert_allclose(got, _torch_norm(x, w, reduce), rtol=tol, atol=tol)


def test_a_row_with_nan_or_inf_stays_in_its_row() -> None:
    """As PyTorch: NaN makes its row NaN; inf makes the row 0 and itself NaN; others exact."""
    x = np.random.default_rng(4).standard_normal((4, 40)).astype(np.float32)
    w = np.ones(40, np.float32)
    x[1, 3], x[2, 39] = np.nan, np.inf
    got = compiled(_norm((4, 40), "f32", "reduce_mean"))(x, w)
    assert np.isnan(got[1]).all()
    assert np.isnan(got[2, 39]) and (got[2, :39] == 0).all()  # finite / inf, inf / inf
    np.testing.assert_allclose(got, _torch_norm(x, w, "reduce_mean"), rtol=2e-6, atol=2e-6)


def test_a_reduction_read_twice_or_over_columns_stays_a_kernel() -> None:
    """The reduction is also an output (a second reader): two kernels. A reduction over
    the first axis is not a row's: two kernels too. Both still right."""
    g = GraphBuilder("twice")
    x = g.param("x", "f32", (6, 50))
    r = g.reduce("reduce_sum", x, -1, keepdims=True)
    twice = g.build(g.binary("sub", x, r), r)
    assert _kernels(twice).count('"kina.kernel"') == 2
    xs = np.random.default_rng(6).standard_normal((6, 50)).astype(np.float32)
    out, red = compiled(twice)(xs)
    np.testing.assert_allclose(red, xs.sum(-1, keepdims=True), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(out, xs - xs.sum(-1, keepdims=True), rtol=1e-5, atol=1e-5)
    g = GraphBuilder("cols")
    x = g.param("x", "f32", (6, 50))
    cols = g.build(g.binary("sub", x, g.reduce("reduce_sum", x, 0, keepdims=True)))
    assert _kernels(cols).count('"kina.kernel"') == 2
    np.testing.assert_allclose(
        compiled(cols)(xs), xs - xs.sum(0, keepdims=True), rtol=1e-5, atol=1e-5
    )


def test_a_reduction_read_through_a_view_stays_a_kernel() -> None:
    """``x + reshape(sum(x, -1, keepdims), [n])`` reads row ``j``'s sum in row ``i``: not a
    row's own reduction, so the kernels stay apart (fused, it raised an internal error)."""
    g = GraphBuilder("view")
    x = g.param("x", "f32", (6, 6))
    r = g.reduce("reduce_sum", x, -1, keepdims=True)
    graph = g.build(g.binary("add", x, g.reshape(r, (6,))))
    assert _kernels(graph).count('"kina.kernel"') == 2
    xs = np.random.default_rng(8).standard_normal((6, 6)).astype(np.float32)
    np.testing.assert_allclose(compiled(graph)(xs), xs + xs.sum(-1), rtol=1e-5, atol=1e-5)


def test_a_single_long_row_stays_two_kernels() -> None:
    """One row of 40000: the pool splits a large map over its first dim above 1, here the
    columns, which would split the row's reduction too; so the kernels stay apart."""
    graph = _norm((1, 40000), "f32", "reduce_mean")
    assert _kernels(graph).count('"kina.kernel"') == 2
    rng = np.random.default_rng(9)
    x = rng.standard_normal((1, 40000)).astype(np.float32)
    w = np.ones(40000, np.float32)
    got = compiled(graph)(x, w)
    np.testing.assert_allclose(got, _torch_norm(x, w, "reduce_mean"), rtol=1e-5, atol=1e-5)
