"""Whole-entry A/B timing at the GPU's steady state (issue 14): what ``benches/gpu.py``'s GEMM
tuning section and ``benches/gemm_tune_ab.py`` use to compare entries whose difference is a
few percent.

Why not ``time_ms`` of ``benches/gpu.py`` (70 calls after one warm-up call): the H200 runs the
45M block at its 700 W power cap, where the SM clock sits between about 1.5 and 1.9 GHz, but a
GPU that idled for a second starts at 1.98 GHz and needs some 50 ms of load to come down. On
2026-12-02 the tuning section timed the tuned entry right after such an idle (while it lowered
the graph again) and reported 0.588 ms against 0.632 for today's binding; timed the other way
round after the same idle, today's binding ran at 0.579 and the tuned entry at 0.626
(``docs/measurements/gemm_45m_2026-12-02d.md``). Here every variant is called before timing,
the GPU is kept busy for ``warm_s`` first, and then each round times every variant once (the
order rotating), with ``calls`` calls issued back to back and one sync, as the headline's
pipelined figure does: host wall time per call (pipelined) and CUDA events (GPU time per
call). Each figure is the median over the rounds.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from typing import Any


def steady_ab(
    fns: dict[str, Callable[[], Any]], calls: int = 30, rounds: int = 10, warm_s: float = 1.0
) -> dict[str, dict[str, float]]:
    """``{name: {"pipe_ms", "events_ms", "min_events_ms"}}`` for each variant (see above)."""
    import torch

    for f in fns.values():
        f()
    torch.cuda.synchronize()
    first = next(iter(fns.values()))
    end = time.perf_counter() + warm_s
    while time.perf_counter() < end:
        for _ in range(10):
            first()
        torch.cuda.synchronize()
    names = list(fns)
    pipe: dict[str, list[float]] = {n: [] for n in names}
    ev: dict[str, list[float]] = {n: [] for n in names}
    for r in range(rounds):
        k = r % len(names)
        for n in names[k:] + names[:k]:
            f = fns[n]
            e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            e0.record()
            for _ in range(calls):
                f()
            e1.record()
            torch.cuda.synchronize()
            pipe[n].append((time.perf_counter() - t0) * 1e3 / calls)
            ev[n].append(e0.elapsed_time(e1) / calls)
    return {
        n: {
            "pipe_ms": statistics.median(pipe[n]),
            "events_ms": statistics.median(ev[n]),
            "min_events_ms": min(ev[n]),
        }
        for n in names
    }
