"""Pass ``gpu-fuse-attention``: which graphs become one flash kernel, and that it reads them
right.

The transformer workspace's block (Kina source, bf16) lowers with one ``kind = "attention"``
kernel in place of two batched cuBLAS calls and a softmax (golden text of that kernel after
``gpu-kernels-to-nvvm``); the test graph's mask spelling (``ge``, ``where(0, -inf)``) matches
too; a user's mask tensor, f32, a head dim the kernel lacks, or a mask that is not causal keep
today's path. The lowered step's kernel is run on the CPU (``test_attention_emu``) on buffers
laid out as the entry's matmuls leave them: the strides, offsets and input order the pass read
off the views are checked against a float64 reference.
"""

from __future__ import annotations

import os
from pathlib import Path

import host_support
import numpy as np
import pytest
from test_attention_emu import assert_same_nans_and_close, reference, run_kernel, user_mask

from kinac import pipeline
from kinac.codegen.ptx import ptx_resources, ptxas_path
from kinac.ir.gpu.attention_lower import entry_arch, for_arch
from kinac.ir.gpu.attention_params import AttnParams
from kinac.ir.gpu.pipeline import lower_graph_gpu, lower_stages_gpu
from kinac.ir.testing import GraphBuilder, attention_graph, causal_mask
from kinac.pipeline_support import EntryKey
from kinac.rules.codec import decode
from kinac.session import Session
from kinac.tir.graph import Graph
from kinac.tir.interp import bf16_to_f32, f32_to_bf16

ROOT = Path(__file__).resolve().parent.parent
GOLDEN = ROOT / "tests/golden/attention"


def attention_op(ir: str) -> str:
    """The text of the ``kind = "attention"`` kernel in printed IR (from its line to its end)."""
    lines = ir.splitlines()
    start = next(i for i, x in enumerate(lines) if 'kind = "attention"' in x)
    end = next(i for i in range(start, len(lines)) if lines[i].lstrip().startswith("})"))
    return "\n".join(x.strip() for x in lines[start : end + 1]) + "\n"


def kinds(g: Graph) -> list[str]:
    return [s.kind for s in lower_graph_gpu(g).steps]


BLOCK_DIMS = (("B", 1), ("D", 128), ("F", 64), ("H", 2), ("KV", 1), ("S", 40))


def test_block_from_kina_source_has_one_attention_kernel() -> None:
    db = Session(ROOT / "workspaces/transformer", no_cache=True).db
    key = EntryKey("block.kina", "block", BLOCK_DIMS, (("T", "bf16"),), "cuda")
    graph = pipeline.entry_graph(db, key).graph
    assert graph is not None
    stages = lower_stages_gpu(graph)
    got = attention_op(stages["gpu-kernels-to-nvvm"])
    path = GOLDEN / "block_bf16.mlir"
    if os.environ.get("KINAC_UPDATE_GOLDEN"):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(got)
    assert got == path.read_text()
    steps = lower_graph_gpu(graph).steps
    assert [s.kind for s in steps].count("attention") == 1
    assert "softmax" not in [s.kind for s in steps]
    # two batched products and a softmax became one launch: 3-D grid, dynamic shared memory
    (ln,) = next(s for s in steps if s.kind == "attention").launches
    assert ln.grid_yz == (2, 1) and ln.shared == 40 * 1024 and ln.block == 128


def test_entry_ptx_uses_wgmma_on_hopper() -> None:
    """Through the pipeline's queries: the block's PTX is made for sm_90a (kina.toml says
    sm_90), its attention kernel is the wgmma one under the launch plan's function name, and
    ptxas takes the whole linked module without spills."""
    db = Session(ROOT / "workspaces/transformer", no_cache=True).db
    key = EntryKey("block.kina", "block", BLOCK_DIMS, (("T", "bf16"),), "cuda")
    lo = pipeline.gpu_lowered(db, key)
    ptx = pipeline.ptx(db, key)
    (fn,) = [ln.function for st in lo.steps if st.kind == "attention" for ln in st.launches]
    assert ".target sm_90a" in ptx and f".entry {fn}(" in ptx  # type: ignore[operator]
    # S = 40 < 64: the one key tile is masked, so only the masked copy of the step remains:
    # 64 / 16 products for Q K^T and 64 / 16 for P V
    assert ptx.count("wgmma.mma_async.sync.aligned") == 64 // 16 + 64 // 16  # type: ignore[union-attr]
    if ptxas_path() is not None:
        res = ptx_resources(ptx, "sm_90a")  # type: ignore[arg-type]
        assert res[fn]["spill_stores"] == 0 and res[fn]["stack"] == 0, res[fn]
        assert set(res) >= set(lo.functions)


