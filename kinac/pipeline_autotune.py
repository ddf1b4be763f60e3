"""Autotuning of the fused attention kernel, cached by the rule engine.

    gpu_kernel_llvm(GpuKernel "attention") ─► tuned_kernel ─► attention_tiles((arch, params,
                                                              GENERATOR_VERSION, mode))
                                                        mode ◄─ attention_autotune_mode (input)

A fused attention kernel's tiles, pipeline stages and tensor-core instruction are chosen per
(arch, shapes and strides, dtype, mask) by ``attention_tiles``: on a GPU it times every
candidate (:func:`kinac.ir.gpu.attention_tune.candidates`) once and keeps the fastest. The
query's value is an ordinary persisted memo (a :class:`~kinac.ir.gpu.attention_tune.AttnChoice`
record, encoded by the codec: no pickle), content-addressed by its key, so a second process
(or a second entry with the same attention) finds it and times nothing; a changed shape is a
new key and is tuned. The key holds the generator's version, and the query's identity the
hash of its code (kernel generator included), so code that emits different kernels never
reuses an old measurement.

``mode`` is an input query (the only kind allowed to look at the world): ``off`` when
``KINAC_AUTOTUNE=0``, ``timed <device> <arch>`` when a timer is present (``db.context
["attention_timer"]``, as the tests give a fake one, else the GPU when the CUDA driver sees
one), else ``default``. Being in the key, it keeps a default choice made on a machine without
a GPU (CI, cross-compiling: deterministic, :func:`~kinac.ir.gpu.attention_tune.default_choice`)
from standing in for a measurement, and a measurement on one GPU model from serving another.

Registered by :mod:`kinac.pipeline` (its last lines import this module); called by
``gpu_kernel_llvm`` (:mod:`kinac.pipeline_gpu`) for every kernel whose source is attention, so
the launch plan and the PTX see the same choice.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Protocol

from kinac.rules import Database, input_query, query
from kinac.rules.codec import decode, encode

if TYPE_CHECKING:  # the IR package loads lazily (tests/test_layers.py)
    from kinac.ir.gpu.attention_params import AttnParams
    from kinac.ir.gpu.attention_tune import AttnChoice

TIMER_KEY = "attention_timer"


class AttentionTimer(Protocol):
    """Times candidate kernels; ``device`` names what it times on (``NVIDIA H200 sm_90``)."""

    device: str

    def time(self, cands: tuple[AttnParams, ...], arch: str) -> tuple[float, ...]:
        """Milliseconds per launch of each candidate (``inf`` for one that failed)."""
        ...


class GpuTimer:
    """The real timer: each candidate compiled to PTX here and timed on the current GPU by
    :func:`kinac.rt.cuda.kernel_timer.time_isolated`, in a child process (on buffers of the
    attention's sizes): a candidate that hangs or faults is ``inf``, named once by a
    ``kinac: note:`` line, and cached as failed with the query's value like any failed
    timing; the caller's process and CUDA context never run it."""

    timeout_s = (
        8.0  # per candidate (a timing is ~20 ms of launches); a first also gets start-up time
    )
    total_s = 120.0  # per tuning
    noted: set[str] = set()  # variants already named in a note by this process

    def __init__(self, device: str) -> None:
        self.device = device

    def time(self, cands: tuple[AttnParams, ...], arch: str) -> tuple[float, ...]:
        from kinac.codegen.ptx import compile_ptx
        from kinac.ir.gpu.attention_kernel import attention_llvm_ir, grid, kernel_name, smem_bytes
        from kinac.ir.gpu.attention_tune import label
        from kinac.rt.cuda.kernel_timer import TimedKernel, time_isolated

        jobs = tuple(
            TimedKernel(
                compile_ptx(attention_llvm_ir((c,)), arch),
                kernel_name(c),
                grid(c),
                c.threads,
                smem_bytes(c),
            )  # fmt: skip
            for c in cands
        )
        try:
            ms, failed = time_isolated(
                jobs, buffer_bytes(cands[0]), random_fill(cands[0].dtype), device=self.ordinal(),
                timeout_s=self.timeout_s, total_s=self.total_s,
            )  # fmt: skip
        except Exception:  # noqa: BLE001 - no memory, a busy device: the default is built
            return (math.inf,) * len(cands)
        skipped = [f for f in failed if f.what == "not timed"]
        for f in failed:
            name = label(cands[f.index])
            if f.what != "not timed" and name not in self.noted:
                self.noted.add(name)
                self.note(f"attention autotuning: variant '{name}' {f.what} ({f.detail}); not used")
        if skipped:
            self.note(
                f"attention autotuning: {len(skipped)} variant(s) not timed: {skipped[0].detail}"
            )
        return ms

    @staticmethod
    def note(text: str) -> None:
        """One ``kinac: note:`` line on stderr."""
        import sys

        print(f"kinac: note: {text}", file=sys.stderr)

    @staticmethod
    def ordinal() -> int:
        """The GPU the caller's context is on (the child times there)."""
        from kinac.rt.cuda.device import current_device

        return current_device().ordinal


def buffer_bytes(p: AttnParams) -> tuple[int, ...]:
    """Bytes of each kernel argument (out, inputs...) that the strides of ``p`` can reach."""

    def extent(strides: tuple[int, ...], dims: tuple[int, ...], off: int = 0) -> int:
        """The index of the last row's (element's) start."""
        return off + sum((n - 1) * s for n, s in zip(dims, strides, strict=True))

    from kinac.ir.gpu.attention_params import MASK_DTYPES

    rows_q, rows_k = (p.batch, p.heads, p.sq), (p.batch, p.kv_heads, p.sk)
    sizes = [0] * (p.n_inputs + 1)
    sizes[0] = 2 * (extent(p.o_strides, rows_q) + p.head_dim)
    for which, (strides, rows) in enumerate(
        ((p.q_strides, rows_q), (p.k_strides, rows_k), (p.v_strides, rows_k))
    ):
        arg = 1 + p.args[which]
        need = 2 * (extent(strides, rows, p.offsets[which]) + p.head_dim)
        sizes[arg] = max(sizes[arg], need)
    if p.mask_arg >= 0:
        isz = MASK_DTYPES[p.mask_dtype][1]
        dims = (p.batch, p.heads, p.sq, p.sk)
        sizes[1 + p.mask_arg] = max(
            sizes[1 + p.mask_arg], isz * (extent(p.mask_strides, dims, p.mask_offset) + 1)
        )
    return tuple(sizes)


def random_fill(dtype: str, n: int = 4096) -> bytes:
    """``n`` standard-normal values of ``dtype`` (bf16 or f16; seeded: the same bytes in every
    process) as the timer's buffer pattern."""
    import random
    import struct

    rng = random.Random(0)
    vals = [rng.gauss(0.0, 1.0) for _ in range(n)]
    if dtype == "f16":
        return struct.pack(f"<{n}e", *vals)
    raw = struct.pack(f"<{n}f", *vals)  # bf16: the high half of each f32
    return b"".join(raw[4 * i + 2 : 4 * i + 4] for i in range(n))


_GPU: list[Any] = []  # the process's GpuTimer (or None: no GPU), found once


def gpu_timer(db: Database, key: str, found: list[Any], make: Callable[[str], Any]) -> Any:
    """The timer a test or tool put in the database's context under ``key``, else the one
    ``make(device name)`` built for this process's GPU (kept in ``found``; None without a
    usable CUDA device). Shared by the attention and GEMM autotuners."""
    t = db.context.get(key)
    if t is not None:
        return t
    if not found:
        try:
            from kinac.rt.cuda import driver

            if driver.available():
                from kinac.rt.cuda.kernel_timer import device_name

                found.append(make(device_name()))
            else:
                found.append(None)
        except Exception:  # noqa: BLE001 - no usable CUDA here: the default choice
            found.append(None)
    return found[0]


def find_timer(db: Database) -> AttentionTimer | None:
    """The context's timer, else the GPU's (None without a CUDA device)."""
    return gpu_timer(db, TIMER_KEY, _GPU, GpuTimer)  # type: ignore[no-any-return]


def autotune_mode(db: Database, find: Callable[[Database], Any]) -> str:
    """An autotuning input query's value: ``off`` (``KINAC_AUTOTUNE=0``; no device probed),
    ``timed <device>`` (``find`` gave a timer) or ``default`` (no timer)."""
    if os.environ.get("KINAC_AUTOTUNE", "").strip() == "0":
        return "off"
    timer = find(db)
    return f"timed {timer.device}" if timer is not None else "default"


@input_query("attention_autotune_mode")
def attention_autotune_mode(db: Database, _: tuple[()]) -> str:
    """``off`` (``KINAC_AUTOTUNE=0``), ``timed <device>`` or ``default`` (no timer)."""
    return autotune_mode(db, find_timer)


def base_arch(arch: str) -> str:
    return arch[:-1] if arch.endswith("a") else arch


@query("attention_tiles", stage="codegen", tools=("llvmlite",))
def attention_tiles(db: Database, key: tuple[str, AttnParams, str, str]) -> AttnChoice:
    """The variant of the attention ``key[1]`` (tuned fields canonical) to build for arch
    ``key[0]``: timed on the device when ``mode`` says so and the device is of that arch."""
    from kinac.ir.gpu import attention_tune as at
    from kinac.ir.gpu.attention_kernel import flops

    arch, p, version, mode = key
    del version  # in the key only: a new generator is a new key
    if mode == "off":
        return at.default_choice(p, arch, "off")
    if flops(p) < at.MIN_TUNE_FLOPS:  # not worth seconds of compiles
        return at.default_choice(p, arch, "small")
    timer = find_timer(db) if mode.startswith("timed ") else None
    if timer is None or base_arch(mode.rsplit(" ", 1)[-1]) != base_arch(arch):
        return at.default_choice(p, arch)
    cands = at.candidates(p, arch)
    return at.pick(p, arch, cands, tuple(timer.time(cands, arch)))


def kernel_arch(db: Database) -> str:
    """The architecture attention kernels are built for (sm_90 becomes sm_90a, as
    :func:`kinac.ir.gpu.attention_lower.entry_arch` makes an entry holding one)."""
    from kinac.pipeline import target

    arch = target(db, ()).arch
    return "sm_90a" if arch == "sm_90" else arch


def tuned_params(db: Database, p: AttnParams) -> AttnParams:
    """``p`` as the tuning for this target chooses it."""
    from kinac.ir.gpu.attention_tune import GENERATOR_VERSION, apply, tuning_key

    key = (kernel_arch(db), tuning_key(p), GENERATOR_VERSION, attention_autotune_mode(db, ()))
    return apply(p, attention_tiles(db, key))


def tuned_kernel(db: Database, kernel: Any) -> Any:
    """A fused attention :class:`~kinac.artifacts.gpu.GpuKernel` with its tuned parameters
    (same symbol: the launch plan names it); any other kernel unchanged."""
    if kernel.source != "attention":  # kinac.ir.gpu.attention_lower.SOURCE
        return kernel
    from kinac.ir.gpu.attention_params import AttnParams

    p = decode(kernel.text.encode())
    assert isinstance(p, AttnParams)
    q = tuned_params(db, p)
    return kernel if q == p else replace(kernel, text=encode(q).decode())
