"""The attention autotuner on the CPU, with a fake timer: tuned once, cached by the rule
engine across processes (a new Database on the same store), re-tuned for a changed shape,
skipped with ``KINAC_AUTOTUNE=0``, deterministic without a GPU, and visible in the entry's
launch plan and PTX through the pipeline's queries."""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path

import pytest

from kinac import pipeline
from kinac.ir.gpu import attention_tune
from kinac.ir.gpu.attention_params import AttnParams, bhsd_params, check_params
from kinac.ir.gpu.attention_tune import (
    GENERATOR_VERSION,
    AttnChoice,
    apply,
    candidates,
    default_choice,
    label,
    pick,
    tuning_key,
)
from kinac.pipeline_autotune import (
    TIMER_KEY,
    attention_autotune_mode,
    attention_tiles,
    buffer_bytes,
)
from kinac.pipeline_support import EntryKey
from kinac.rules import Database
from kinac.rules.store import Store
from kinac.session import Session

ROOT = Path(__file__).resolve().parent.parent


class FakeTimer:
    """Times by a formula (fastest: pipelined wgmma 128x64), counting what it timed."""

    device = "Fake H200 sm_90"

    def __init__(self, fastest: str = "wgmma_pipe 128x64 s3") -> None:
        self.fastest = fastest
        self.timed: list[tuple[AttnParams, ...]] = []

    def time(self, cands: tuple[AttnParams, ...], arch: str) -> tuple[float, ...]:
        self.timed.append(cands)
        return tuple(
            1.0 if label(c) == self.fastest else (math.inf if c.block_n == 128 else 2.0 + i)
            for i, c in enumerate(cands)
        )


def _key(p: AttnParams, mode: str) -> tuple[str, AttnParams, str, str]:
    return ("sm_90a", tuning_key(p), GENERATOR_VERSION, mode)


def _db(store_dir: Path, timer: FakeTimer | None) -> Database:
    return Database(Store(store_dir), {TIMER_KEY: timer} if timer else {})


def test_tuned_once_cached_across_sessions_retuned_for_a_new_shape(tmp_path: Path) -> None:
    p = bhsd_params("bf16", 4, 16, 4, 1024, 128)
    t1 = FakeTimer()
    db = _db(tmp_path, t1)
    mode = attention_autotune_mode(db, ())
    assert mode == "timed Fake H200 sm_90"
    c = attention_tiles(db, _key(p, mode))
    assert (c.how, c.mma, c.block_m, c.block_n, c.stages) == ("timed", "wgmma_pipe", 128, 64, 3)
    assert len(t1.timed) == 1 and len(t1.timed[0]) == len(candidates(p, "sm_90a"))
    assert dict(c.times)["wgmma_pipe 128x64 s3"] == 1.0
    assert attention_tiles(db, _key(p, mode)) == c and len(t1.timed) == 1  # memo, same process
    db.commit()
    db.close()
    # a second process: a new database on the same store times nothing
    t2 = FakeTimer(fastest="sync 64x64 s2")
    db2 = _db(tmp_path, t2)
    assert attention_tiles(db2, _key(p, attention_autotune_mode(db2, ()))) == c
    assert t2.timed == []
    # another sequence length is another key: tuned (by this session's timer)
    p2 = bhsd_params("bf16", 4, 16, 4, 4096, 128)
    c2 = attention_tiles(db2, _key(p2, attention_autotune_mode(db2, ())))
    assert len(t2.timed) == 1 and (c2.mma, c2.block_m, c2.stages) == ("sync", 64, 2)
    db2.close()


