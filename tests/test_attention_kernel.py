"""The fused attention kernel's PTX: tensor-core instructions present, no spills, per variant.

Every tile candidate of both head dims is compiled (bf16; f16 at the fixed tiles) and, where
``ptxas`` is installed, assembled for sm_90 with ``-v``: no stack frame, no spill, at most 255
registers. The numbers are the table of ``docs/gpu.md`` ("Fused attention").
"""

from __future__ import annotations

from dataclasses import replace

import pytest
from attention_ptx_support import assembled, by_label, entries, hopper_candidates

from kinac.codegen.ptx import compile_ptx, ptx_resources, ptxas_path
from kinac.ir.gpu.attention import TILE_CANDIDATES, fixed_tiles
from kinac.ir.gpu.attention_kernel import attention_llvm_ir, kernel_name, smem_bytes
from kinac.ir.gpu.attention_params import AttnParams, AttnTiles, bhsd_params, check_params
from kinac.ir.gpu.attention_tune import candidates, label

VARIANTS = [("bf16", d, t) for d, ts in TILE_CANDIDATES.items() for t in ts] + [
    ("f16", d, fixed_tiles(d)) for d in TILE_CANDIDATES
]


@pytest.mark.parametrize("dtype,d,tiles", VARIANTS, ids=lambda x: str(x))
def test_ptx_uses_tensor_cores_without_spills(dtype: str, d: int, tiles: AttnTiles) -> None:
    p = bhsd_params(dtype, 2, 8, 2, 1000, d, True, tiles)
    assert check_params(p) is None
    ptx = compile_ptx(attention_llvm_ir((p,)))
    name = kernel_name(p)
    assert f".entry {name}(" in ptx
    ab = "bf16.bf16" if dtype == "bf16" else "f16.f16"
    assert f"mma.sync.aligned.m16n8k16.row.col.f32.{ab}.f32" in ptx
    assert "ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16" in ptx
    assert "cp.async.cg.shared.global" in ptx
    assert "ex2.approx.ftz.f32" in ptx and ".maxntid" in ptx
    assert ".local" not in ptx  # no array left in local memory
    # two copies of the tile step (unmasked, masked), each (d/8 + block_n/8) * d/16 ... mmas
    per_step = (tiles.block_n // 8) * (d // 16) + (d // 8) * (tiles.block_n // 16)
    assert ptx.count("mma.sync") == 2 * per_step
    assert smem_bytes(p) <= 227 * 1024
    if ptxas_path() is None:
        return
    res = ptx_resources(ptx)[name]
    assert res["spill_stores"] == 0 and res["spill_loads"] == 0 and res["stack"] == 0, res
    assert res["registers"] <= 255


@pytest.mark.parametrize("mma", ["wgmma", "wgmma_qk"])
@pytest.mark.parametrize("d", [64, 128])
def test_wgmma_ptx_for_sm_90a(mma: str, d: int) -> None:
    p = replace(bhsd_params("bf16", 2, 8, 2, 1000, d, True, AttnTiles(64, 64)), mma=mma)
    assert p.arch == "sm_90a" and check_params(p) is None
    ptx = compile_ptx(attention_llvm_ir((p,)), "sm_90a")
    steps = d // 16 + (64 // 16 if mma == "wgmma" else 0)  # per copy of the tile step
    assert ptx.count("wgmma.mma_async.sync.aligned") == 2 * steps
    assert "fence.proxy.async.shared::cta" in ptx and "wgmma.wait_group.sync.aligned 0" in ptx
    assert ".target sm_90a" in ptx and ".align 1024" in ptx
    if ptxas_path() is not None:
        res = ptx_resources(ptx, "sm_90a")[kernel_name(p)]
        assert res["spill_stores"] == 0 and res["stack"] == 0, res


def test_params_are_the_canonical_key() -> None:
    a = bhsd_params("bf16", 2, 8, 2, 100, 64)
    b = bhsd_params("bf16", 2, 8, 2, 101, 64)
    assert kernel_name(a) == kernel_name(bhsd_params("bf16", 2, 8, 2, 100, 64))
    assert kernel_name(a) != kernel_name(b)
    ir = attention_llvm_ir((a, b, a))
    assert ir.count("define ptx_kernel") == 2


def test_check_params_refuses_what_the_kernel_cannot_do() -> None:
    assert "head dim" in (check_params(bhsd_params("bf16", 1, 2, 1, 64, 96)) or "")
    assert "dtype" in (check_params(bhsd_params("f32", 1, 2, 1, 64, 64)) or "")
    assert "heads" in (check_params(bhsd_params("bf16", 1, 3, 2, 64, 64)) or "")


@pytest.mark.parametrize("d", [64, 128])
def test_every_autotune_candidate_assembles_without_spills(d: int) -> None:
    """What the autotuner may time on a GPU: each Hopper candidate through ptxas (sm_90a), no
    stack, no spill (in chunks, LLVM and ptxas overlapping: ``attention_ptx_support``). Head
    dim 64 writes tokens-major (as the block plans it; ``test_attention_tokens_major`` checks
    the same compilation), 128 heads-major (its compilation is shared with the packed-P and
    overlap tests)."""
    if d == 64:
        cands = candidates(tokens_major(bhsd_params("bf16", 2, 8, 2, 1000, d)), "sm_90a")
    else:
        cands = hopper_candidates(d)
    assert len(cands) >= 5
    ptxs, res = assembled(cands)
    assert entries(ptxs, cands)
    if ptxas_path() is None:
        return
    for c in cands:
        r = res[kernel_name(c)]
        assert r["spill_stores"] == 0 and r["spill_loads"] == 0 and r["stack"] == 0, (label(c), r)
        assert smem_bytes(c) <= 227 * 1024


def tokens_major(p: AttnParams) -> AttnParams:
    """``p`` writing a [B, S, H, D] output (the block's plan)."""
    return replace(p, o_strides=(p.sq * p.heads * p.head_dim, p.head_dim, p.heads * p.head_dim))


def test_packed_p_lets_the_p_v_wgmmas_issue_back_to_back() -> None:
    """128x128 wgmma: with P packed per 16 keys between the P V wgmmas, ptxas injects a
    ``warpgroup.arrive`` before each (C7519); packed and pinned first (``pack_p``), none
    (the candidates' shared compilation)."""
    if ptxas_path() is None:
        pytest.skip("ptxas not installed")
    cands = hopper_candidates(128)
    _, res = assembled(cands)
    for text, injected in (("wgmma 128x128 s2", True), ("wgmma 128x128 s2 pack", False)):
        r = res[kernel_name(by_label(cands, text))]
        assert ("C7519" in r) == injected, (text, r)
        assert r["spill_stores"] == 0, (text, r)


def test_f16_packed_p_candidates_assemble() -> None:
    """f16 P registers are ``<2 x half>``: the pin passes them as i32 and back (a bitcast of
    the i32 again failed to parse)."""
    p = bhsd_params("f16", 2, 8, 2, 1000, 128)
    cands = tuple(c for c in candidates(p, "sm_90a") if c.pack_p and c.block_n == 128)[:2]
    assert cands
    ptx = compile_ptx(attention_llvm_ir(cands), "sm_90a")
    assert ptx.count("wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16") >= 2
    for c in cands:
        r = ptx_resources(ptx, "sm_90a").get(kernel_name(c), {"spill_stores": 0})
        assert r["spill_stores"] == 0, (label(c), r)
