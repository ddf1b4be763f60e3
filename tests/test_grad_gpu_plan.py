"""The GPU plan of the 45M block's gradient has no serial or starved step (issue 12).

The H200 run of 2026-12-01 measured the 45M block's forward+backward at 305.7 ms (f32) and
152.6 ms (bf16) against 27.1 / 3.98 ms for torch eager, with correct gradients: the loss
(``mean`` over the 8.4M elements of a ``[B*S*D]`` reshape) was one thread looping 8.4M times
(a reduction over a row too long for the row kernel), and each RMSNorm weight's gradient a
column sum of 512 threads looping 1024 times. ``gpu-split-reductions``
(:mod:`kinac.ir.gpu.split_reduce`) reduces them in two parallel stages. These tests read the
plan on the CPU (:mod:`kinac.ir.gpu.cost`) so it cannot silently regress, and run the split
reductions through the GPU emulator against numpy.
"""

from __future__ import annotations

import functools
import shutil
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from test_grad_models import BLOCK_LOSS, BLOCK_W

from kinac.ir.gpu.cost import RESIDENT, STEP_S, estimate_steps, serial_steps
from kinac.ir.gpu.plan import reduction_split
from kinac.ir.testing import GraphBuilder

ROOT = Path(__file__).resolve().parent.parent / "workspaces"
DIMS_45M = dict(B=4, S=1024, D=2048, H=16, KV=4, F=5632)
MAX_SERIAL = 256
"""Serial steps a thread of a generated kernel may run. At ~20 ns a step (the H200 run's
8.4M-step loop took 150-280 ms) 256 steps cost ~5 us, what 4 TB/s moves of 20 MB: below the
memory time of any 45M activation step (32-92 MB), so no step is latency-bound."""
SLACK_S = 5e-6


def _plan(tmp_path: Path, dt: str) -> list:
    return list(_lowered(dt).steps)


@functools.cache
def _lowered(dt: str) -> Any:
    """The 45M block's GPU gradient entry (lowered once per dtype for this module's tests)."""
    from kinac import pipeline_grad
    from kinac.pipeline_support import EntryKey
    from kinac.session import Session

    ws = Path(tempfile.mkdtemp(prefix="kinac-grad-plan-")) / "transformer"
    shutil.copytree(ROOT / "transformer", ws)
    (ws / "loss.kina").write_text(BLOCK_LOSS)
    key = EntryKey("loss.kina", "block-loss", tuple(sorted(DIMS_45M.items())), (("T", dt),), "cuda")
    lo = pipeline_grad.grad_gpu_lowered(Session(ws, no_cache=True).db, (key, tuple(BLOCK_W)))
    assert lo is not None
    return lo


@pytest.mark.parametrize("dt", ["f32", "bf16"])
def test_45m_gradient_plan_has_no_serial_or_starved_step(tmp_path: Path, dt: str) -> None:
    """Every matmul-shaped step is a cuBLAS call; no generated kernel's thread loops more than
    ``MAX_SERIAL`` times; no step's estimate exceeds its bandwidth/FLOP floor by more than
    5 us; the whole plan's estimate is within 2% of its floor (it was 7.7x in f32, 76x in
    bf16 before the split: one thread reducing 8.4M values)."""
    steps = _plan(tmp_path, dt)
    for s in steps:
        if s.kind == "matmul":
            assert s.impl in ("cublas", "cublasLt"), (s.sym, s.impl)
        for f in s.launches:
            assert serial_steps(f) <= MAX_SERIAL, (s.sym, s.shape, f.note)
    costs = estimate_steps(steps)
    for c in costs:
        assert c.est_s <= c.floor_s + SLACK_S, (c.index, c.kind, c.shape, c.what)
    floor, est = sum(c.floor_s for c in costs), sum(c.est_s for c in costs)
    assert est <= 1.02 * floor, (est, floor)
    # the loss is now two row kernels, the weight-norm gradients parallel column sums
    loss = [c for c in costs if c.kind == "reduce" and c.shape == ()]
    assert loss and all(c.serial <= 16 for c in loss), loss


