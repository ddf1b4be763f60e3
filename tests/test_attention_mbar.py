"""The fused attention kernel with per-stage mbarriers (``AttnParams.mbar``), run on the CPU.

The emulation (``tests/attention_emu_mbar.py``) keeps every ``cp.async`` pending until a wait
that the PTX ISA says covers it, so these tests check the kernel's hand-off of the K/V ring
between the warpgroups: results against float64 (the ring wraps: more key tiles than stages),
and that a kernel missing its "full" wait or its "empty" arrival fails in the emulation rather
than passing by luck.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import replace

import attention_emu_mbar as mbemu
import numpy as np
import pytest
from test_attention_emu import check_on_cpu, reference, run_kernel

from kinac.ir.gpu.attention_lower import attention_launch
from kinac.ir.gpu.attention_params import AttnTiles, bhsd_params, check_params
from kinac.tir.interp import bf16_to_f32, f32_to_bf16


@pytest.mark.parametrize(
    "pingpong,ws,masked", [(False, False, False), (True, False, False), (True, True, True)]
)
def test_mbar_ring_on_cpu(pingpong: bool, ws: bool, masked: bool) -> None:
    """128x64, two warpgroups, causal: the last row block walks four key tiles through the
    three stages (tile 3 waits for tile 0's "empty" phase); with and without the named
    barriers that alternate the warpgroups' Q K^T issues, and with a producer warpgroup
    loading every K/V tile (384 threads), there with a user's mask masking whole rows
    (NaN out, as softmax-then-matmul)."""
    check_on_cpu(64, 200, True, AttnTiles(128, 64), "wgmma", 3, heads=1, mbar=True,
                 pingpong=pingpong, ws=ws, masked_rows=masked)  # fmt: skip


def test_mbar_with_packed_p_128_keys_on_cpu() -> None:
    """128x128 with packed P and ping-pong, 100 queries over 390 keys (non-causal, four
    tiles, a partial last one): the ring wraps."""
    rng = np.random.default_rng(5)
    d, sq, sk = 64, 100, 390
    p = replace(bhsd_params("bf16", 1, 1, 1, sq, d, False, AttnTiles(128, 128), sk=sk),
                mma="wgmma", stages=3, mbar=True, pack_p=True, pingpong=True)  # fmt: skip
    assert check_params(p) is None
    q = f32_to_bf16(rng.standard_normal((1, 1, sq, d)).astype(np.float32))
    k = f32_to_bf16(rng.standard_normal((1, 1, sk, d)).astype(np.float32))
    v = f32_to_bf16(rng.standard_normal((1, 1, sk, d)).astype(np.float32))
    f64 = lambda x: bf16_to_f32(x).astype(np.float64)  # noqa: E731
    out = f64(run_kernel(p, q, k, v))
    ref = reference(f64(q), f64(k), f64(v), False)
    assert np.isfinite(out).all()
    assert np.linalg.norm(out - ref) / np.linalg.norm(ref) < 1e-2


def _drop(what: str) -> Callable[[str], str]:
    def edit(ir: str) -> str:
        out = re.sub(rf"  call void @\w+_{what}\(.*\n", "", ir)
        assert out != ir, what
        return out

    return edit


@pytest.mark.parametrize(
    "what,s,error",
    [  # the fewest rows that reach the fault: any tile past the first, a refilled stage
        ("mb_wait_full", 100, "never waited for"),
        ("mb_arrive", 200, "mbarrier wait .empty, parity 0. timed out"),
        ("nb_arrive", 40, "named barrier . timed out"),
    ],
)
def test_a_missing_wait_or_arrive_is_caught(
    what: str, s: int, error: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without the consumers' wait on "full", the tiles' copies are never seen (the emulation
    lands them at a wait only); without the arrival on "empty", refilling a stage waits
    forever; without the ping-pong's arrivals, a warpgroup waits for its turn forever."""
    monkeypatch.setattr(mbemu, "TIMEOUT", 2.0)
    with pytest.raises(RuntimeError, match=error):
        check_on_cpu(64, s, True, AttnTiles(128, 64), "wgmma", 3, heads=1, mbar=True,
                     pingpong=what.startswith("nb"), edit=_drop(what))  # fmt: skip


def test_producer_warpgroup_launch_and_missing_wait() -> None:
    """ws: the launch has 384 threads; the computing warps without their "full" wait never
    see the producer's tiles."""
    p = replace(bhsd_params("bf16", 1, 2, 1, 256, 64, True, AttnTiles(128, 64)), mma="wgmma",
                stages=3, mbar=True, ws=True)  # fmt: skip
    assert check_params(p) is None and p.threads == 384
    assert attention_launch(p).block == 384
    assert "ws" in (check_params(replace(p, mbar=False)) or "")
    with pytest.raises(RuntimeError, match="never waited for"):
        check_on_cpu(64, 100, True, AttnTiles(128, 64), "wgmma", 3, heads=1, mbar=True, ws=True,
                     edit=_drop("mb_wait_full"))  # fmt: skip


def test_mbar_needs_wgmma_and_three_stages() -> None:
    p = replace(bhsd_params("bf16", 1, 2, 1, 256, 64, True, AttnTiles(128, 64)), mma="wgmma")
    assert "mbar" in (check_params(replace(p, mbar=True)) or "")
    assert "mbar" in (check_params(replace(p, mbar=True, stages=3, mma="wgmma_pipe")) or "")
    assert check_params(replace(p, mbar=True, stages=3)) is None
    assert "pingpong" in (check_params(replace(p, pingpong=True, stages=3)) or "")
    assert "pingpong" in (check_params(replace(p, mbar=True, pingpong=True, stages=3,
                                               block_m=64)) or "")  # fmt: skip
    assert check_params(replace(p, mbar=True, pingpong=True, stages=3)) is None
