"""Elementwise map kernels fused into one GPU function, each result stored over an input.

Why: an optimizer step over flat buffers is several update formulas over the same elements
(AdamW: ``m``, then ``v``, then the parameters from the new ``m`` and ``v``). Kina defns
return one result, so each formula is its own defn and its own kernel: AdamW reads
``g, m`` / ``g, v`` / ``p, m, v`` and writes ``m`` / ``v`` / ``p``, 10 passes over the
weights' bytes in 3 launches. Fused here (the training driver asks for it), one thread reads
``p, g, m, v`` once, computes the three formulas in order, the later ones taking the earlier
results from registers, and stores ``m, v, p``: 7 passes, one launch.

Bitwise equal to the separate kernels: each part's body is read by its own
:class:`~kinac.ir.gpu.read.BodyReader` with the same vector width as
:meth:`~kinac.ir.gpu.kernels.KernelGen._map` chooses (``div`` is IEEE at every width since
2026-12-02e, so the width no longer changes the arithmetic; it still fixes each thread's
elements), and a part's read of an
earlier part's result is that result rounded to its storage dtype, as the store and reload
of the separate kernels would give. Every element is read and written by one thread, after it
read it, so the in-place stores are safe.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass

from xdsl.dialects import func
from xdsl.ir import BlockArgument

from kinac.dtypes import ITEMSIZE
from kinac.ir.dialects import kina_struct as st
from kinac.ir.dialects.kina import dtype_name, shape_of
from kinac.ir.gpu.emit import Builder, Ix, Val
from kinac.ir.gpu.kernels import KernelFn
from kinac.ir.gpu.plan import BLOCK, index_type, map_grid, map_unroll, vector_width
from kinac.ir.gpu.read import BodyReader, Lanes, Special
from kinac.ir.layout import cstrides
from kinac.tir.graph import Graph


@dataclass(frozen=True)
class InPlacePart:
    """One map kernel of the fusion: ``inputs[i]`` is the fused function's buffer that the
    kernel's ``i``-th operand reads, ``writes`` the buffer its result overwrites."""

    kernel: st.KernelOp
    inputs: tuple[int, ...]
    writes: int


def _given(lanes: Lanes) -> Special:
    """A read of an earlier part's result: its lanes, from registers."""

    def read(idx: list[Ix], lax: int | None) -> Lanes:
        return lanes

    return read


def fuse_inplace_maps(
    parts: Sequence[InPlacePart], nbuf: int, name: str, flavour: str = "nvptx"
) -> KernelFn:
    """One function ``name(b0, ..., b{nbuf-1})`` running ``parts`` in order per element (see
    the module docstring). Every part is a ``map`` kernel over one shape and dtype; its
    operands are either that full shape or rank 0 (broadcast scalars)."""
    if not parts:
        raise ValueError("nothing to fuse")
    root0 = parts[0].kernel.yielded()
    shape, dt = shape_of(root0.type), dtype_name(root0.type)
    written = {p.writes for p in parts}
    for p in parts:
        k, root = p.kernel, p.kernel.yielded()
        if k.kind.data != "map" or (shape_of(root.type), dtype_name(root.type)) != (shape, dt):
            raise ValueError(f"{k.sym.data}: not a {dt}{list(shape)} map kernel")
        if len(p.inputs) != len(k.inputs) or not 0 <= p.writes < nbuf:
            raise ValueError(f"{k.sym.data}: {len(k.inputs)} operands, buffers {p.inputs}")
        for v, i in zip(k.inputs, p.inputs, strict=True):
            if shape_of(v.type) not in ((), shape):
                raise ValueError(f"{k.sym.data}: operand of shape {shape_of(v.type)}")
            if i in written and shape_of(v.type) != shape:
                raise ValueError(f"{k.sym.data}: a written buffer read as a scalar")
    numel = math.prod(shape)
    vec = vector_width(shape[-1], ITEMSIZE[dt]) if shape else 1
    ix = index_type(numel)
    b = Builder(flavour)
    g = b.gptr
    ptrs = [Val(f"%b{i}", g) for i in range(nbuf)]
    readers = [
        BodyReader(list(p.kernel.body.block.args), [ptrs[i] for i in p.inputs], b, ix, vec)
        for p in parts
    ]
    groups = numel // vec
    u_n = map_unroll(groups)
    tid: Val = b.sreg("tid.x")
    bid: Val = b.sreg("ctaid.x")
    if ix == "i64":
        tid = b.emit(f"zext i32 {tid.ref} to i64", "i64")
        bid = b.emit(f"zext i32 {bid.ref} to i64", "i64")
    base = b.iadd(b.imul(bid, BLOCK * u_n, ix), tid, ix)
    lax = len(shape) - 1 if vec > 1 else None
    strides = cstrides(shape)
    # loads and arithmetic of every group first, then the predicated stores (as _map does)
    pending: list[tuple[Val, Ix, list[tuple[int, Lanes]]]] = []
    r0 = readers[0]
    for u in range(u_n):
        gi = b.iadd(base, u * BLOCK, ix)
        ok = b.icmp("ult", gi, groups, ix)
        gs = b.select(ok, b.ival(gi, ix), b.ci(0, ix))
        idx = r0.unflatten(b.imul(gs, vec, ix), shape)
        latest: dict[int, Lanes] = {}  # buffer -> this group's new value (rounded to storage)
        stores: list[tuple[int, Lanes]] = []
        for p, r in zip(parts, readers, strict=True):
            for v, i in zip(p.kernel.body.block.args, p.inputs, strict=True):
                if i in latest:
                    assert isinstance(v, BlockArgument)
                    r.special[v] = _given(latest[i])
            vals = r.read(p.kernel.yielded(), idx, lax)
            stores.append((p.writes, vals))
            latest[p.writes] = [r.sc.round(x, dt) for x in vals]
        pending.append((ok, r0.linear(idx, strides), stores))
    for ok, off, stores in pending:
        for buf, vals in stores:
            b.if_then(ok, functools.partial(r0.store, ptrs[buf], off, vals, dt))
    params = []
    for i in range(nbuf):
        attrs = "noalias" if i in written else "noalias readonly"
        params.append(f"{g} {attrs} %b{i}")
    grid = map_grid(groups, u_n)
    note = f"unroll {u_n}, {len(parts)} maps fused in place"
    return KernelFn(name, b.function(name, params), b, grid, BLOCK, vec, note=note)


def graph_part(graph: Graph, inputs: Sequence[int], writes: int) -> InPlacePart:
    """The one map kernel of ``graph`` (a concrete elementwise entry, its params in order
    read from buffers ``inputs``) as a part writing buffer ``writes``."""
    from kinac.ir.gpu.pipeline import gpu_module

    m = gpu_module(graph)
    fn = next(o for o in m.ops if isinstance(o, func.FuncOp))
    kernels = [o for o in fn.body.block.ops if isinstance(o, st.KernelOp)]
    if len(kernels) != 1:
        raise ValueError(f"{fn.sym_name.data}: {len(kernels)} kernels, not one map")
    k = kernels[0]
    where = []
    for v in k.inputs:
        if not isinstance(v, BlockArgument):
            raise ValueError(f"{fn.sym_name.data}: a kernel operand that is not a parameter")
        where.append(inputs[v.index])
    return InPlacePart(k, tuple(where), writes)
