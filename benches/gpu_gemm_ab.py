"""The 45M block's grouped GEMMs issued each way, timed in one process (issue 14).

Since ddc9336 a grouped call (k+v, gate+up) whose bound addresses lie at one stride per
operand is one strided-batched cuBLAS call; before, it was a pointer-array call (cuBLAS's
``..._ptrBatch_...`` kernel, which under graph capture put memory nodes in the entry's graph).
This times, through the GEMM tuner's own measurement (:func:`kinac.rt.cuda.blas_tune.time_gemm`:
the runtime's binding, outputs checked against the first candidate), each grouped GEMM of
the block as today's binding (strided), as the pointer-array call (``strided_form`` patched to
refuse, this process only), split into two plain calls, and cuBLASLt's first strided
heuristic answers. Called by ``benches/gpu.py`` (no bench marker of its own).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

BLOCK_45M = (4, 1024, 2048, 16, 4, 5632)


def gemm_forms(emit: Callable[[str], None], results: dict[str, Any]) -> None:
    """Emit the table (see the module docstring)."""
    from kinac.ir.gpu.pipeline import lower_graph_gpu
    from kinac.ir.testing import block_graph
    from kinac.pipeline_gemm_tune import canonical
    from kinac.rt.cuda import blas, blas_tune

    lo = lower_graph_gpu(block_graph(*BLOCK_45M, "bf16"))
    emit("\n## The 45M bf16 block's grouped GEMMs, each way (tuner's timing, us per call)\n")
    emit("| step | GEMM | strided (today) | pointer arrays (before) | split | split-lt#0 | lt#0 | lt#1 |")  # fmt: skip
    emit("|---|---|---|---|---|---|---|---|")
    rows = []
    for s in lo.steps:
        g = s.gemm
        if g is None or g.mode != "pointers":
            continue
        g = canonical(g)
        now = dict((a.label, t) for a, t in blas_tune.time_gemm(g, n=2))
        old = blas.strided_form
        blas.strided_form = lambda *a: None  # type: ignore[assignment]  # the pointer arrays
        try:
            before = dict((a.label, t) for a, t in blas_tune.time_gemm(g, n=0))
        finally:
            blas.strided_form = old

        def us(t: float | None) -> str:
            return "-" if t is None or math.isinf(t) else f"{t * 1e3:.1f}"

        how = f"b={g.batch} {g.m}x{g.n}x{g.k}"
        cells = [now.get("today"), before.get("today"), now.get("split"), now.get("split-lt#0"),
                 now.get("lt#0"), now.get("lt#1")]  # fmt: skip
        emit(f"| {s.sym} | {how} | " + " | ".join(us(c) for c in cells) + " |")
        rows.append(dict(step=s.sym, gemm=how, strided=cells[0], pointers=cells[1], others=now))
    results["gemm_forms"] = rows
