"""What the attention autotuner tries, and what it falls back to (pure: no engine, no GPU).

The rule engine's query (:mod:`kinac.pipeline_autotune`) keys a tuning by
``(arch, tuning_key(p), GENERATOR_VERSION, mode)``: :func:`tuning_key` erases from the kernel's
parameters exactly what tuning chooses (tiles, register cap, mma kind, pipeline stages), so two
kernels that differ only in those share one tuning. :func:`candidates` lists the variants
timed on the device; :func:`default_choice` is the choice without a GPU (CI, cross-compiling,
``KINAC_AUTOTUNE=0``): a fixed table, deterministic, the same on every machine.

``GENERATOR_VERSION`` names the kernel generator: bump it when the emitted code of any
candidate changes, so no tuning measured on older code is reused.
"""

from __future__ import annotations

import math
from dataclasses import replace

from kinac.ir.gpu.attention_params import AttnParams, check_params
from kinac.rules.codec import record

GENERATOR_VERSION = "attn-gen-7"
Cand6 = tuple[str, int, int, int, int, str]

# (mma, block_m, block_n, min_blocks, stages[, switches]) per head dim, Hopper first: every one
# passes the CPU emulation and ptxas with no spill (tests/test_attention_kernel.py,
# test_attention_emu.py). Switches (AttnParams' fields): "pack" (pack_p), "lpt" (lpt; offered
# to causal attention only), "mbar" (mbar: per-stage mbarriers, no block barrier in the loop);
# mma "wgmma_ovl": FA3's intra-warpgroup overlap (kinac/ir/gpu/attention_overlap.py); "lazy"
# (tree reductions, the max moved past a threshold, O rescaled on a warp vote; offered with
# wgmma_ovl only: it made the plain mbar kernel 8% slower on the H200):
# kinac/ir/gpu/attention_lean.py
HOPPER_CANDIDATES: dict[int, tuple[tuple[str, int, int, int, int] | Cand6, ...]] = {
    64: (
        ("wgmma", 64, 64, 0, 2), ("wgmma", 128, 64, 0, 2), ("wgmma", 64, 128, 0, 2),
        ("wgmma", 128, 128, 0, 2), ("wgmma_pipe", 64, 64, 0, 3), ("wgmma_pipe", 128, 64, 0, 3),
        ("wgmma_pipe", 128, 128, 0, 3), ("wgmma", 64, 64, 0, 2, "lpt"),
        ("wgmma", 128, 128, 0, 2, "pack"), ("wgmma", 128, 128, 0, 2, "pack lpt"),
        ("wgmma", 128, 64, 0, 3, "mbar"), ("wgmma", 128, 128, 0, 3, "mbar pack"),
        ("wgmma", 128, 128, 0, 3, "mbar pack pingpong"), ("wgmma_ovl", 128, 128, 0, 3, "mbar"),
        ("wgmma_ovl", 128, 128, 0, 3, "mbar lazy"),
    ),
    128: (
        ("wgmma", 64, 64, 0, 2), ("wgmma", 128, 64, 0, 2), ("wgmma", 128, 128, 0, 2),
        ("wgmma", 128, 128, 0, 3), ("wgmma_pipe", 64, 64, 0, 3), ("wgmma_pipe", 128, 64, 0, 3),
        ("wgmma_pipe", 128, 128, 0, 3), ("wgmma", 64, 64, 0, 2, "lpt"),
        ("wgmma", 128, 128, 0, 2, "pack"), ("wgmma", 128, 128, 0, 2, "pack lpt"),
        ("wgmma", 128, 128, 0, 3, "pack"), ("wgmma_pipe", 128, 128, 0, 3, "lpt"),
        ("wgmma", 128, 64, 0, 3, "mbar"), ("wgmma", 128, 128, 0, 3, "mbar"),
        ("wgmma", 128, 128, 0, 3, "mbar pack"), ("wgmma", 128, 128, 0, 3, "mbar pack lpt"),
        ("wgmma", 128, 64, 0, 3, "mbar pingpong"), ("wgmma", 128, 128, 0, 3, "mbar pingpong"),
        ("wgmma", 128, 128, 0, 3, "mbar pack pingpong"),
        ("wgmma", 128, 128, 0, 3, "mbar pack pingpong lpt"),
        ("wgmma", 128, 64, 0, 3, "mbar ws"), ("wgmma", 128, 64, 0, 3, "mbar ws pingpong"),
        ("wgmma_ovl", 128, 128, 0, 3, "mbar"), ("wgmma_ovl", 128, 128, 0, 3, "mbar lpt"),
        ("wgmma_ovl", 128, 128, 0, 3, "mbar pingpong"),
        ("wgmma_ovl", 128, 128, 0, 3, "mbar pingpong lpt"),
        ("wgmma", 128, 128, 0, 3, "mbar pack ws"), ("wgmma", 128, 128, 0, 3, "mbar pack ws pingpong"),
        ("wgmma_ovl", 128, 128, 0, 3, "mbar ws"), ("wgmma_ovl", 128, 128, 0, 3, "mbar ws pingpong"),
        ("wgmma_ovl", 128, 128, 0, 3, "mbar ws pingpong lpt"),
        ("wgmma_ovl", 128, 128, 0, 3, "mbar ws pingpong lazy lpt"),
        ("wgmma_ovl", 128, 128, 0, 3, "mbar ws pingpong lazy"),
        ("wgmma_ovl", 128, 128, 0, 3, "mbar ws lazy"),
        ("wgmma_ovl", 128, 128, 0, 3, "mbar pingpong lazy lpt"),
    ),
}  # fmt: skip
SYNC_CANDIDATES: dict[int, tuple[tuple[str, int, int, int, int] | Cand6, ...]] = {
    64: (("sync", 64, 64, 0, 2), ("sync", 128, 64, 0, 2)),
    128: (("sync", 64, 64, 0, 2), ("sync", 128, 64, 0, 2)),
}
# The choice without a measurement, from the H200 runs of 2026-12-01 (20:1x UTC, then 21:5x:
# random data, causal GQA, head dim 128; docs/measurements/attention_bench_2026-12-01b.md and
# issue 14's run): at S = 1024 wgmma 64x64 with the longest-first block order ("lpt", causal
# only) was the fastest (54 us against 60 us in grid order); from S = 4096 on, wgmma 128x128
# with 3 stages on per-stage mbarriers was the fastest or within 2% of it at every length
# measured (0.565 / 2.145 / 2.055 ms at S = 4096 / 8192 / 16384, against 0.618 / 2.489 /
# 2.164 for the 2-stage block-barrier kernel this table named before); mma.sync 64x64
# elsewhere. Head dim 64 was not measured: 64x64 in grid order. From 2026-12-02 (01:0x UTC,
# docs/measurements/attention_bench_2026-12-02.md): from S = 4096 on, FA3's overlapped kernel
# with a producer warpgroup, ping-pong and the lazy softmax (wgmma_ovl 128x128 s3 mbar
# pingpong ws lazy, longest-first when causal) was the fastest or within 1% of it at every
# length and both dtypes (bf16 0.481 / 1.905 / ~1.61 ms at S = 4096 / 8192 / B1 16384,
# against 0.557 / 2.110 / 1.845 for the mbar kernel), so it is the long default.
DEFAULT_TILES: dict[int, tuple[int, int, int, int]] = {64: (64, 64, 0, 2), 128: (64, 64, 0, 2)}
DEFAULT_LPT = (128,)  # head dims whose causal default orders blocks longest first (measured)
TIE = 0.01  # relative: a default within 1% of the fastest candidate is kept
# Below this much work (useful FLOPs) a kernel is not timed: the default. Timing compiles every
# candidate (seconds) to save microseconds; 1 GFLOP is ~2 us on an H200 at the default tiles.
MIN_TUNE_FLOPS = 1e9
LONG_KEYS = 2048  # from this many keys, head dim 128 on Hopper: DEFAULT_LONG
DEFAULT_LONG = (128, 128, 0, 3)  # wgmma_ovl with mbar, ws, pingpong, lazy (and lpt if causal)


