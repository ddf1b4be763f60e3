"""A stress driver for any MemoryResource: mixed sizes, random lifetimes, many operations.

Used by the soak test (a million operations through the pool on the GPU), by its small CPU
variant (the pool over a :class:`~kinac.rt.cuda.resources.VirtualResource`) and by the bench.
The operation sequence is generated up front (sizes and which live block to free), so the timed
loop measures the allocator, not the random number generator.

Sizes: 70% small (256 B to 64 KiB), 25% medium (64 KiB to 4 MiB), 5% large (4 to 64 MiB),
log-uniform within each class; the number of live blocks random-walks between ``low`` and
``high``.
"""

from __future__ import annotations

import math
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from kinac.rt.cuda.resources import MemoryResource

KiB = 1 << 10
MiB = 1 << 20
SIZE_CLASSES = ((0.70, 256, 64 * KiB), (0.25, 64 * KiB, 4 * MiB), (0.05, 4 * MiB, 64 * MiB))


def mixed_size(rng: random.Random) -> int:
    """One size from the mix above."""
    r = rng.random()
    acc = 0.0
    for p, lo, hi in SIZE_CLASSES:
        acc += p
        if r < acc:
            return int(math.exp(rng.uniform(math.log(lo), math.log(hi))))
    return SIZE_CLASSES[-1][2]


def generate(nops: int, seed: int = 0, low: int = 1500, high: int = 2500) -> list[int]:
    """Operations: ``n >= 0`` allocates n bytes, ``-1 - j`` frees live block j (swap-remove)."""
    rng = random.Random(seed)
    ops: list[int] = []
    live = 0
    for _ in range(nops):
        if live < low or (live < high and rng.random() < 0.5):
            ops.append(mixed_size(rng))
            live += 1
        else:
            ops.append(-1 - rng.randrange(live))
            live -= 1
    return ops


@dataclass
class SoakResult:
    """What a soak run measured."""

    ops: int
    seconds: float
    stats_at_end_of_ops: dict[str, float]
    reserved_baseline: float
    reserved_after_release: float
    allocated_after_free: float
    checkpoints: int
    extra: dict[str, float] = field(default_factory=dict)

    @property
    def us_per_op(self) -> float:
        """Microseconds per operation (allocator calls plus the loop)."""
        return self.seconds / max(self.ops, 1) * 1e6


Checkpoint = Callable[[list[tuple[int, int]]], None]


def run(
    pool: MemoryResource,
    ops: list[int],
    *,
    stream: int = 0,
    every: int = 100_000,
    checkpoint: Checkpoint | None = None,
) -> SoakResult:
    """Run ``ops`` through ``pool``; call ``checkpoint(live)`` (ptr, size pairs) every ``every``
    operations (outside the timed part); free everything and release at the end."""
    live: list[tuple[int, int]] = []
    alloc = pool.allocate
    free = pool.deallocate
    baseline = pool.memory_stats()["reserved_bytes.all.current"]
    seconds = 0.0
    checkpoints = 0
    for start in range(0, len(ops), every):
        t0 = time.perf_counter()
        for o in ops[start : start + every]:
            if o >= 0:
                live.append((alloc(o, stream), o))
            else:
                j = -1 - o
                live[j], live[-1] = live[-1], live[j]
                p, n = live.pop()
                free(p, n, stream)
        seconds += time.perf_counter() - t0
        if checkpoint is not None:
            checkpoint(live)
            checkpoints += 1
    stats = pool.memory_stats()
    for p, n in live:
        free(p, n, stream)
    after_free = pool.memory_stats()["allocated_bytes.all.current"]
    release = getattr(pool, "release", None)
    if release is not None:
        release()
    return SoakResult(
        ops=len(ops),
        seconds=seconds,
        stats_at_end_of_ops=stats,
        reserved_baseline=baseline,
        reserved_after_release=pool.memory_stats()["reserved_bytes.all.current"],
        allocated_after_free=after_free,
        checkpoints=checkpoints,
    )
