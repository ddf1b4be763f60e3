"""FlashAttention-3's intra-warpgroup overlap (``mma = "wgmma_ovl"``, with per-stage mbarriers):
run on the CPU against float64, and through ptxas.

The CPU emulation (``tests/test_attention_emu.py``, ``tests/attention_emu_mbar.py``) runs each
wgmma at its issue, so what it checks is the kernel's data flow: tile ``j + 1``'s scores and
softmax in step ``j`` while tile ``j``'s ``P V`` uses the P carried from the step before, the
rescale after, the K/V ring two tiles ahead (a missing "empty" arrival or "full" wait fails),
the named-barrier turns (a missing arrive hangs and fails), one-tile and partial-tile blocks.
ptxas: no spill, and no C7513 (wgmmas serialised: the overlap gone).
"""

from __future__ import annotations

from dataclasses import replace

import attention_emu_mbar as mbemu
import numpy as np
import pytest
from attention_ptx_support import assembled, by_label, hopper_candidates, kernel_ptx
from test_attention_emu import check_on_cpu, reference, run_kernel
from test_attention_mbar import _drop

from kinac.codegen.ptx import ptxas_path
from kinac.ir.gpu.attention_kernel import kernel_name, smem_bytes, split_kv
from kinac.ir.gpu.attention_params import AttnTiles, bhsd_params, check_params
from kinac.ir.gpu.attention_wgmma import WS_LAUNCH_REGS, WS_REGS
from kinac.tir.interp import bf16_to_f32, f32_to_bf16


@pytest.mark.parametrize(
    "d,s,pingpong,ws,lazy",
    [(64, 200, False, False, False), (64, 200, True, False, False), (128, 256, True, True, True)],
)
def test_overlap_ring_on_cpu(d: int, s: int, pingpong: bool, ws: bool, lazy: bool) -> None:
    """128x64, causal, 200 or 256 rows: the last row block walks four key tiles (tile 3
    refills tile 0's stage), the first one or two; with a producer warpgroup too (head dim
    128: its loads cover both 64-wide halves of the swizzled tile; 256 keys: every tile
    whole, the straight-line loads) and the lazy softmax (attention_lean.py). Without
    ping-pong and with the lazy softmax: a user's mask masking whole rows too (NaN out)."""
    check_on_cpu(d, s, True, AttnTiles(128, 64), "wgmma_ovl", 3, heads=1, mbar=True,
                 pingpong=pingpong, ws=ws, lazy=lazy, masked_rows=pingpong == lazy)  # fmt: skip


def test_overlap_one_tile_on_cpu() -> None:
    """40 rows, causal: the block's only key tile is scored before the loops and its P V is
    the last step's (no loop step runs); the ping-pong turns still pair up."""
    check_on_cpu(64, 40, True, AttnTiles(128, 64), "wgmma_ovl", 3, heads=1, mbar=True,
                 pingpong=True)  # fmt: skip


def test_overlap_128_keys_partial_tiles_on_cpu() -> None:
    """128x128, non-causal, 100 queries over 390 keys (four tiles, a partial last one, all
    masked steps)."""
    rng = np.random.default_rng(11)
    d, sq, sk = 64, 100, 390
    p = replace(bhsd_params("bf16", 1, 1, 1, sq, d, False, AttnTiles(128, 128), sk=sk),
                mma="wgmma_ovl", stages=3, mbar=True, pingpong=True)  # fmt: skip
    assert check_params(p) is None
    q = f32_to_bf16(rng.standard_normal((1, 1, sq, d)).astype(np.float32))
    k = f32_to_bf16(rng.standard_normal((1, 1, sk, d)).astype(np.float32))
    v = f32_to_bf16(rng.standard_normal((1, 1, sk, d)).astype(np.float32))
    f64 = lambda x: bf16_to_f32(x).astype(np.float64)  # noqa: E731
    out = f64(run_kernel(p, q, k, v))
    ref = reference(f64(q), f64(k), f64(v), False)
    assert np.isfinite(out).all()
    assert np.linalg.norm(out - ref) / np.linalg.norm(ref) < 1e-2