@record
class AttnChoice:
    """A tuning's result: the variant to build, how it was chosen (``timed``: on the device;
    ``default``: no device; ``off``: ``KINAC_AUTOTUNE=0``) and, when timed, every candidate's
    time in ms (``inf``: it failed) as ``(label, ms)``; the scheduling switches last."""

    block_m: int
    block_n: int
    min_blocks: int
    stages: int
    mma: str
    how: str
    times: tuple[tuple[str, float], ...] = ()
    pack_p: bool = False
    lpt: bool = False
    mbar: bool = False
    pingpong: bool = False
    ws: bool = False
    lazy: bool = False


def hopper(arch: str) -> bool:
    return arch in ("sm_90", "sm_90a")


def tuning_key(p: AttnParams) -> AttnParams:
    """``p`` with every tuned field at its canonical value."""
    return replace(
        p,
        block_m=64,
        block_n=64,
        min_blocks=0,
        stages=2,
        mma="sync",
        pack_p=False,
        lpt=False,
        mbar=False,
        pingpong=False,
        ws=False,
        lazy=False,
    )


def apply(p: AttnParams, c: AttnChoice) -> AttnParams:
    """``p`` built as ``c`` says."""
    return replace(
        p, block_m=c.block_m, block_n=c.block_n, min_blocks=c.min_blocks, stages=c.stages,
        mma=c.mma, pack_p=c.pack_p, lpt=c.lpt, mbar=c.mbar, pingpong=c.pingpong, ws=c.ws,
        lazy=c.lazy,
    )  # fmt: skip


