"""The ``gather`` and ``scatter_add`` kernels (split out of :mod:`kinac.ir.gpu.kernels`).

- ``gather``: a map over the output with a bounds check that records the first bad index in
  the status buffer (an atomic compare-and-swap), then reads row 0 instead of garbage.
- ``scatter_add`` (gather's VJP): a thread per (column, chunk of table rows) zeroes its rows,
  then walks every index in order, adding the source element of the rows in its chunk: each
  output element has one writer, which adds in index order, so results are deterministic (no
  atomics). A bf16/f16 table is rounded after each add (the host rounds once).

Functions of a :class:`~kinac.ir.gpu.kernels.KernelGen` (its plumbing: ``_start``,
``_map_body``, ``_finish``).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from kinac.artifacts.host import GATHER_OOB
from kinac.dtypes import ITEMSIZE
from kinac.ir.dialects import kina_struct as st
from kinac.ir.dialects.kina import dtype_name, shape_of
from kinac.ir.gpu.emit import Builder, Ix, Val
from kinac.ir.gpu.plan import BLOCK, map_grid, map_unroll, vector_width
from kinac.ir.gpu.read import BodyReader, Lanes
from kinac.ir.gpu.scalar import COMPUTE
from kinac.ir.layout import cstrides

if TYPE_CHECKING:
    from kinac.ir.gpu.kernels import KernelFn, KernelGen

SCATTER_THREADS = 1 << 16
"""Threads a scatter-add aims for (columns x row chunks): each walks every index once."""


def gather_kernel(gen: KernelGen, name: str) -> KernelFn:
    op = gen.root.owner
    assert isinstance(op, st.GatherOp)
    shape, dt = shape_of(gen.root.type), dtype_name(gen.root.type)
    vrows = shape_of(op.table.type)[0]
    vec = vector_width(shape[-1], ITEMSIZE[dt])
    b, r, out = gen._start(vec)
    ishape = shape_of(op.idx.type)
    idt = dtype_name(op.idx.type)

    def value(idx: list[Ix], lax: int | None) -> Lanes:
        raw = r.read1(op.idx, idx[:-1])
        ty = COMPUTE[idt]
        bad = b.emit(f"icmp uge {ty} {raw.ref}, {vrows}", "i1")  # negative: huge unsigned
        _record_oob(gen, b, r, bad, raw, idx[:-1], ishape, vrows)
        safe = b.select(bad, b.ci(0, ty), raw)
        if ty != gen.ix:
            conv = "trunc" if ty == "i64" else "sext"
            safe = b.emit(f"{conv} {safe} to {gen.ix}", gen.ix)
        return r.read(op.table, [safe, idx[-1]], 1 if lax is not None else None)

    gen._map_body(b, r, out, shape, vec, value, None)
    groups = math.prod(shape) // vec
    return gen._finish(b, name, map_grid(groups, map_unroll(groups)), BLOCK, vec)


def scatter_add_kernel(gen: KernelGen, name: str) -> KernelFn:
    op = gen.root.owner
    assert isinstance(op, st.ScatterAddOp)
    (vrows, d), dt = shape_of(gen.root.type), dtype_name(gen.root.type)
    ishape, idt = shape_of(op.idx.type), dtype_name(op.idx.type)
    chunks = max(1, min(vrows, -(-SCATTER_THREADS // d)))
    rows = -(-vrows // chunks)
    b, r, out = gen._start(1)
    ix = gen.ix
    tid, bid = gen._tid(b)
    g = b.iadd(b.imul(bid, BLOCK, ix), tid, ix)
    live = b.icmp("ult", g, chunks * d, ix)
    g = b.select(live, b.ival(g, ix), b.ci(0, ix))
    col, first = b.imod(g, d, ix), b.imul(b.idiv(g, d, ix), rows, ix)

    def zero(k: Val, _: list[Val]) -> list[Val]:
        row = b.iadd(first, k, ix)
        ok = b.and1(live, b.icmp("ult", row, vrows, ix))
        b.if_then(ok, lambda: r.store(out, r.linear([row, col], (d, 1)), [r.sc.c(0, dt)], dt))
        return []

    b.loop(rows, ix, [], zero)

    def add(p: Val, _: list[Val]) -> list[Val]:
        with r.scope():
            pidx = r.unflatten(p, ishape)
            raw = r.read1(op.idx, pidx)
            ty = COMPUTE[idt]
            if ty != ix:
                raw = b.emit(f"{'trunc' if ty == 'i64' else 'sext'} {raw} to {ix}", ix)
            rel = b.emit(f"sub {ix} {raw.ref}, {b.ival(first, ix).ref}", ix)
            mine = b.and1(b.icmp("ult", rel, rows, ix), b.icmp("ult", raw, vrows, ix))

            def accumulate() -> None:
                off = r.linear([raw, col], (d, 1))
                cur = r.scalar_load(out, off, dt)
                val = r.read1(op.src, [*pidx, col])
                r.store(out, off, [r.sc.binary("add", cur, val, dt)], dt)

            b.if_then(b.and1(live, mine), accumulate)
        return []

    b.loop(math.prod(ishape), ix, [], add)
    grid = max(1, -(-(chunks * d) // BLOCK))
    return gen._finish(
        b,
        name,
        grid,
        BLOCK,
        1,
        note=f"{chunks} row chunks, in order, {rows + math.prod(ishape)} steps",
    )


def _record_oob(gen: KernelGen, b: Builder, r: BodyReader, bad: Val, raw: Val, bidx: list[Ix], ishape: tuple[int, ...], vrows: int) -> None:  # fmt: skip
    g = b.gptr

    def record() -> None:
        res = b.emit(
            f"cmpxchg {g} %status, i64 0, i64 {GATHER_OOB} monotonic monotonic", "{ i64, i1 }"
        )
        won = b.emit(f"extractvalue {{ i64, i1 }} {res.ref}, 1", "i1")

        def fields() -> None:
            pos = b.ival(r.linear(bidx, cstrides(ishape)), gen.ix)
            wide = [b.ci(gen.index, "i64"), r.sc.index_to(pos, "i64")]
            wide.append(raw if raw.ty == "i64" else b.emit(f"sext {raw} to i64", "i64"))
            wide.append(b.ci(vrows, "i64"))
            for k, v in enumerate(wide, start=1):
                b.store(v, b.gep("i64", Val("%status", g), k, "i32"), 8)

        b.if_then(won, fields)

    b.if_then(bad, record)