@pytest.mark.parametrize(
    "what,s,error",
    [  # the fewest rows that reach the fault: any tile past the first, a refilled stage
        ("mb_wait_full", 100, "never waited for"),
        ("mb_arrive", 200, "mbarrier wait .empty, parity 0. timed out"),
        ("nb_arrive", 40, "named barrier . timed out"),
    ],
)
def test_overlap_missing_wait_or_arrive_is_caught(
    what: str, s: int, error: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(mbemu, "TIMEOUT", 2.0)
    with pytest.raises(RuntimeError, match=error):
        check_on_cpu(64, s, True, AttnTiles(128, 64), "wgmma_ovl", 3, heads=1, mbar=True,
                     pingpong=what.startswith("nb"), edit=_drop(what))  # fmt: skip


def test_overlap_needs_mbar() -> None:
    p = replace(bhsd_params("bf16", 1, 2, 1, 256, 64, True, AttnTiles(128, 64)), stages=3,
                mma="wgmma_ovl")  # fmt: skip
    assert "wgmma_ovl" in (check_params(p) or "")
    assert check_params(replace(p, mbar=True)) is None
    assert check_params(replace(p, mbar=True, ws=True)) is None
    assert "ws" in (check_params(replace(p, mbar=True, ws=True, block_m=64)) or "")


def test_producer_registers_move_to_the_computing_warpgroups() -> None:
    """ws: ``setmaxnreg`` gives the producer warpgroup 24 registers and the two computing ones
    240 (40 and 232 for the overlapped kernel's producer, which loads K and V tiles on
    barriers of their own), which the 168 each of a 384-thread launch pay for exactly; ptxas
    then fits 128x128 tiles with no spill, and the kernel's count is the launch's 168 (a lower
    count would leave the ``setmaxnreg.inc`` waiting for registers nobody frees). Checked on
    the autotune candidates' shared compilation (``attention_ptx_support``)."""
    for prod, cons in WS_REGS.values():
        assert 128 * prod + 256 * cons == 384 * WS_LAUNCH_REGS
    cands = hopper_candidates(128)
    ps = (by_label(cands, "wgmma 128x128 s3 pack mbar ws"),
          by_label(cands, "wgmma_ovl 128x128 s3 mbar pingpong ws"))  # fmt: skip
    ptxs, res = assembled(cands)
    for p, split in zip(ps, (False, True), strict=True):
        prod, cons = WS_REGS[split]
        ptx = kernel_ptx(ptxs, p)
        assert ptx.count(f"setmaxnreg.dec.sync.aligned.u32 {prod};") == 1
        assert ptx.count(f"setmaxnreg.inc.sync.aligned.u32 {cons};") == 1
    assert split_kv(ps[1]) and not split_kv(ps[0])
    assert smem_bytes(ps[1]) == smem_bytes(ps[0]) + 16 * 3  # K and V barriers apart
    if ptxas_path() is None:
        return
    for p in ps:
        r = res[kernel_name(p)]
        assert r["spill_stores"] == 0 and r["stack"] == 0, r
        assert r["registers"] == WS_LAUNCH_REGS, r


def test_overlap_ptx_keeps_wgmmas_async_without_spills() -> None:
    """Both products of a step in flight at once (a ``wait_group 1``), no spill, and ptxas
    does not serialise the wgmmas (C7513) nor inject arrives (C7519): bf16 on the autotune
    candidates' shared compilation, f16 (no such candidate) compiled here."""
    cands = hopper_candidates(128)
    ptxs, res = assembled(cands)
    ps = [by_label(cands, f"wgmma_ovl 128x128 s3 mbar{x}") for x in ("", " pingpong")]
    for p in ps:
        assert kernel_ptx(ptxs, p).count("wgmma.wait_group.sync.aligned 1;") == 2  # two copies
        if ptxas_path() is not None:
            r = res[kernel_name(p)]
            assert "C7513" not in r and "C7519" not in r and r["spill_stores"] == 0, r
    base = replace(bhsd_params("f16", 4, 16, 4, 4096, 128, True, AttnTiles(128, 128)),
                   mma="wgmma_ovl", stages=3, mbar=True)  # fmt: skip
    f16 = (base, replace(base, pingpong=True))
    ptxs, res = assembled(f16)
    for p in f16:
        assert kernel_ptx(ptxs, p).count("wgmma.wait_group.sync.aligned 1;") == 2
        if ptxas_path() is not None:
            r = res[kernel_name(p)]
            assert "C7513" not in r and "C7519" not in r and r["spill_stores"] == 0, r