def test_arch_decides_the_mma() -> None:
    lw = lower_graph_gpu(_gqa())
    (k,) = [k for k in lw.kernels if k.source == "attention"]
    assert entry_arch(lw.kernels, "sm_90") == "sm_90a"
    assert entry_arch(lw.kernels, "sm_80") == "sm_80"
    assert entry_arch([x for x in lw.kernels if x is not k], "sm_90") == "sm_90"
    assert for_arch(k, "sm_80") is k
    wg = for_arch(k, "sm_90a")
    p = decode(wg.text.encode())
    assert isinstance(p, AttnParams) and p.mma == "wgmma" and wg.symbol == k.symbol


def _gqa(mask: str = "causal", dtype: str = "bf16", dh: int = 64, s: int = 24) -> Graph:
    """Attention over Q [1, 4, s, dh] and K/V [1, 2, s, dh] params, mask variants."""
    g = GraphBuilder("gqa")
    q = g.param("q", dtype, (1, 4, s, dh))
    kp, vp = g.param("k", dtype, (1, 2, s, dh)), g.param("v", dtype, (1, 2, s, dh))
    m = g.param("m", dtype, (s, s)) if mask.startswith("tensor") else None
    k, v = g.repeat_interleave(kp, 2, 1), g.repeat_interleave(vp, 2, 1)
    sc = g.matmul(q, g.transpose(k, (0, 1, 3, 2)))
    if mask == "tensor_scaled":  # (S + m) * c: the mask would be scaled too
        assert m is not None
        sc = g.binary("mul", g.binary("add", sc, m), g.const(0.125, dtype))
    else:
        sc = g.binary("mul", sc, g.const(0.125, dtype))
    if mask == "causal":
        sc = g.binary("add", sc, causal_mask(g, s, dtype))
    elif mask == "tensor":
        assert m is not None
        sc = g.binary("add", sc, m)
    elif mask == "anti":  # masks the keys before the query: not causal
        cond = g.binary("le", g.iota("i32", (s, s), 0), g.iota("i32", (s, s), 1))
        full = g.full(dtype, (s, s), 0.0), g.full(dtype, (s, s), -np.inf)
        sc = g.binary("add", sc, g.where(cond, *full))
    return g.build(g.matmul(g.softmax(sc, -1), v))


@pytest.mark.parametrize(
    "mask,dtype,dh,fused",
    [
        ("causal", "bf16", 64, True),
        ("none", "f16", 128, True),
        ("tensor", "bf16", 64, True),
        ("tensor_scaled", "bf16", 64, False),
        ("anti", "bf16", 64, False),
        ("causal", "f32", 64, False),
        ("causal", "bf16", 32, False),
    ],
)
def test_which_graphs_fuse(mask: str, dtype: str, dh: int, fused: bool) -> None:
    k = kinds(_gqa(mask, dtype, dh))
    assert ("attention" in k) == fused, k
    assert ("softmax" in k) != fused, k


def test_long_sequences_fuse_past_cublas_sizes() -> None:
    """4 x 24000^2 scores (past 2^31 elements: the products are loop kernels, not cuBLAS) are
    exactly where the S x S tensor must not exist: still one attention kernel."""
    assert kinds(_gqa(s=24000)) == ["attention"]


