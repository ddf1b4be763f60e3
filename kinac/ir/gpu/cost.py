"""A cost estimate of a GPU launch plan, from its records alone (no GPU).

Why: a plan can be correct and still catastrophically slow (the 45M block's gradient spent
~280 ms of 305 ms in one thread adding 8.4M values), and there is not always a GPU to measure
it. Each :class:`~kinac.artifacts.gpu.GpuStep` says what it moves (``bytes_moved``), what a
cuBLAS call computes (``GpuGemm.flops``) and how each generated launch is shaped (grid, block,
and in its note the serial steps a thread runs: ``C=`` unrolled chunks of a row kernel,
``N steps`` of a loop); this module turns that into a time per step:

* the *floor*: bytes at the memory bandwidth, or FLOPs at the dtype's peak, whichever is
  longer (what a perfect kernel of that step would take);
* the *estimate*: the floor, or the serial term when longer: a thread's serial steps at
  :data:`STEP_S` each, times the waves of threads the GPU runs one after another.

The ceilings are the H200's (4 TB/s, 740 TFLOP/s bf16/f16, 50 TFLOP/s f32 as cuBLAS reaches
without TF32). :data:`STEP_S` is calibrated on the 2026-12-01 H200 run: the one-thread loss
reduction of the 45M block (8.4M steps) cost ~280 ms in f32 and ~150 ms in bf16, i.e. 18-33
ns a step; 20 ns is the lower end. An estimate, not a measurement: it ignores launch gaps,
caches, occupancy limits and tensor-core efficiency, and is meant to rank steps and to catch
serial or starved kernels (``tests/test_grad_gpu_plan.py``).
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass

from kinac.artifacts.gpu import GpuLaunch, GpuLoweredEntry, GpuStep
from kinac.artifacts.host import BufferSpec
from kinac.ir.gpu.plan import SMS

BANDWIDTH = 4.0e12  # bytes/s
PEAK = {"bf16": 740e12, "f16": 740e12, "f32": 50e12, "f64": 50e12}  # FLOP/s
STEP_S = 20e-9
RESIDENT = SMS * 2048  # threads the GPU holds at once (2048 per SM)


@dataclass(frozen=True)
class StepCost:
    """One step's estimate: ``serial`` is the longest serial loop of a thread (steps),
    ``threads`` the threads of its largest launch (0 for a library call)."""

    index: int
    sym: str
    kind: str
    impl: str
    dtype: str
    shape: tuple[int, ...]
    bytes: int
    flops: int
    threads: int
    serial: int
    floor_s: float
    est_s: float
    what: str


def serial_steps(launch: GpuLaunch) -> int:
    """The serial steps one thread of ``launch`` runs (its note: ``N steps`` of a loop, or a
    row kernel's ``C=`` unrolled chunks; 1 for a map)."""
    m = re.search(r"(\d+) steps", launch.note)
    if m:
        return int(m.group(1))
    m = re.search(r"\bC=(\d+)", launch.note)
    if m:
        return int(m.group(1))
    m = re.search(r"unroll (\d+)", launch.note)
    return int(m.group(1)) if m else 1


def attention_flops(step: GpuStep) -> int:
    """The FLOPs of a fused attention step (``[B, H, S, Dh]`` out): ``Q K^T`` and ``P V``,
    ``4 B H S^2 Dh``, taking the keys as many as the queries (self-attention: the step does
    not record the keys' length) and not crediting a causal kernel for the tiles it skips;
    0 for any other step. Without it the flash kernel's floor was its bytes alone."""
    if step.kind == "attention" and len(step.shape) == 3:  # tokens-major [B, S, H*Dh] out
        b, s, hd = step.shape  # (or heads-major [H, S, Dh]: the same product)
        return 4 * b * s * s * hd
    if step.kind != "attention" or len(step.shape) != 4:
        return 0
    b, h, s, d = step.shape
    return 4 * b * h * s * s * d


def step_cost(index: int, step: GpuStep) -> StepCost:
    """The estimate of one step (see the module docstring)."""
    mem = step.bytes_moved / BANDWIDTH
    if step.gemm is not None:
        g = step.gemm
        flops = g.flops
        floor = max(mem, flops / PEAK.get(g.dtype, PEAK["f32"]))
        t = "".join(("A" if g.a.trans else "") + ("B" if g.b.trans else ""))
        what = f"{step.impl} {g.mode} m={g.m} n={g.n} k={g.k} batch={g.batch}"
        what += f" trans={t}" if t else ""
        return StepCost(index, step.sym, step.kind, step.impl, step.dtype, step.shape,
                        step.bytes_moved, flops, 0, 0, floor, floor, what)  # fmt: skip
    flops = attention_flops(step)
    floor = max(mem, flops / PEAK.get(step.dtype, PEAK["f32"]))
    est, threads, serial = floor, 0, 0
    for f in step.launches:
        n = f.grid * f.grid_yz[0] * f.grid_yz[1] * f.block
        s = serial_steps(f)
        threads, serial = max(threads, n), max(serial, s)
        est = max(est, s * STEP_S * math.ceil(n / RESIDENT))
    notes = "; ".join(f"grid={f.grid} block={f.block} {f.note}".strip() for f in step.launches)
    return StepCost(index, step.sym, step.kind, step.impl, step.dtype, step.shape,
                    step.bytes_moved, flops, threads, serial, floor, est, notes)  # fmt: skip


def estimate_steps(steps: Sequence[GpuStep]) -> list[StepCost]:
    return [step_cost(i, s) for i, s in enumerate(steps)]


def _us(s: float) -> str:
    return f"{s * 1e6:,.1f}"


def table(costs: Sequence[StepCost], top: int | None = None) -> str:
    """A markdown table of ``costs`` (the ``top`` most expensive, in plan order), then the
    totals of the whole plan."""
    rows = list(costs)
    if top is not None:
        keep = {c.index for c in sorted(rows, key=lambda c: -c.est_s)[:top]}
        rows = [c for c in rows if c.index in keep]
    out = [
        "| step | kind | dtype | shape | MB | GFLOP | threads | serial steps | floor us | est. us | what |",  # noqa: E501
        "|---:|---|---|---|---:|---:|---:|---:|---:|---:|---|",
    ]
    for c in rows:
        shape = "x".join(map(str, c.shape)) or "scalar"
        out.append(
            f"| {c.index} | {c.kind} | {c.dtype} | {shape} | {c.bytes / 1e6:,.1f} | "
            f"{c.flops / 1e9:,.1f} | {c.threads:,} | {c.serial:,} | {_us(c.floor_s)} | "
            f"{_us(c.est_s)} | {c.what} |"
        )
    floor = sum(c.floor_s for c in costs)
    est = sum(c.est_s for c in costs)
    out.append(f"\n{len(costs)} steps: floor {_us(floor)} us, estimate {_us(est)} us")
    return "\n".join(out)


CUBLAS_WORKSPACE = 32 << 20
"""The cuBLAS(Lt) workspace a GPU entry with library calls allocates (``WORKSPACE`` of
:mod:`kinac.rt.cuda.blas`; a test keeps the two equal: the compiler does not import the
runtime)."""


def planned_bytes(lowered: GpuLoweredEntry) -> dict[str, int]:
    """What a GPU entry needs on the device at once, by its plan: its params (the caller's
    arrays), its outputs, its scratch arena and the cuBLAS workspace; ``total`` their sum.
    Why: the memory goal of issue 12 compares this with PyTorch's peak of the same step
    (``benches/grad.py`` measures both; the runtime's pool may hold more, e.g. graph
    staging buffers, which the bench reports apart)."""
    from kinac.dtypes import ITEMSIZE

    def size(specs: Sequence[BufferSpec]) -> int:
        return sum(math.prod(b.shape) * ITEMSIZE[b.dtype] for b in specs)

    out = {
        "params": size(lowered.params),
        "outputs": size(lowered.outputs),
        "arena": lowered.arena_bytes,
        "workspace": CUBLAS_WORKSPACE if any(s.gemm for s in lowered.steps) else 0,
    }
    out["total"] = sum(out.values())
    return out
