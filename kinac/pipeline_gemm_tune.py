"""Autotuning of the entries' cuBLAS calls, cached by the rule engine (issue 14).

    gpu_lowered ─► tuned_gemms ─► gemm_algo((arch, canonical GpuGemm, GEMM_TUNE_VERSION, mode))
                                                  mode ◄─ gemm_autotune_mode (input)

cuBLAS's first heuristic answer is not always its fastest algorithm for a shape (the 45M
block's projections ran at 700-840 of the H200's ~989 dense bf16 TFLOP/s). For each bf16/f16
GEMM of an entry, ``gemm_algo`` times once, on the GPU, today's binding against cuBLASLt's
top-N algorithms and (for a grouped ``pointers`` call) the members issued one by one
(:mod:`kinac.rt.cuda.blas_tune`), and keeps the fastest; today's binding wins ties (within
``TIE``), so tuning can only keep or improve a call. The value is an ordinary persisted memo
(:class:`~kinac.artifacts.gemm_algo.GemmTuned`: the algorithm's 64 bytes as data, no pickle),
keyed by the GEMM with its buffers renamed canonically (:func:`canonical`: sizes, dtypes,
layouts, offsets, epilogue, batch and grouping; not which entry's buffers), so a second
process, or another entry with the same product, times nothing.

``mode`` is an input query: ``off`` under ``KINAC_AUTOTUNE=0``, ``timed <device> <arch>``
where a timer is present (``db.context["gemm_timer"]``, as the tests give a fake one, else the
GPU), else ``default``. Without a timer (CI, here) and with ``off`` no GEMM query runs and the
entry is exactly today's. A choice reaches the runtime as :attr:`GpuGemm.algo
<kinac.artifacts.gpu.GpuGemm.algo>`, which :meth:`kinac.rt.cuda.blas.Blas.bind` re-validates.

f32/f64 products are not tuned: their compute type (TF32 or not) is a load-time option the
compiler does not see. Products under ``MIN_TUNE_FLOPS`` are not worth the timing.

Registered by :mod:`kinac.pipeline` (its last lines import this module); called by
:func:`kinac.pipeline_gpu.lower_graph` on every GPU lowering.
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Protocol

from kinac.pipeline_autotune import autotune_mode, base_arch, gpu_timer
from kinac.rules import Database, input_query, query

if TYPE_CHECKING:
    from kinac.artifacts.gemm_algo import GemmAlgo, GemmTuned
    from kinac.artifacts.gpu import GpuGemm

TIMER_KEY = "gemm_timer"
# candidates or binding changed: a new key, re-timed (2: grouped calls strided once bound;
# 3: candidates timed as graphs, interleaved after a warm-up, top-32 asked, a grouped lt
# choice's alternative kept)
GEMM_TUNE_VERSION = 3
TIE = 0.01  # a candidate must beat today's binding by more than 1% (timings repeat to ~1%)
# cuBLASLt heuristic answers asked per GEMM (for the 45M block's products cuBLAS 13.1 gives 8
# whatever is asked: docs/measurements/gemm_45m_2026-12-02d.md)
N_ALGOS = 32
TUNED_DTYPES = ("bf16", "f16")
MIN_TUNE_FLOPS = 1 << 30  # about a 1024 x 512 x 1024 product


class GemmTimer(Protocol):
    """Times the ways to issue a GEMM; ``device`` names what it times on."""

    device: str

    def time(self, g: GpuGemm, arch: str) -> tuple[tuple[GemmAlgo, float], ...]:
        """Each candidate and its milliseconds per call (``inf``: failed or wrong); the
        first is today's binding (``GemmAlgo("today")``)."""
        ...


class GpuGemmTimer:
    """The real timer: :func:`kinac.rt.cuda.blas_tune.time_gemm` on the current GPU."""

    def __init__(self, device: str) -> None:
        self.device = device
        # this process's measurements: sessions without a persistent store (tests, benches
        # with no_cache) compiling the same GEMM do not time it again
        self.seen: dict[GpuGemm, tuple[tuple[GemmAlgo, float], ...]] = {}

    def time(self, g: GpuGemm, arch: str) -> tuple[tuple[GemmAlgo, float], ...]:
        from kinac.artifacts.gemm_algo import GemmAlgo
        from kinac.rt.cuda.blas_tune import time_gemm

        hit = self.seen.get(g)
        if hit is not None:
            return hit
        try:
            res = time_gemm(g, N_ALGOS)
        except Exception:  # noqa: BLE001 - no memory, no cuBLAS: today's binding is kept
            res = ((GemmAlgo("today"), math.inf),)
        self.seen[g] = res
        return res


_GPU: list[Any] = []  # the process's GpuGemmTimer (or None: no GPU), found once