EAGER_PEAK_MIB = {"f32": 1638, "bf16": 1090}
"""PyTorch eager's peak for the 45M block's forward+backward on the H200 (2026-12-01,
``torch.cuda.max_memory_allocated``, inputs and weights included)."""
ARENA_MIB = {"f32": (1136, 664), "bf16": (568, 312)}
"""The 45M gradient's arena before the in-place kernels (plain first fit, ``P`` kept) and
now (936 / 340 MiB before the backward was ordered for memory, ``kinac/grad/schedule.py``)."""
COMPILE_PEAK_MIB = {"f32": 1184, "bf16": 592}
"""``torch.compile``'s peak for the same step on the H200 (2026-12-01 21:35 UTC,
``benches/grad.py``, inputs and weights included): the issue's memory goal."""
PLANNED_MIB = {"f32": 1150, "bf16": 560}
"""The plan's bound, with a margin under :data:`COMPILE_PEAK_MIB` (the planner matched the
device within 2 MiB): 1104 / 548 MiB now, 1376 / 576 before the backward was ordered."""


@pytest.mark.parametrize("dt", ["f32", "bf16"])
def test_45m_gradient_planned_bytes_below_eager(dt: str) -> None:
    """The plan's device bytes (params, outputs, arena, cuBLAS workspace) are below PyTorch
    eager's and torch.compile's measured peaks: the arena shrank from 1136 to 936 MiB in f32
    (in-place kernels, free elementwise values recomputed) and from 568 to 340 MiB in bf16
    (the same, and the attention probabilities recomputed: the forward is the flash kernel);
    then to 664 / 312 MiB with the backward ordered for memory (f32 total 1104 MiB against
    compile's 1184, ``P`` still stored)."""
    from kinac.ir.gpu.cost import planned_bytes

    lo = _lowered(dt)
    plan = planned_bytes(lo)
    mib = {k: v / 2**20 for k, v in plan.items()}
    before, now = ARENA_MIB[dt]
    assert mib["arena"] <= now + 1 < before, mib  # MiB, rounded
    assert mib["total"] <= 0.9 * EAGER_PEAK_MIB[dt], mib
    assert mib["total"] <= PLANNED_MIB[dt] < COMPILE_PEAK_MIB[dt], mib
    big = [s for s in lo.steps if len(s.shape) == 4 and s.shape[-1] == s.shape[-2] == 1024]
    kinds = [s.kind for s in lo.steps]
    if dt == "bf16":  # forward: the flash kernel; S x S tensors only in the backward
        assert kinds.count("attention") == 1 and all(
            lo.steps.index(s) > kinds.index("attention") for s in big
        )
    inplace = [s for s in lo.steps if s.writes in s.reads]
    assert any(s.kind in ("row", "softmax") and s in big for s in inplace), inplace


def test_split_decisions() -> None:
    """Rows too long for the row kernel split at a divisor it takes; sparse column sums near
    ``sqrt(n)``; reductions that already fill the GPU (and prime lengths) are left alone."""
    assert reduction_split((8388608,), 0, 4) == 4096
    assert reduction_split((131072,), 0, 4) == 4096  # the small block's loss in f32
    assert reduction_split((131072,), 0, 2) is None  # bf16: 8-wide vectors, a row kernel
    assert reduction_split((1024, 2048), 0, 4) == 32
    assert reduction_split((4, 1024, 2048), 0, 4) is None  # 4 steps a thread
    assert reduction_split((4096, 2048), 1, 4) is None  # a row kernel
    assert reduction_split((4096, 262144), 0, 4) is None  # 64K threads: fills the GPU
    assert reduction_split((1000003,), 0, 4) is None  # prime: nothing to split at


