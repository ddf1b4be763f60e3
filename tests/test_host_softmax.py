"""The host softmax kernel (``kinac/ir/host/kernel_loops.py``, docs/host.md): an input computed
in the kernel (a scale, a mask, a bias) is computed once, kept in the output row by the max
pass and read back by the exp pass; a plain input is read twice (bf16 and f16 softmaxes are
legalised to f32 rows, so they keep theirs too). Each against PyTorch in float64 on random data, odd row
lengths (vector tails), causal and not, and a row with NaN or infinity."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from host_support import compiled

from kinac.ir import lower_stages
from kinac.ir.testing import GraphBuilder, causal_mask
from kinac.tir.graph import Graph


def _scaled(shape: tuple[int, ...], dtype: str, *, causal: bool, bias: bool) -> Graph:
    """softmax(x * 0.37 [+ bias] [+ causal], -1): the softmax reads a computed value."""
    g = GraphBuilder("sm")
    x = g.param("x", dtype, shape)
    b = g.param("b", dtype, shape[-1:]) if bias else None
    y = g.binary("mul", x, g.const(0.37, dtype))
    if b is not None:
        y = g.binary("add", y, b)
    if causal:
        y = g.binary("add", y, causal_mask(g, shape[-1], dtype))
    return g.build(g.softmax(y, -1))


def _plain(shape: tuple[int, ...], dtype: str) -> Graph:
    g = GraphBuilder("sm_plain")
    return g.build(g.softmax(g.param("x", dtype, shape), -1))


def _reference(x: np.ndarray, bias: np.ndarray | None, causal: bool, scale: float) -> np.ndarray:
    t = torch.from_numpy(x).double() * (scale if scale != 1.0 else 1.0)
    if bias is not None:
        t = t + torch.from_numpy(bias).double()
    if causal:
        n = x.shape[-1]
        t = t + torch.full((n, n), -math.inf, dtype=torch.float64).triu(1)
    return torch.softmax(t, -1).numpy()


@pytest.mark.parametrize(
    ("shape", "dtype", "causal", "bias"),
    [
        ((2, 3, 37, 37), "f32", True, False),  # causal rows of 1..37 keys (tails of 5)
        ((2, 128, 128), "f32", True, True),
        ((3, 5, 77), "f32", False, True),  # odd row length, not causal
        ((4, 19), "f64", False, False),
        ((2, 33, 33), "f64", True, True),
    ],
)
def test_softmax_of_a_computed_input_matches_torch(
    shape: tuple[int, ...], dtype: str, causal: bool, bias: bool
) -> None:
    rng = np.random.default_rng(sum(shape))
    npdt = np.float32 if dtype == "f32" else np.float64
    x = (rng.standard_normal(shape) * 4).astype(npdt)
    b = rng.standard_normal(shape[-1:]).astype(npdt) if bias else None
    entry = compiled(_scaled(shape, dtype, causal=causal, bias=bias))
    got = entry(x, b) if bias else entry(x)
    want = _reference(x, b, causal, 0.37 if dtype == "f32" else float(np.float64(0.37)))
    tol = 2e-6 if dtype == "f32" else 1e-12
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol)


def test_plain_and_computed_inputs_take_their_own_paths() -> None:
    """The kept row shows in the IR: the computed input is stored by the max pass and loaded
    back by the exp pass; a plain input is loaded by both passes and stored once per pass
    after the first (the exp values, then the scaled ones)."""

    def loops(graph: Graph) -> str:
        text = lower_stages(graph)["kina-to-loops"]
        start = text.index("func.func private @k", text.index("_softmax("))
        return text[start : text.index("func.return", start)]

    computed = loops(_scaled((4, 64), "f32", causal=False, bias=False))
    plain = loops(_plain((4, 64), "f32"))
    # computed: x stored (max pass), e stored (exp pass), p stored (scale pass)
    assert computed.count("memref.store") == 3 and computed.count("memref.load") == 3
    # plain: x loaded by the max and the exp pass, e stored, p loaded and stored
    assert plain.count("memref.store") == 2 and plain.count("memref.load") == 3
    # bf16 is legalised to an f32 softmax (its row f32 too), then cast: it keeps the row
    bf16 = loops(_scaled((4, 64), "bf16", causal=False, bias=False))
    assert "memref<256xf32>" in bf16 and bf16.count("memref.store") == 3


def test_plain_input_and_bf16_match_torch() -> None:
    rng = np.random.default_rng(3)
    x = rng.standard_normal((3, 45)).astype(np.float32)
    np.testing.assert_allclose(
        compiled(_plain((3, 45), "f32"))(x), _reference(x, None, False, 1.0), rtol=2e-6, atol=2e-6
    )
    xb = torch.from_numpy(rng.standard_normal((2, 40, 40)).astype(np.float32)).bfloat16()
    got = compiled(_scaled((2, 40, 40), "bf16", causal=True, bias=False))(xb)
    ref = _reference(xb.float().numpy(), None, True, 0.37)
    got32 = torch.from_dlpack(got).float().numpy()
    np.testing.assert_allclose(got32, ref, rtol=2e-2, atol=2e-2)


def test_nan_and_infinity_in_a_computed_row() -> None:
    """A NaN anywhere a row reads makes the row NaN; +inf too (inf - inf); -inf is an exact 0;
    rows without them are untouched (the kept row is per row)."""
    shape = (4, 50)
    x = np.random.default_rng(5).standard_normal(shape).astype(np.float32)
    x[1, 7] = np.nan
    x[2, 49] = np.inf
    x[3, 0] = -np.inf
    got = compiled(_scaled(shape, "f32", causal=False, bias=False))(x)
    assert np.isnan(got[1]).all() and np.isnan(got[2]).all()
    assert got[3, 0] == 0.0
    want = _reference(x[[0, 3]], None, False, 0.37)
    np.testing.assert_allclose(got[[0, 3]], want, rtol=2e-6, atol=2e-6)