def label(p: AttnParams) -> str:
    """A candidate's name in tables and in :attr:`AttnChoice.times`."""
    out = f"{p.mma} {p.block_m}x{p.block_n} s{p.stages}"
    out += f" min{p.min_blocks}" if p.min_blocks else ""
    out += " pack" if p.pack_p else ""
    out += " mbar" if p.mbar else ""
    out += " pingpong" if p.pingpong else ""
    out += " ws" if p.ws else ""
    out += " lazy" if p.lazy else ""
    return out + (" lpt" if p.lpt else "")


def candidates(p: AttnParams, arch: str) -> tuple[AttnParams, ...]:
    """The variants timed for ``p`` on ``arch`` (wgmma ones on Hopper only), each valid."""
    key = tuning_key(p)
    table = list(SYNC_CANDIDATES.get(p.head_dim, ()))
    if hopper(arch):
        table = list(HOPPER_CANDIDATES.get(p.head_dim, ())) + table
    out = []
    for mma, bm, bn, mb, stg, *sw in table:
        flags = set(sw[0].split()) if sw else set()
        if "lpt" in flags and not p.causal:  # every row block is as long: nothing to order
            continue
        q = replace(key, block_m=bm, block_n=bn, min_blocks=mb, stages=stg, mma=mma,
                    pack_p="pack" in flags, lpt="lpt" in flags, mbar="mbar" in flags,
                    pingpong="pingpong" in flags, ws="ws" in flags,
                    lazy="lazy" in flags)  # fmt: skip
        if check_params(q) is None:
            out.append(q)
    return tuple(out)


def default_choice(p: AttnParams, arch: str, how: str = "default") -> AttnChoice:
    """The fixed choice: :data:`DEFAULT_TILES`, wgmma on Hopper where it applies (causal head
    dim 128 in longest-first order; from :data:`LONG_KEYS` keys :data:`DEFAULT_LONG`)."""
    bm, bn, mb, stg = DEFAULT_TILES.get(p.head_dim, (64, 64, 0, 2))
    q = replace(tuning_key(p), block_m=bm, block_n=bn, min_blocks=mb, stages=stg)
    if hopper(arch) and check_params(replace(q, mma="wgmma")) is None:
        q = replace(q, mma="wgmma")
        lpt = replace(q, lpt=True)
        if p.causal and p.head_dim in DEFAULT_LPT and check_params(lpt) is None:
            q = lpt
        bm, bn, mb, stg = DEFAULT_LONG
        long = replace(q, block_m=bm, block_n=bn, min_blocks=mb, stages=stg, mma="wgmma_ovl",
                       mbar=True, ws=True, pingpong=True, lazy=True, lpt=p.causal)  # fmt: skip
        if p.head_dim == 128 and p.sk >= LONG_KEYS and check_params(long) is None:
            q = long
    return AttnChoice(q.block_m, q.block_n, q.min_blocks, q.stages, q.mma, how, lpt=q.lpt,
                      mbar=q.mbar, pingpong=q.pingpong, ws=q.ws, lazy=q.lazy)  # fmt: skip


def pick(
    p: AttnParams, arch: str, cands: tuple[AttnParams, ...], ms: tuple[float, ...]
) -> AttnChoice:
    """The fastest candidate; the default choice when it is within :data:`TIE` of the fastest
    (timings repeat to 1-2%: a near tie keeps the measured table's choice) or when every
    candidate failed; else the first of equal times (the table's order: deterministic)."""
    times = tuple((label(c), float(t)) for c, t in zip(cands, ms, strict=True))
    best = min((i for i, t in enumerate(ms) if math.isfinite(t)), key=lambda i: ms[i], default=None)
    dflt = default_choice(p, arch)
    if best is None:
        return replace(dflt, times=times)
    fallback = [i for i, c in enumerate(cands) if apply(c, dflt) == c]
    if fallback and ms[fallback[0]] <= ms[best] * (1 + TIE):
        best = fallback[0]
    c = cands[best]
    return AttnChoice(
        c.block_m,
        c.block_n,
        c.min_blocks,
        c.stages,
        c.mma,
        "timed",
        times,
        c.pack_p,
        c.lpt,
        c.mbar,
        c.pingpong,
        c.ws,
        c.lazy,
    )
