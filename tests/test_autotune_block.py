"""Which attention kernel the 45M bf16 block (B4 S1024 D2048 H16 KV4, issue 14) is built with
when a timer is present: the API's entry (``kinac.compile``'s queries) and the bench's
directly-called entry (``benches/gpu.py``'s ``lower_gpu``) both build the variant the timer
found fastest, timed at the block's own tokens-major strides (Q, K and V read straight out
of the projections, O written as ``[B, S, H*Dh]``); ``lower_graph_gpu`` alone builds the
canonical ``mma.sync`` kernel, which is what the bench's kernel table measured before (77 us
on the H200 against 54 us for the tuned "wgmma 64x64 s2 lpt"). CPU only: a fake timer."""

from __future__ import annotations

import sys
from pathlib import Path

from test_attention_autotune import FakeTimer

from kinac import pipeline
from kinac.ir.gpu.pipeline import lower_graph_gpu
from kinac.ir.testing import block_graph
from kinac.pipeline_autotune import TIMER_KEY
from kinac.pipeline_support import EntryKey
from kinac.session import Session

ROOT = Path(__file__).resolve().parent.parent
B, S, D, F, H, KV = 4, 1024, 2048, 5632, 16, 4
FASTEST = "wgmma 64x64 s2 lpt"  # the H200's choice at this shape (heads-major, 2026-12-01)


def _attention_launch(lo: object) -> object:
    (ln,) = [ln for st in lo.steps if st.kind == "attention" for ln in st.launches]  # type: ignore[attr-defined]
    return ln


def _check_timed_at_block_strides(t: FakeTimer) -> None:
    """One tuning, of candidates at the block's strides, the Hopper wgmma kinds among them."""
    assert len(t.timed) == 1
    cands = t.timed[0]
    tokens_major = (S * D, D // H, D)  # [B, S, H*Dh]: (batch, head, row) strides
    assert all(c.o_strides == tokens_major and c.q_strides == tokens_major for c in cands)
    assert all(c.k_strides == (S * KV * (D // H), D // H, KV * (D // H)) for c in cands)
    assert {c.mma for c in cands} >= {"wgmma", "wgmma_pipe", "sync"}


def test_api_block_entry_is_built_with_the_timed_variant() -> None:
    s = Session(ROOT / "workspaces/transformer", no_cache=True)
    t = FakeTimer(fastest=FASTEST)
    s.db.context[TIMER_KEY] = t
    dims = (("B", B), ("D", D), ("F", F), ("H", H), ("KV", KV), ("S", S))
    key = EntryKey("block.kina", "block", dims, (("T", "bf16"),), "cuda")
    lo = pipeline.gpu_lowered(s.db, key)
    ln = _attention_launch(lo)
    assert ln.note == "flash 64x64 grid 16x16x4 smem 81920 wgmma lpt"  # type: ignore[attr-defined]
    assert ln.block == 128  # type: ignore[attr-defined]
    _check_timed_at_block_strides(t)
    ptx = pipeline.ptx(s.db, key)
    assert ptx is not None and ".target sm_90a" in ptx
    head = ptx.split(f".entry {ln.function}(", 1)[1]  # type: ignore[attr-defined]
    body = head.split("\n.entry ", 1)[0]
    assert "wgmma.mma_async" in body and "mma.sync" not in body
    assert len(t.timed) == 1  # the PTX used the launch plan's tuning


def test_bench_direct_entry_is_built_with_the_timed_variant() -> None:
    """``benches/gpu.py``'s extra rows and kernel table: the tuned variant, where the old
    ``lower_graph_gpu`` + ``compile_ptx`` path built ``mma.sync``."""
    sys.path.insert(0, str(ROOT / "benches"))
    try:
        import gpu as bench  # benches/gpu.py
    finally:
        sys.path.remove(str(ROOT / "benches"))
    graph = block_graph(B, S, D, H, KV, F, "bf16")
    old = _attention_launch(lower_graph_gpu(graph))
    assert old.note == "flash 64x64 grid 16x16x4 smem 81920"  # type: ignore[attr-defined]
    s = Session(ROOT / "workspaces/transformer", no_cache=True)
    t = FakeTimer(fastest="wgmma 128x128 s3 pack mbar lpt")
    s.db.context[TIMER_KEY] = t
    lo, ptx = bench.lower_gpu(graph, s.db)
    ln = _attention_launch(lo)
    assert ln.note == "flash 128x128 3 stages grid 8x16x4 smem 229424 wgmma pack mbar lpt"  # type: ignore[attr-defined]
    assert ln.block == 256  # type: ignore[attr-defined]
    _check_timed_at_block_strides(t)
    assert ".target sm_90a" in ptx and "wgmma.mma_async" in ptx