def test_serial_cost_model() -> None:
    """One thread looping 8.4M times is estimated at 168 ms (the H200 measured ~280 ms f32
    and ~150 ms bf16 for it): the model's ranking is what the tests rely on."""
    from kinac.artifacts.gpu import GpuLaunch, GpuStep

    launch = GpuLaunch("k", 1, 256, (), 1, "loop over axis 0, 8388608 steps")
    step = GpuStep("k20_reduce", "reduce", "kernel", "f32", (), (), "out0", (launch,), None, 8)
    (c,) = estimate_steps([step])
    assert c.serial == 8388608 and c.threads == 256
    assert c.est_s == pytest.approx(8388608 * STEP_S)
    many = GpuLaunch("k", 4 * RESIDENT // 256, 256, (), 4, "T=32 C=8")
    assert serial_steps(many) == 8


def _run(graph, *xs):  # type: ignore[no-untyped-def]
    from gpu_support import run_emulated

    return run_emulated(graph, *xs)


@pytest.mark.parametrize("dt", ["f32", "f64", "bf16", "i32"])
def test_split_column_reductions_match_numpy(dt: str) -> None:
    """Sum, max and min (and mean for floats) over a long, narrow axis: split 32 x 32 on the
    GPU, equal to numpy on random data (integers exactly), keepdims kept; bf16 accumulates
    its partials in f32 (a cast folded into the first stage) and rounds once."""
    from kinac.ir.gpu.pipeline import split_graph_gpu
    from kinac.tir.interp import bf16_to_f32, f32_to_bf16

    rng = np.random.default_rng(7)
    g = GraphBuilder(f"col_{dt}")
    x = g.param("x", dt, (1024, 8))
    kinds = ("sum", "max", "min") + (("mean",) if dt != "i32" else ())
    outs = [g.reduce(f"reduce_{k}", x, 0, keepdims=k == "max") for k in kinds]
    graph = g.build(*outs)
    reduces = [p for p in split_graph_gpu(graph).steps if p.step.kind == "reduce"]
    assert len(reduces) == 2 * len(kinds)  # two stages each
    a = rng.integers(-1000, 1000, (1024, 8)) if dt == "i32" else rng.standard_normal((1024, 8))
    a = a.astype({"f32": np.float32, "f64": np.float64, "bf16": np.float32, "i32": np.int32}[dt])
    if dt == "bf16":
        bits = f32_to_bf16(a)
        got = [bf16_to_f32(o) for o in _run(graph, bits)]
        a = bf16_to_f32(bits)
    else:
        got = list(_run(graph, a))
    ref = {"sum": a.sum(0), "max": a.max(0, keepdims=True), "min": a.min(0), "mean": a.mean(0)}
    for k, o in zip(kinds, got, strict=True):
        want = ref[k]
        assert o.shape == want.shape, k
        if dt == "i32" or k in ("max", "min"):
            assert np.array_equal(o, want), k
        else:
            if dt == "bf16":  # one rounding of the f32 result
                assert np.all(np.abs(o - want) <= 2**-8 * np.abs(want) + 1e-6 * a.size), k
                continue
            tol = 1e-5 if dt == "f32" else 1e-12
            assert np.max(np.abs(o - want)) <= tol * np.abs(a).sum(0).max(), k


def test_split_long_row_mean_matches_numpy() -> None:
    """The loss's shape of reduction: a mean over one row too long for the row kernel (two
    row-kernel stages). f32 only: the smallest such row (65,537 values) is ~10K emulated
    threads a reduction (~5-10 s here); bf16's cast is covered by the column test."""
    dt = "f32"
    n = 70000
    g = GraphBuilder(f"row_{dt}")
    x = g.param("x", dt, (n,))
    graph = g.build(g.reduce("reduce_mean", x, 0), g.reduce("reduce_sum", x, 0))
    a = np.random.default_rng(3).standard_normal(n).astype(np.float32) + 0.25
    mean, total = _run(graph, a)
    a64 = a.astype(np.float64)
    tol = 1e-6
    assert abs(float(mean) - a64.mean()) <= tol * abs(a64.mean()) + 1e-7
    assert abs(float(total) - a64.sum()) <= tol * np.abs(a64).sum()


@pytest.mark.parametrize("dt", ["f32", "bf16"])
def test_45m_ffn_backward_holds_three_hidden_values(dt: str) -> None:
    """The FFN backward's ``[B, S, F]`` values (``g``, ``u``, ``dM``, ``dg``, ``du``): at most
    three live at any step of the plan (five before: ``du`` was made before ``dg``, and
    ``sigmoid(g)``, read twice, was a kernel of its own); ``dg`` is written over ``u`` and
    ``du`` over ``dM`` or ``g`` (in place), and no kernel writes ``sigmoid(g)`` alone."""
    lo = _lowered(dt)
    hidden = (4, 1024, 5632)
    steps = lo.steps
    spans = []  # (written at, last read before it is written again) of each hidden value
    for i, s in enumerate(steps):
        if s.shape != hidden:
            continue
        for b in (s.writes, *s.also_writes):
            end = i
            for j in range(i + 1, len(steps)):
                if b in steps[j].reads:
                    end = j
                if b in (steps[j].writes, *steps[j].also_writes):
                    break
            spans.append((i, end, b))

    # at step i: its own results, and the values written before still read at or after i
    # (but not one that step i overwrites in place: the same memory)
    def live(i: int) -> int:
        out = {b for a, _, b in spans if a == i}
        return len(out) + sum(1 for a, e, b in spans if a < i <= e and b not in out)

    most = max(live(i) for i in range(len(steps)))
    assert most <= 3, (most, spans)
    maps = [s for s in lo.steps if s.shape == hidden and s.kind == "map"]
    assert all(len(s.reads) >= 2 for s in maps), [(s.sym, s.reads) for s in maps]
    backward = [s for s in maps if s.writes in s.reads]
    assert len(backward) >= 2, [(s.sym, s.reads, s.writes) for s in maps]