def test_user_mask_tensor_on_the_entrys_buffers() -> None:
    """softmax(q k^T / 8 + m) v with the user's [S, S] mask (broadcast over batch and heads,
    -inf in places, whole rows of it): one kernel reading m by (row, col) strides; it and the
    host path (softmax, then matmul) against numpy's softmax-then-matmul in float64: NaN
    exactly on the fully masked rows (0/0, docs/language.md), the rest close."""
    g = _gqa("tensor", s=40)
    p = _params(g)
    assert p.mask_strides == (0, 0, 40, 1) and p.mask_dtype == "bf16" and p.n_inputs == 4
    rng = np.random.default_rng(3)
    q, k, v = (rng.standard_normal(sh).astype(np.float32) for sh in ((1, 4, 40, 64), (1, 2, 40, 64), (1, 2, 40, 64)))  # fmt: skip
    m = user_mask(40, rng)
    m[:, 5] = -np.inf
    bq, bk, bv, bm = (f32_to_bf16(x) for x in (q, k, v, m))
    ins: list[np.ndarray] = [np.zeros(0)] * p.n_inputs
    for buf, i in zip((bq, bk, bv, bm), (*p.args, p.mask_arg), strict=True):
        ins[i] = buf
    out = bf16_to_f32(run_kernel(p, *ins)).astype(np.float64)
    f64 = [bf16_to_f32(x).astype(np.float64) for x in (bq, bk, bv, bm)]
    kk, vv = np.repeat(f64[1], 2, 1), np.repeat(f64[2], 2, 1)
    sc = f64[0] @ kk.swapaxes(-1, -2) * 0.125 + f64[3]
    with np.errstate(invalid="ignore"):
        e = np.exp(sc - sc.max(-1, keepdims=True))
        ref = (e / e.sum(-1, keepdims=True)) @ vv
    nan_rows = np.isnan(ref).all(axis=(0, 1, 3))
    assert nan_rows.tolist() == [i in (1, 38) for i in range(40)]  # -inf throughout
    assert_same_nans_and_close(out, ref)
    (host,) = host_support.run(g, bq, bk, bv, bm)
    assert_same_nans_and_close(bf16_to_f32(host).astype(np.float64), ref)


def _params(g: Graph) -> AttnParams:
    lw = lower_graph_gpu(g)
    (kern,) = [k for k in lw.kernels if k.source == "attention"]
    p = decode(kern.text.encode())
    assert isinstance(p, AttnParams)
    return p


def test_params_read_off_the_views() -> None:
    p = _params(_gqa())
    assert (p.heads, p.kv_heads, p.sq, p.head_dim, p.causal, p.scale) == (4, 2, 24, 64, True, 0.125)
    # (batch, head, row); one batch: its stride is never used (0)
    assert p.q_strides == (0, 24 * 64, 64) and p.k_strides == (0, 24 * 64, 64)
    assert p.args == (0, 1, 2) and p.group == 2


def test_fused_step_on_the_entrys_buffers() -> None:
    """The block's attention: Q, K, V are ``x @ w`` buffers read through reshape/transpose/
    repeat_interleave; the kernel the pass planned computes attention of those views."""
    b, s, d, h, kv = 1, 40, 128, 2, 1
    g = attention_graph(b, s, d, h, kv, "bf16")
    p = _params(g)
    dh = d // h
    rng = np.random.default_rng(0)
    xq = f32_to_bf16(rng.standard_normal((b, s, h * dh)).astype(np.float32))
    xk = f32_to_bf16(rng.standard_normal((b, s, kv * dh)).astype(np.float32))
    xv = f32_to_bf16(rng.standard_normal((b, s, kv * dh)).astype(np.float32))
    ins: list[np.ndarray] = [np.zeros(0)] * p.n_inputs
    for buf, i in zip((xq, xk, xv), p.args, strict=True):
        ins[i] = buf
    # the output projection reads [B, S, H*Dh]: the kernel writes tokens-major (no map after)
    assert p.o_strides == (s * d, dh, d)
    raw = bf16_to_f32(run_kernel(p, *ins)).astype(np.float64)
    out = raw.reshape(b, s, h, dh).transpose(0, 2, 1, 3)

    def heads(x: np.ndarray, n: int) -> np.ndarray:
        return bf16_to_f32(x).astype(np.float64).reshape(b, s, n, dh).transpose(0, 2, 1, 3)

    ref = reference(heads(xq, h), heads(xk, kv), heads(xv, kv), True)
    # the program scales by rsqrt(64) in bf16 (exactly 1/8, as the reference)
    assert np.isfinite(out).all()
    assert np.linalg.norm(out - ref) / np.linalg.norm(ref) < 1e-2