def test_off_and_no_gpu_give_the_default(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    p = bhsd_params("f16", 2, 8, 2, 1000, 64)
    t = FakeTimer()
    monkeypatch.setenv("KINAC_AUTOTUNE", "0")
    db = _db(tmp_path, t)
    assert attention_autotune_mode(db, ()) == "off"
    c = attention_tiles(db, _key(p, "off"))
    assert c == default_choice(p, "sm_90a", "off") and t.timed == []
    # no timer (this machine has no GPU): the fixed table, the same every time
    d = attention_tiles(Database(), _key(p, "default"))
    assert d == default_choice(p, "sm_90a") == AttnChoice(64, 64, 0, 2, "wgmma", "default")
    assert default_choice(p, "sm_80").mma == "sync"
    long = bhsd_params("bf16", 1, 16, 4, 4096, 128)  # measured from S = 4096: FA3-style
    assert default_choice(long, "sm_90a") == AttnChoice(
        128, 128, 0, 3, "wgmma_ovl", "default", lpt=True, mbar=True, pingpong=True, ws=True,
        lazy=True,
    )  # fmt: skip
    assert not default_choice(replace(long, causal=False), "sm_90a").lpt
    assert default_choice(long, "sm_80") == AttnChoice(64, 64, 0, 2, "sync", "default")
    # head dim 128, causal, shorter (the 45M block's S = 1024): 64x64 longest-first, as measured
    mid = bhsd_params("bf16", 4, 16, 4, 1024, 128)
    assert default_choice(mid, "sm_90a") == AttnChoice(64, 64, 0, 2, "wgmma", "default", lpt=True)
    assert not default_choice(replace(mid, causal=False), "sm_90a").lpt  # nothing to order
    for q in (long, mid, replace(mid, causal=False), replace(long, causal=False)):  # each
        # default is one of the candidates
        assert apply(q, default_choice(q, "sm_90a")) in candidates(q, "sm_90a")
    # a timing on another architecture's device is not used for this one
    assert attention_tiles(db, ("sm_80", tuning_key(p), GENERATOR_VERSION, "timed X sm_90")) == (
        default_choice(p, "sm_80")
    )
    assert t.timed == []


def test_candidates_are_valid_and_the_key_erases_what_is_tuned() -> None:
    p = bhsd_params("bf16", 1, 4, 2, 300, 128)
    cands = candidates(p, "sm_90a")
    assert all(check_params(c) is None for c in cands)
    assert {c.mma for c in cands} == {"wgmma", "wgmma_pipe", "wgmma_ovl", "sync"}
    assert {c.mma for c in candidates(p, "sm_80")} == {"sync"}
    assert len({label(c) for c in cands}) == len(cands)
    q = replace(p, block_m=128, stages=3, mma="wgmma_pipe")
    assert tuning_key(q) == tuning_key(p)
    assert tuning_key(replace(p, mma="wgmma", pack_p=True, lpt=True)) == tuning_key(p)
    # the scheduling switches: packed P on 128x128 wgmma; the grid order for causal only
    assert any(c.pack_p and c.lpt and (c.block_m, c.block_n) == (128, 128) for c in cands)
    assert not any(c.lpt for c in candidates(replace(p, causal=False), "sm_90a"))
    picked = pick(p, "sm_90a", cands, tuple(0.5 if c.pack_p and c.lpt else 1.0 for c in cands))
    assert (picked.pack_p, picked.lpt, picked.how) == (True, True, "timed")
    assert apply(p, picked).pack_p and apply(p, picked).lpt
    assert tuning_key(replace(p, sq=301, sk=301)) != tuning_key(p)
    # the fake GPU's buffers: out, q, k, v sized by the strides
    assert buffer_bytes(p) == (2 * 4 * 300 * 128, 2 * 4 * 300 * 128, 2 * 2 * 300 * 128,
                               2 * 2 * 300 * 128)  # fmt: skip


BLOCK_DIMS = (("B", 1), ("D", 128), ("F", 64), ("H", 2), ("KV", 1), ("S", 40))


def test_tuned_choice_reaches_the_launch_plan_and_the_ptx(monkeypatch: pytest.MonkeyPatch) -> None:
    """Through the pipeline's queries: the entry's attention launch and its PTX kernel are the
    tuned variant (two warpgroups: 256 threads, 3 stages), under the plan's function name."""
    monkeypatch.setattr(attention_tune, "MIN_TUNE_FLOPS", 0)  # S = 40: tuned all the same
    s = Session(ROOT / "workspaces/transformer", no_cache=True)
    t = FakeTimer()
    s.db.context[TIMER_KEY] = t
    key = EntryKey("block.kina", "block", BLOCK_DIMS, (("T", "bf16"),), "cuda")
    lo = pipeline.gpu_lowered(s.db, key)
    (ln,) = [ln for st in lo.steps if st.kind == "attention" for ln in st.launches]
    assert ln.block == 256 and "128x64 3 stages" in ln.note
    assert ln.shared == 2 * 64 * (128 + 2 * 3 * 64)
    ptx = pipeline.ptx(s.db, key)
    assert f".entry {ln.function}(" in ptx and ".maxntid 256" in ptx  # type: ignore[operator]
    assert len(t.timed) == 1  # the launch plan and the PTX share one tuning


def test_small_attention_is_not_timed(tmp_path: Path) -> None:
    """Under MIN_TUNE_FLOPS of work the default is built without timing anything."""
    p = bhsd_params("bf16", 1, 2, 1, 128, 64)
    t = FakeTimer()
    c = attention_tiles(_db(tmp_path, t), _key(p, "timed Fake H200 sm_90"))
    assert t.timed == [] and c == default_choice(p, "sm_90a", "small")


def _no_gpu() -> bool:
    from kinac.rt.cuda import driver

    return not driver.available()


@pytest.mark.gpu
@pytest.mark.skipif(_no_gpu(), reason="no CUDA GPU")
def test_tuned_on_this_gpu_once(tmp_path: Path) -> None:
    """On a real GPU: every candidate runs (finite times), the fastest (or the default within 1%)
    is kept, and a second database on the same store times nothing."""
    from kinac.pipeline_autotune import GpuTimer

    p = bhsd_params("bf16", 2, 16, 4, 2048, 128)
    db = Database(Store(tmp_path))
    mode = attention_autotune_mode(db, ())
    assert mode.startswith("timed ")
    c = attention_tiles(db, _key(p, mode))
    assert c.how == "timed" and all(math.isfinite(t) for _, t in c.times), c.times
    fastest = min(t for _, t in c.times)
    assert dict(c.times)[label(apply(p, c))] <= fastest * 1.011
    db.commit()
    db.close()
    calls: list[int] = []
    real = GpuTimer.time
    try:
        GpuTimer.time = lambda self, cs, a: calls.append(1) or real(self, cs, a)  # type: ignore[assignment,func-returns-value,method-assign]
        db2 = Database(Store(tmp_path))
        assert attention_tiles(db2, _key(p, attention_autotune_mode(db2, ()))) == c
        assert calls == []
        db2.close()
    finally:
        GpuTimer.time = real  # type: ignore[method-assign]


def test_a_near_tie_keeps_the_default() -> None:
    """Within 1% of the fastest, the measured default wins (timings repeat to 1-2%); beyond,
    the fastest."""
    p = bhsd_params("bf16", 4, 16, 4, 4096, 128)
    cands = candidates(p, "sm_90a")
    names = [label(c) for c in cands]
    ms = [2.0] * len(cands)
    ms[names.index("wgmma 64x64 s2")] = 0.614
    dflt = "wgmma_ovl 128x128 s3 mbar pingpong ws lazy lpt"  # the default at 4096 keys
    ms[names.index(dflt)] = 0.618
    c = pick(p, "sm_90a", cands, tuple(ms))
    assert (c.block_m, c.block_n, c.stages, c.mma, c.lazy, c.how) == (
        128, 128, 3, "wgmma_ovl", True, "timed"
    )  # fmt: skip
    ms[names.index(dflt)] = 0.650
    c = pick(p, "sm_90a", cands, tuple(ms))
    assert (c.block_m, c.block_n) == (64, 64)
    assert pick(p, "sm_90a", cands, (math.inf,) * len(cands)).how == "default"
