"""Products that share their left operand as one cuBLAS call (issue 14): ``x·wk`` with
``x·wv``, ``n·wg`` with ``n·wu`` (and ``x·wq`` too where it has their shape, H == KV).

Why: each cuBLAS call is a launch a CUDA graph replays; at the small block's size a launch
costs more than the product (docs/call_path.md). Adjacent plain products (no epilogue, one
matrix each) with the same sizes, dtypes, layouts and left operand become one pointer-array
batched call (``cublasGemmBatchedEx``): batch ``i`` reads its own weight buffer and writes its
own output buffer (:attr:`GemmOperand.bufs`); the runtime uploads the pointer arrays once,
when it binds the entry, so a captured graph replays one node. Plain Python (no xDSL): it runs
where the stitcher places buffers (:func:`kinac.ir.gpu.stitch.stitch_gpu`), on the entry's
values and arena slots. Grouping is sound because the members run "at once": no member reads
or overwrites a byte another member writes (checked on the arena plan), and every output is
an arena temporary (the runtime's writes into user buffers look for one step per output).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Protocol

from kinac.artifacts.gpu import GemmOperand, GpuGemm

Span = tuple[str, int, int]  # (memory, first byte, end): params and outputs are whole buffers
MAX_GROUP = 3


class _Kernel(Protocol):
    @property
    def kernel(self) -> object | None: ...
    @property
    def gemm(self) -> GpuGemm | None: ...


def _key(g: GpuGemm, a_value: int) -> tuple[object, ...] | None:
    """What members of one grouped call share (``None``: not groupable)."""
    if g.mode != "single" or g.epilogue or g.batch != 1:
        return None
    return (g.dtype, g.out_dtype, g.m, g.n, g.k, a_value, g.a.offsets, g.a.ld, g.a.trans,
            g.b.ld, g.b.trans, g.c.ld, g.c.offsets)  # fmt: skip


def _overlap(x: Span, y: Span) -> bool:
    return x[0] == y[0] and x[1] < y[2] and y[1] < x[2]


def plan_groups(
    ks: Sequence[_Kernel],
    results: Sequence[int],
    reads: Sequence[Sequence[int]],
    a_value: Callable[[int], int],
    span: Callable[[int], Span],
    is_temp: Callable[[int], bool],
) -> list[list[int]]:
    """The kernels' indices in runs: a run of several is one grouped call. ``a_value(i)``:
    the entry value kernel ``i``'s product reads on the left; ``span(v)``: the memory value
    ``v`` occupies; ``is_temp(v)``: whether ``v`` lives in the arena."""
    out: list[list[int]] = []
    key: tuple[object, ...] | None = None
    for i, k in enumerate(ks):
        g = k.gemm if k.kernel is None else None
        ki = None if g is None or not is_temp(results[i]) else _key(g, a_value(i))
        run = out[-1] if out else []
        if ki is not None and ki == key and len(run) < MAX_GROUP and _disjoint([*run, i], results, reads, span):  # fmt: skip
            run.append(i)
            continue
        out.append([i])
        key = ki
    return out


def _disjoint(
    run: Sequence[int],
    results: Sequence[int],
    reads: Sequence[Sequence[int]],
    span: Callable[[int], Span],
) -> bool:
    """No member's output overlaps another member's inputs or output."""
    for i in run:
        w = span(results[i])
        for j in run:
            if j == i:
                continue
            if _overlap(w, span(results[j])) or any(_overlap(w, span(u)) for u in reads[j]):
                return False
    return True


def grouped_gemm(gemms: Sequence[GpuGemm]) -> GpuGemm:
    """One pointer-array call computing each of ``gemms`` (their buffers already named): the
    shared left operand, each weight and output in its own buffer."""
    g0, n = gemms[0], len(gemms)
    a = replace(g0.a, offsets=g0.a.offsets * n)
    b = GemmOperand(g0.b.buf, tuple(g.b.offsets[0] for g in gemms), g0.b.ld, g0.b.trans,
                    tuple(g.b.buf for g in gemms))  # fmt: skip
    c = GemmOperand(g0.c.buf, tuple(g.c.offsets[0] for g in gemms), g0.c.ld, g0.c.trans,
                    tuple(g.c.buf for g in gemms))  # fmt: skip
    return replace(g0, batch=n, a=a, b=b, c=c, mode="pointers")


def first_use_order(names: Sequence[Sequence[str]], drop: Mapping[str, None]) -> tuple[str, ...]:
    """The members' reads, each once, in order (less the group's own outputs, ``drop``)."""
    return tuple(dict.fromkeys(r for rs in names for r in rs if r not in drop))
