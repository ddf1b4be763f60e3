"""Adversarial masks that look causal at three probe positions but are not (found by the
adversary hunt, 2026-12-02): the host's causal products and softmax
(``kinac/ir/host/causal.py``) and the GPU's fused attention (``kinac/ir/gpu/attention.py``)
decide "causal" with :func:`kinac.ir.gpu.attention.is_causal_mask`, which read an iota over a
size-1 or batch axis as the query/key index (it is 0 at every broadcast position) and let an
iota's value stand anywhere in the mask. The host then skipped keys that the mask leaves
visible: a wrong result, not NaN. Each mask is compared with float64 PyTorch on the host, and
the GPU pass must not fuse it as a causal attention."""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import pytest
import torch
from host_support import run

from kinac.ir.dialects import kina_struct as st
from kinac.ir.gpu.attention import merged_params
from kinac.ir.gpu.pipeline import gpu_module
from kinac.ir.testing import GraphBuilder
from kinac.tir.graph import Graph

S, D = 40, 64
Mask = Callable[[GraphBuilder, str], int]


def _where(g: GraphBuilder, c: int, shape: tuple[int, ...], dt: str) -> int:
    return g.where(c, g.full(dt, shape, -math.inf), g.full(dt, shape, 0.0))


def real_causal(g: GraphBuilder, dt: str) -> int:
    """The prelude's mask (the control: it must stay causal)."""
    j, i = g.iota("i32", (S, S), 1), g.iota("i32", (S, S), 0)
    return _where(g, g.binary("gt", j, i), (S, S), dt)


def column_iotas(g: GraphBuilder, dt: str) -> int:
    """``j`` over a size-1 axis is 0 everywhere: ``0 > i`` masks nothing."""
    j, i = g.iota("i32", (S, 1), 1), g.iota("i32", (S, 1), 0)
    return _where(g, g.binary("gt", j, i), (S, S), dt)


def batch_iota(g: GraphBuilder, dt: str) -> int:
    """``0 >= i`` (an iota over a leading size-1 axis): row 0 masked whole, the rest not."""
    z, i = g.iota("i32", (1, S, S), 0), g.iota("i32", (1, S, S), 1)
    return _where(g, g.binary("ge", z, i), (1, S, S), dt)


def head_valued(g: GraphBuilder, dt: str) -> int:
    """Causal ``-inf``, but the visible value is the head index (not 0)."""
    j, i = g.iota("i32", (S, S), 1), g.iota("i32", (S, S), 0)
    return g.where(g.binary("gt", j, i), g.full(dt, (2, S, S), -math.inf), g.iota(dt, (2, S, S), 0))


def _ref_mask(name: str, h: int) -> torch.Tensor:
    i = torch.arange(S, dtype=torch.float64)
    tri = torch.where(i[None, :] > i[:, None], -math.inf, 0.0)
    m = {
        "real_causal": tri,
        "column_iotas": torch.zeros(S, S, dtype=torch.float64),
        "batch_iota": torch.where(i[:, None] == 0, -math.inf, 0.0).expand(S, S),
        "head_valued": tri + torch.arange(h, dtype=torch.float64)[:, None, None],
    }[name]
    return m


def _attention(mask: Mask, dt: str, h: int = 2) -> Graph:
    g = GraphBuilder("adv_causal")
    q, k, v = (g.param(n, dt, (h, S, D)) for n in "qkv")
    sc = g.matmul(q, g.transpose(k, (0, 2, 1)))
    x = g.binary("add", g.binary("mul", sc, g.const(0.125, dt)), mask(g, dt))
    return g.build(g.matmul(g.softmax(x, -1), v))


CASES = [real_causal, column_iotas, batch_iota, head_valued]