def find_timer(db: Database) -> GemmTimer | None:
    """The context's timer, else the GPU's (None without a CUDA device)."""
    return gpu_timer(db, TIMER_KEY, _GPU, GpuGemmTimer)  # type: ignore[no-any-return]


@input_query("gemm_autotune_mode")
def gemm_autotune_mode(db: Database, _: tuple[()]) -> str:
    """``off`` (``KINAC_AUTOTUNE=0``), ``timed <device>`` or ``default`` (no timer)."""
    return autotune_mode(db, find_timer)


def canonical(g: GpuGemm) -> GpuGemm:
    """``g`` with its buffers renamed ``buf0``, ``buf1``... in order of first use (which
    operands share a buffer is kept; which entry's buffers they are is not) and no choice."""
    names: dict[str, str] = {}

    def nm(n: str) -> str:
        return names.setdefault(n, f"buf{len(names)}")

    def op(o: Any) -> Any:
        return replace(o, buf=nm(o.buf), bufs=tuple(nm(b) for b in o.bufs))

    a, b, c = op(g.a), op(g.b), op(g.c)
    return replace(g, a=a, b=b, c=c, epi=nm(g.epi) if g.epi else "", algo=None)


def tunable(g: GpuGemm) -> bool:
    """Worth timing: a bf16/f16 product of at least ``MIN_TUNE_FLOPS`` that cuBLAS(Lt) can
    issue in more than one way here (an epilogue on a batch has one: the classic fallback)."""
    if g.dtype not in TUNED_DTYPES or g.flops < MIN_TUNE_FLOPS:
        return False
    return not (g.epilogue and g.batch > 1)


def pick(res: tuple[tuple[GemmAlgo, float], ...]) -> GemmTuned:
    """The fastest candidate, if it beats today's (``res[0]``) by more than ``TIE``; else
    today's. Either way the choice carries its time and today's. A grouped call's strided
    ``lt`` choice also carries the fastest ``split``/``split-lt`` that beats today's, for
    callers whose tensors lie at no common stride (:attr:`GemmAlgo.alt_how`)."""
    from kinac.artifacts.gemm_algo import GemmAlgo, GemmTuned

    times = tuple((c.label, ms) for c, ms in res)
    base = res[0][1] if res and res[0][0].how == "today" else math.inf
    if not math.isfinite(base):  # today's did not run: nothing to compare with
        return GemmTuned("timed", None, times)
    best, best_ms = GemmAlgo("today"), base
    alt, alt_ms = GemmAlgo("today"), base  # the best that binds at any addresses
    for c, ms in res[1:]:
        if ms < base * (1.0 - TIE) and ms < best_ms:
            best, best_ms = c, ms
        if c.how in ("split", "split-lt") and ms < base * (1.0 - TIE) and ms < alt_ms:
            alt, alt_ms = c, ms
    if best.how == "lt" and alt.how != "today":  # a grouped call's strided form: see alt_how
        best = replace(best, alt_how=alt.how, alt_algo=alt.algo, alt_index=alt.index)
    return GemmTuned("timed", replace(best, ms=best_ms, base_ms=base), times)


@query("gemm_algo", stage="codegen")
def gemm_algo(db: Database, key: tuple[str, GpuGemm, int, str]) -> GemmTuned:
    """How to issue GEMM ``key[1]`` (canonical) on arch ``key[0]``: timed on the device when
    ``mode`` says so and the device is of that arch."""
    from kinac.artifacts.gemm_algo import GemmTuned

    arch, g, version, mode = key
    del version  # in the key only: new candidates are a new key
    if mode == "off":
        return GemmTuned("off")
    if not tunable(g):
        return GemmTuned("skipped")
    timer = find_timer(db) if mode.startswith("timed ") else None
    if timer is None or base_arch(mode.rsplit(" ", 1)[-1]) != base_arch(arch):
        return GemmTuned("default")
    return pick(tuple(timer.time(g, arch)))


def tuned_gemms(db: Database, lowered: Any) -> Any:
    """A GPU lowering (:class:`~kinac.artifacts.gpu.GpuLoweredEntry`) with each tunable
    GEMM's timed choice attached; unchanged without a timer or under ``KINAC_AUTOTUNE=0``."""
    if lowered is None:
        return lowered
    mode = gemm_autotune_mode(db, ())
    if not mode.startswith("timed "):
        return lowered  # nothing to time: today's binding, and no query run for it
    from kinac.pipeline import target

    arch = target(db, ()).arch
    steps, changed = [], False
    for s in lowered.steps:
        g = s.gemm
        if g is not None and tunable(g):
            t = gemm_algo(db, (arch, canonical(g), GEMM_TUNE_VERSION, mode))
            if t.algo is not None:
                s = replace(s, gemm=replace(g, algo=t.algo))
                changed = True
        steps.append(s)
    return replace(lowered, steps=tuple(steps)) if changed else lowered
