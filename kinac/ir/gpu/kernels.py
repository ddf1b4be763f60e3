"""One GPU kernel (an LLVM function) per generated ``kina.kernel``, by kind.

- ``map``: a thread computes ``U`` groups of ``V`` consecutive output elements (all loads
  first, from clamped indices, then the predicated stores), 256 threads per block.
- ``reduce``/``softmax``/``row`` over the last axis: ``T`` threads per row, the row read in
  ``C`` unrolled chunks and kept in registers; each reduction is combined across the ``T``
  threads with warp shuffles (``shfl.sync.bfly``, every lane ends with the result) and, for
  ``T > 32``, through shared memory. A ``row`` kernel (a norm, made by ``gpu-fuse-rows``) then
  computes its elementwise output from the registers: one read and one write per element.
- ``reduce``/``softmax`` over another axis (or rows too long to unroll): a thread per output
  group, looping over the reduced axis (consecutive threads read consecutive addresses).
- ``gather`` (:mod:`kinac.ir.gpu.kernels_gather`): a map over the output with a bounds check
  that records the first bad index in the status buffer, then reads row 0 instead of garbage.
- ``concat``: one launch per operand, a map writing its slice of the output.
- ``scatter_add`` (gather's VJP, :mod:`kinac.ir.gpu.kernels_gather`): deterministic, one
  writer per output element, adding in index order.
- ``matmul`` with ``impl = "loops"`` (integers): a thread per output element.

Every kernel takes ``(out, inputs..., [status])`` as global pointers.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

from xdsl.ir import SSAValue

from kinac.dtypes import ITEMSIZE
from kinac.ir.dialects import kina_struct as st
from kinac.ir.dialects.kina import dtype_name, int_prop, shape_of
from kinac.ir.gpu.emit import Builder, Ix, Val
from kinac.ir.gpu.kernels_gather import gather_kernel, scatter_add_kernel
from kinac.ir.gpu.plan import (
    BLOCK,
    RowConfig,
    index_type,
    map_grid,
    map_unroll,
    row_config,
    vector_width,
)
from kinac.ir.gpu.read import BodyReader, Lanes, bcast
from kinac.ir.gpu.rows import RowReducer
from kinac.ir.layout import cstrides


@dataclass(frozen=True)
class KernelFn:
    """One generated GPU function and how to launch it."""

    name: str
    text: str
    builder: Builder
    grid: int
    block: int
    vec: int
    shared: int = 0
    note: str = ""


def _numels(k: st.KernelOp) -> list[int]:
    return [math.prod(shape_of(v.type)) for v in [*k.inputs, k.result]]


class KernelGen:
    """Generates the functions of one ``kina.kernel``."""

    def __init__(self, k: st.KernelOp, index: int, flavour: str) -> None:
        self.k, self.index, self.flavour = k, index, flavour
        self.root = k.yielded()
        self.ix = index_type(*_numels(k))
        self.has_status = k.kind.data == "gather"

    def generate(self) -> list[KernelFn]:
        kind = self.k.kind.data
        sym = self.k.sym.data
        if kind == "concat":
            op = self.root.owner
            assert isinstance(op, st.ConcatOp)
            return [self._concat_part(op, i, f"{sym}_{i}") for i in range(len(op.xs))]
        if kind == "matmul":
            return [self._naive_matmul(sym)]
        if kind == "gather":
            return [gather_kernel(self, sym)]
        if kind == "scatter_add":
            return [scatter_add_kernel(self, sym)]
        if kind in ("reduce", "softmax", "row"):
            cfg = self.row_plan()
            if cfg is not None:
                return [self._row(sym, cfg)]
            return [self._column(sym)]
        return [self._map(sym)]

    # ---- plumbing ----------------------------------------------------------------------------
    def _start(self, vec: int) -> tuple[Builder, BodyReader, Val]:
        b = Builder(self.flavour)
        g = b.gptr
        ptrs = [Val(f"%in{i}", g) for i in range(len(self.k.inputs))]
        r = BodyReader(list(self.k.body.block.args), ptrs, b, self.ix, vec)
        return b, r, Val("%out", g)

    def _finish(self, b: Builder, name: str, grid: int, block: int, vec: int, shared: int = 0, note: str = "") -> KernelFn:  # fmt: skip
        g = b.gptr
        params = [f"{g} noalias %out"]
        params += [f"{g} noalias readonly %in{i}" for i in range(len(self.k.inputs))]
        if self.has_status:
            params.append(f"{g} noalias %status")
        return KernelFn(name, b.function(name, params), b, grid, block, vec, shared, note)

    def _tid(self, b: Builder) -> tuple[Ix, Ix]:
        tid: Val = b.sreg("tid.x")
        bid: Val = b.sreg("ctaid.x")
        if self.ix == "i64":
            tid = b.emit(f"zext i32 {tid.ref} to i64", "i64")
            bid = b.emit(f"zext i32 {bid.ref} to i64", "i64")
        return tid, bid

    # ---- map -----------------------------------------------------------------------------------
    def _map(self, name: str) -> KernelFn:
        shape, dt = shape_of(self.root.type), dtype_name(self.root.type)
        vec = vector_width(shape[-1], ITEMSIZE[dt]) if shape else 1
        b, r, out = self._start(vec)
        self._map_body(b, r, out, shape, vec, lambda idx, lax: r.read(self.root, idx, lax), None)
        groups = math.prod(shape) // vec
        u = map_unroll(groups)
        return self._finish(b, name, map_grid(groups, u), BLOCK, vec, note=f"unroll {u}")

    def _map_body(self, b: Builder, r: BodyReader, out: Val, shape: tuple[int, ...], vec: int, value: object, out_shape: tuple[int, tuple[int, ...], int] | None) -> None:  # fmt: skip
        """Compute ``value(idx, lax)`` over ``shape`` and store it (into ``out_shape`` =
        (axis, full output shape, start) for a concat part)."""
        ix = self.ix
        groups = math.prod(shape) // vec
        u_n = map_unroll(groups)
        tid, bid = self._tid(b)
        base = b.iadd(b.imul(bid, BLOCK * u_n, ix), tid, ix)
        lax = len(shape) - 1 if vec > 1 else None
        pending = []
        for u in range(u_n):
            g = b.iadd(base, u * BLOCK, ix)
            ok = b.icmp("ult", g, groups, ix)
            gs = b.select(ok, b.ival(g, ix), b.ci(0, ix))
            idx = r.unflatten(b.imul(gs, vec, ix), shape)
            vals = value(idx, lax)  # type: ignore[operator]
            pending.append((ok, idx, vals))
        dt = dtype_name(self.root.type)
        for ok, idx, vals in pending:
            if out_shape is None:
                off = r.linear(idx, cstrides(shape))
            else:
                ax, full, start = out_shape
                oidx = list(idx)
                oidx[ax] = b.iadd(oidx[ax], start, ix)
                off = r.linear(oidx, cstrides(full))
            b.if_then(ok, functools.partial(r.store, out, off, vals, dt))

    # ---- rows ----------------------------------------------------------------------------------
    def row_source(self) -> SSAValue:
        """The tensor whose rows the kernel walks."""
        op = self.root.owner
        if isinstance(op, st.ReduceOp | st.SoftmaxOp):
            return op.x
        return self.root

    def row_plan(self) -> RowConfig | None:
        src = self.row_source()
        shape = shape_of(src.type)
        op = self.root.owner
        if not shape:
            return None
        if isinstance(op, st.ReduceOp | st.SoftmaxOp) and int_prop(op, "axis") != len(shape) - 1:
            return None
        vec = vector_width(shape[-1], ITEMSIZE[dtype_name(src.type)])
        return row_config(shape[-1], vec, math.prod(shape[:-1]))

    def _row(self, name: str, cfg: RowConfig) -> KernelFn:
        src = self.row_source()
        shape = shape_of(src.type)
        length, rows = shape[-1], math.prod(shape[:-1])
        t_n, vec = cfg.threads, cfg.vec
        b, r, out = self._start(vec)
        ix = self.ix
        tid, bid = self._tid(b)
        t = b.imod(tid, t_n, ix)
        row = b.iadd(b.imul(bid, cfg.rows_per_block, ix), b.idiv(tid, t_n, ix), ix)
        row_ok = b.icmp("ult", row, rows, ix)
        lead = r.unflatten(b.select(row_ok, b.ival(row, ix), b.ci(0, ix)), shape[:-1])
        chunks: list[tuple[Val, list[Ix]]] = []
        for c in range(cfg.chunks):
            col = b.imul(b.iadd(t, c * t_n, ix), vec, ix)
            full = cfg.chunks * t_n * vec <= length
            ok = b.ci(1, "i1") if full else b.icmp("ult", col, length, ix)
            cs = b.select(ok, b.ival(col, ix), b.ci(0, ix))
            chunks.append((ok, [*lead, cs]))
        lax = len(shape) - 1 if vec > 1 else None
        red = RowReducer(self.k.sym.data, self.ix, b, r, cfg, tid, chunks, lax)
        for op in self.k.body.block.ops:
            if isinstance(op, st.ReduceOp):
                red.reduce(op)
            elif isinstance(op, st.SoftmaxOp):
                red.softmax(op)
        dt = dtype_name(self.root.type)
        if isinstance(self.root.owner, st.ReduceOp):
            val = r.read1(self.root, [0] * len(shape_of(self.root.type)))
            first = b.icmp("eq", t, 0, ix)
            b.if_then(b.and1(row_ok, first), lambda: r.store(out, row, [val], dt))
        else:
            for ok, idx in chunks:
                vals = r.read(self.root, idx, lax)
                off = r.linear(idx, cstrides(shape))
                b.if_then(b.and1(row_ok, ok), functools.partial(r.store, out, off, vals, dt))
        grid = max(1, -(-rows // cfg.rows_per_block))
        note = f"T={t_n} C={cfg.chunks}" + (" smem" if t_n > 32 else "")
        return self._finish(b, name, grid, cfg.block, vec, 0, note)

    # ---- reductions along another axis (or very long rows) ------------------------------------
    def _column(self, name: str) -> KernelFn:
        op = self.root.owner
        if not isinstance(op, st.ReduceOp | st.SoftmaxOp):
            raise NotImplementedError(f"{self.k.sym.data}: rows too long for a fused row kernel")
        xs, ax = shape_of(op.x.type), int_prop(op, "axis")
        n, dt = xs[ax], dtype_name(op.x.type)
        rest = tuple(d for i, d in enumerate(xs) if i != ax)
        inner_last = ax != len(xs) - 1
        vec = vector_width(xs[-1], ITEMSIZE[dt]) if inner_last else 1
        b, r, out = self._start(vec)
        sc, ix = r.sc, self.ix
        groups = math.prod(rest) // vec
        tid, bid = self._tid(b)
        g = b.iadd(b.imul(bid, BLOCK, ix), tid, ix)
        ok = b.icmp("ult", g, groups, ix)
        pos = r.unflatten(b.imul(b.select(ok, b.ival(g, ix), b.ci(0, ix)), vec, ix), rest)
        lax = len(xs) - 1 if vec > 1 else None

        def at(k: Ix) -> list[Ix]:
            return [*pos[:ax], k, *pos[ax:]]

        def fold(kind: str, value: object) -> Lanes:
            def body(k: Val, accs: list[Val]) -> list[Val]:
                with r.scope():
                    vals = value(at(k))  # type: ignore[operator]
                    return [sc.combine(kind, a, x, dt) for a, x in zip(accs, vals, strict=True)]

            return b.loop(n, ix, [sc.identity(kind, dt)] * vec, body)

        odt = dtype_name(self.root.type)
        if isinstance(op, st.ReduceOp):
            kind = op.name.removeprefix("kina.reduce_")
            accs = fold(kind, lambda i: r.read(op.x, i, lax))
            if kind == "mean":
                accs = [sc.binary("div", a, sc.count(n, dt), dt) for a in accs]
            keep = int_prop(op, "keepdims")
            oidx = [*pos[:ax], 0, *pos[ax:]] if keep else pos
            off = r.linear(oidx, cstrides(shape_of(op.result.type)))
            b.if_then(ok, lambda: r.store(out, off, accs, odt))
        else:
            m = fold("max", lambda i: r.read(op.x, i, lax))

            def ex(i: list[Ix]) -> Lanes:
                xv = r.read(op.x, i, lax)
                return [sc.exp(sc.fbin("fsub", x, mm)) for x, mm in zip(xv, m, strict=True)]

            s = fold("sum", ex)
            inv = [sc.fbin("fdiv", sc.f(1.0), x) for x in s]

            def write(k: Val, _: list[Val]) -> list[Val]:
                with r.scope():
                    vals = [sc.fbin("fmul", e, i) for e, i in zip(ex(at(k)), inv, strict=True)]
                    off = r.linear(at(k), cstrides(xs))
                    b.if_then(ok, lambda: r.store(out, off, vals, odt))
                return []

            b.loop(n, ix, [], write)
        grid = max(1, -(-groups // BLOCK))
        return self._finish(b, name, grid, BLOCK, vec, note=f"loop over axis {ax}, {n} steps")

    # ---- concat, integer matmul (gather, scatter_add: kinac/ir/gpu/kernels_gather.py) ---------
    def _concat_part(self, op: st.ConcatOp, i: int, name: str) -> KernelFn:
        ax = int_prop(op, "axis")
        full = shape_of(op.result.type)
        x = op.xs[i]
        xs = shape_of(x.type)
        start = sum(shape_of(y.type)[ax] for y in op.xs[:i])
        dt = dtype_name(x.type)
        vec = vector_width(xs[-1], ITEMSIZE[dt])
        if ax == len(full) - 1:
            while vec > 1 and (start % vec or full[-1] % vec):
                vec //= 2
        b, r, out = self._start(vec)
        self._map_body(b, r, out, xs, vec, lambda idx, lax: r.read(x, idx, lax), (ax, full, start))
        groups = math.prod(xs) // vec
        return self._finish(b, name, map_grid(groups, map_unroll(groups)), BLOCK, vec)

    def _naive_matmul(self, name: str) -> KernelFn:
        op = self.root.owner
        assert isinstance(op, st.MatmulOp)
        a_s, b_s, o_s = shape_of(op.lhs.type), shape_of(op.rhs.type), shape_of(op.result.type)
        dt = dtype_name(op.lhs.type)
        b, r, out = self._start(1)
        sc, ix = r.sc, self.ix

        def value(idx: list[Ix], lax: int | None) -> Lanes:
            bi, m, n = idx[:-2], idx[-2], idx[-1]
            ab, bb = bcast(bi, None, a_s[:-2])[0], bcast(bi, None, b_s[:-2])[0]

            def body(k: Val, accs: list[Val]) -> list[Val]:
                with r.scope():
                    p = sc.binary(
                        "mul", r.read1(op.lhs, [*ab, m, k]), r.read1(op.rhs, [*bb, k, n]), dt
                    )
                    return [sc.combine("sum", accs[0], p, dt)]

            return b.loop(a_s[-1], ix, [sc.c(0, dt)], body)

        self._map_body(b, r, out, o_s, 1, value, None)
        groups = math.prod(o_s)
        return self._finish(
            b, name, map_grid(groups, map_unroll(groups)), BLOCK, 1, note=f"naive, {a_s[-1]} steps"
        )