@pytest.mark.parametrize("mask", CASES, ids=lambda m: m.__name__)
def test_host_attention_with_a_lookalike_mask_equals_float64(mask: Mask) -> None:
    rng = np.random.default_rng(7)
    q, k, v = (rng.standard_normal((2, S, D)).astype(np.float32) for _ in range(3))
    (got,) = run(_attention(mask, "f32"), q, k, v)
    t = [torch.from_numpy(a).double() for a in (q, k, v)]
    sc = t[0] @ t[1].transpose(1, 2) * 0.125 + _ref_mask(mask.__name__, 2)
    want = (torch.softmax(sc, -1) @ t[2]).numpy()
    got = got.reshape(want.shape)
    ok = ~np.isnan(want).any(-1)  # a fully masked row is NaN on both sides (language.md)
    assert np.array_equal(np.isnan(got).any(-1), ~ok)
    np.testing.assert_allclose(got[ok], want[ok], rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("mask", CASES, ids=lambda m: m.__name__)
def test_gpu_fuses_only_the_real_causal_mask_as_causal(mask: Mask) -> None:
    m = gpu_module(_attention(mask, "bf16"), verify=False)
    fused = [
        merged_params(op)
        for op in m.walk()
        if isinstance(op, st.KernelOp) and op.kind.data == "attention"
    ]
    causal = [p.causal for p in fused]
    assert causal == ([True] if mask is real_causal else []), causal


@pytest.mark.parametrize(("s", "causal"), [(256, [True]), (264, [])])
def test_a_bf16_iota_is_an_index_only_while_it_is_exact(s: int, causal: list[bool]) -> None:
    """bf16 holds the integers up to 256: past that ``iota bf16`` rounds (257 -> 256), so
    ``j > i`` keeps key 257 visible for query 256 and the mask is not the causal one."""
    g = GraphBuilder("adv_bf16_iota")
    q, k, v = (g.param(n, "bf16", (2, s, D)) for n in "qkv")
    j, i = g.iota("bf16", (s, s), 1), g.iota("bf16", (s, s), 0)
    x = g.binary(
        "add",
        g.matmul(q, g.transpose(k, (0, 2, 1))),
        _where(g, g.binary("gt", j, i), (s, s), "bf16"),
    )
    m = gpu_module(g.build(g.matmul(g.softmax(x, -1), v)), verify=False)
    got = [
        merged_params(op).causal
        for op in m.walk()
        if isinstance(op, st.KernelOp) and op.kind.data == "attention"
    ]
    assert got == causal


def _masked_attention(mask_dtype: str, dt: str = "f16") -> Graph:
    g = GraphBuilder("adv_user_mask")
    q, k, v = (g.param(n, dt, (2, S, D)) for n in "qkv")
    m = g.param("m", mask_dtype, (S, S))
    mask = m if mask_dtype == dt else g.cast(m, dt)
    x = g.binary(
        "add", g.binary("mul", g.matmul(q, g.transpose(k, (0, 2, 1))), g.const(0.125, dt)), mask
    )
    return g.build(g.matmul(g.softmax(x, -1), v))


def _attention_kernels(graph: Graph) -> list[str]:
    m = gpu_module(graph, verify=False)
    return [
        merged_params(op).mask_dtype
        for op in m.walk()
        if isinstance(op, st.KernelOp) and op.kind.data == "attention"
    ]


def test_a_narrowed_user_mask_is_not_read_unrounded_by_the_fused_kernel() -> None:
    """An f32 mask cast to f16 (-1e9, a common "masked" value, is -inf in f16: a row of it is
    NaN, language.md) was fused reading the f32 tensor: finite -1e9, so such a row came out a
    uniform average of V instead of NaN, and every other value unrounded. A mask of the
    scores' own dtype is still fused."""
    assert _attention_kernels(_masked_attention("f16")) == ["f16"]
    assert _attention_kernels(_masked_attention("f32")) == []
    assert _attention_kernels(_masked_attention("bf16")) == []
    # the unfused path keeps the cast: -1e9 rounds to -inf and a fully masked row is NaN
    rng = np.random.default_rng(1)
    q, k, v = (rng.standard_normal((2, S, D)).astype(np.float16) for _ in range(3))
    m = np.zeros((S, S), np.float32)
    m[3] = -1e9
    m[5, 7:] = -1e9
    (got,) = run(_masked_attention("f32"), q, k, v, m)
    assert np.isnan(got[:, 3]).all() and not np.isnan(np.delete(got, 3, axis=1)).any()
