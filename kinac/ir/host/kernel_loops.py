"""Lower one ``kina.kernel`` body to loop nests over flat buffers.

Every kernel writes one contiguous output buffer. Its body is read *by index*: ``read(v, idx)``
produces the element of ``v`` at a tuple of loop indices by recursing through elementwise ops
(which broadcast) and views (whose layouts become offsets, see :mod:`kinac.ir.layout`) down to
loads of the kernel's input buffers. The loop structure depends on the kernel's kind:

- ``map``: one loop per output dim, contiguous innermost.
- ``reduce``: over the last axis, a loop carrying an accumulator (input read once); over an
  inner axis, accumulation into the output row by row, so the innermost loop stays contiguous.
- ``softmax``: per row, a max pass and an exp-and-sum pass over the input, then a scaling pass
  over the output (the input read twice; an input computed in the kernel is computed once,
  kept in the output row by the max pass).
- ``gather``: per index, a bounds check recorded in the status buffer, then a row copy.
- ``concat``: one loop nest per operand, writing its slice.
- ``scatter_add``: zero the table, then per index (row-major, one thread: deterministic) add
  the source row into the table row; an index out of range adds ``-0.0`` to row 0 (a no-op).
- ``matmul``: ``kbuf.gemm`` per batch (BLAS reads views in place through ``lda`` and transpose
  flags; batches that merge into rows become one call), or a loop nest for ``impl = "loops"``.
  A product marked ``causal`` (:mod:`kinac.ir.host.causal`) makes one call per block
  (:func:`kinac.ir.host.causal_blocks.gemm_blocks`).
"""

from __future__ import annotations

import math
from collections.abc import Generator, Sequence

from xdsl.dialects import arith
from xdsl.dialects.builtin import IntegerAttr, i64
from xdsl.ir import BlockArgument, Operation, SSAValue

from kinac.artifacts.host import GATHER_OOB
from kinac.ir.dialects import kina as el
from kinac.ir.dialects import kina_struct as st
from kinac.ir.dialects.kbuf import GemmOp
from kinac.ir.dialects.kina import dtype_name, int_prop, ints_prop, shape_of
from kinac.ir.host.causal_blocks import CAUSAL_STEP, causal_roles, causal_rows, gemm_blocks
from kinac.ir.host.gemm_out import gemm_output
from kinac.ir.host.loopgen import INDEX, Emitter, Ix
from kinac.ir.host.scalar import Scalars
from kinac.ir.layout import Layout, as_blas_matrix, cstrides
from kinac.ir.trampoline import evaluate
from kinac.ir.views import VIEWS, chain_layout, view_base

ReadReq = tuple[SSAValue, tuple[Ix, ...]]  # a value and the index to read it at


def bcast_index(idx: Sequence[Ix], shape: Sequence[int]) -> list[Ix]:
    """The index into an operand of ``shape`` broadcast to the (longer) index ``idx``."""
    lead = len(idx) - len(shape)
    return [0 if n == 1 else idx[lead + j] for j, n in enumerate(shape)]


def merged_rows(alay: Layout, a_s: tuple[int, ...], b_s: tuple[int, ...]) -> Layout | None:
    """``A``'s layout as one ``[rows, K]`` matrix when ``B`` has no batch dims and BLAS can
    read all of ``A``'s batches as rows of a single product."""
    if len(b_s) != 2 or len(a_s) <= 2:
        return None
    merged = alay.reshape((math.prod(a_s[:-1]), a_s[-1]))
    return merged if merged is not None and as_blas_matrix(merged) is not None else None


def _matmul_extent(k: st.KernelOp, op: st.MatmulOp) -> int | None:
    a_s, b_s = shape_of(op.lhs.type), shape_of(op.rhs.type)
    if k.impl.data == "blas":
        base, chain = view_base(op.lhs)
        alay = chain_layout(base, chain)
        if alay is None or merged_rows(alay, a_s, b_s) is not None:
            return None  # one call (BLAS products split themselves on the pool)
        dims = list(shape_of(op.result.type)[:-2])
    else:
        dims = list(shape_of(op.result.type)[:-1])
    return next((n for n in dims if n > 1), None)


def parallel_extent(k: st.KernelOp) -> int | None:
    """The extent of the kernel's outermost loop when its iterations are independent.

    Map, softmax, row-reduction and batched matmul kernels write disjoint output rows per outer
    iteration, so that loop can be split into concurrent chunks; the others (column reductions
    accumulate across it, gathers share the status buffer) run whole.
    """
    kind, root = k.kind.data, k.yielded()
    if kind == "map":
        dims = list(shape_of(root.type))
    elif kind in ("softmax", "reduce"):
        op = root.owner
        assert isinstance(op, st.SoftmaxOp | st.ReduceOp)
        xs, ax = shape_of(op.x.type), int_prop(op, "axis")
        if kind == "reduce" and math.prod(xs[ax + 1 :]) != 1:
            return None
        dims = [n for d, n in enumerate(xs) if d != ax]
    elif kind == "matmul":
        op = view_base(root)[0].owner  # the product, or the product under its output views
        assert isinstance(op, st.MatmulOp)
        return _matmul_extent(k, op)
    else:
        return None
    return next((n for n in dims if n > 1), None)


KEEP_SOFTMAX_INPUT = True  # False: as before 2026-12-02d (benches/cpu_ab.py softmax_keep=0)


def computed(v: SSAValue) -> bool:
    """Whether reading ``v`` computes something (an op other than views over an input)."""
    base, _ = view_base(v)
    return not isinstance(base, BlockArgument)


class KernelLowering:
    """Emits the loops of one kernel into an :class:`Emitter`."""

    def __init__(
        self,
        kernel: st.KernelOp,
        em: Emitter,
        inputs: Sequence[SSAValue],
        out: SSAValue,
        status: SSAValue | None,
        index: int,
    ) -> None:
        blk = kernel.body.block
        self.buf: dict[SSAValue, SSAValue] = dict(zip(blk.args, inputs, strict=True))
        self.em, self.sc = em, Scalars(em)
        self.out, self.status, self.index = out, status, index
        y = blk.last_op
        assert isinstance(y, st.YieldOp)
        self.root = y.value
        self.kernel = kernel
        self.kind = kernel.kind.data
        self.impl = kernel.impl.data

    # reading values by index --------------------------------------------------------------
    def layout(self, v: SSAValue) -> tuple[SSAValue, Layout] | None:
        base, chain = view_base(v)
        if base not in self.buf:
            return None
        lay = chain_layout(base, chain)
        return (base, lay) if lay is not None else None

    def offset(self, lay: Layout, idx: Sequence[Ix]) -> Ix:
        em = self.em
        off: Ix = lay.offset
        for i, dim in zip(idx, lay.dims, strict=True):
            inner = math.prod(n for n, _ in dim)
            for j, (n, s) in enumerate(dim):
                inner //= n
                if s == 0 or n == 1:
                    continue
                t = em.idiv(i, inner) if inner > 1 else i
                t = em.imod(t, n) if j > 0 else t
                off = em.iadd(off, em.imul(t, s))
        return off

    def read(self, v: SSAValue, idx: Sequence[Ix]) -> SSAValue:
        """The element of ``v`` at ``idx``, memoised per scope; iterative (see
        :mod:`kinac.ir.trampoline`): fused chains of any length read without recursion."""
        return evaluate((v, tuple(idx)), self._memo_hit, self._read, self._memo_store)

    def _memo_hit(self, req: ReadReq) -> SSAValue | None:
        return self.em.lookup(("read", req[0], *req[1]))

    def _memo_store(self, req: ReadReq, val: SSAValue) -> None:
        self.em.remember(("read", req[0], *req[1]), val)

    def _read(self, req: ReadReq) -> Generator[ReadReq, SSAValue, SSAValue]:
        v, idx = req[0], list(req[1])
        sc, dt = self.sc, dtype_name(v.type)
        if isinstance(v, BlockArgument):
            off = self.em.linear(idx, cstrides(shape_of(v.type)))
            return sc.load(self.buf[v], off, dt)
        op = v.owner
        assert isinstance(op, Operation)
        if isinstance(op, VIEWS):
            bl = self.layout(v)
            if bl is not None:
                return sc.load(self.buf[bl[0]], self.offset(bl[1], idx), dt)
            return (yield (op.x, tuple(self.view_index(op, idx))))
        if isinstance(op, el.UnaryOp):
            return sc.unary(op.name[5:], (yield (op.x, req[1])), dt)
        if isinstance(op, el.CastOp):
            return sc.cast((yield (op.x, req[1])), dtype_name(op.x.type), dt)
        if isinstance(op, el.BinaryOp):
            a = yield (op.lhs, tuple(bcast_index(idx, shape_of(op.lhs.type))))
            b = yield (op.rhs, tuple(bcast_index(idx, shape_of(op.rhs.type))))
            src = dtype_name(op.lhs.type)
            if isinstance(op, el.CompareOp):
                return sc.compare(op.name[5:], a, b, src)
            return sc.binary(op.name[5:], a, b, dt)
        if isinstance(op, el.WhereOp):
            got = []
            for x in op.operands:
                got.append((yield (x, tuple(bcast_index(idx, shape_of(x.type))))))
            return sc.select(*got)
        if isinstance(op, st.ConstOp | st.FullOp):
            val = op.value
            assert isinstance(val, IntegerAttr) or hasattr(val, "value")
            return sc.c(val.value.data, dt)  # type: ignore[union-attr]
        if isinstance(op, st.IotaOp):
            return sc.index_to(idx[int_prop(op, "axis")], dt)
        raise NotImplementedError(f"{op.name} cannot be recomputed inside a kernel")

    def view_index(self, op: st.ViewOp, idx: list[Ix]) -> list[Ix]:
        """The input index of a view at output index ``idx`` (when it is no layout)."""
        em = self.em
        src = shape_of(op.x.type)
        if isinstance(op, st.TransposeOp):
            res: list[Ix] = [0] * len(idx)
            for i, p in enumerate(ints_prop(op, "perm")):
                res[p] = idx[i]
            return res
        if isinstance(op, st.BroadcastToOp):
            return bcast_index(idx, src)
        if isinstance(op, st.SliceOp):
            res = list(idx)
            ax = int_prop(op, "axis")
            res[ax] = em.iadd(res[ax], int_prop(op, "start"))
            return res
        if isinstance(op, st.RepeatInterleaveOp):
            res = list(idx)
            ax = int_prop(op, "axis")
            res[ax] = em.idiv(res[ax], int_prop(op, "repeats"))
            return res
        if isinstance(op, st.ReshapeOp):
            flat = em.linear(idx, cstrides(shape_of(op.result.type)))
            return [em.imod(em.idiv(flat, s), n) for s, n in zip(cstrides(src), src, strict=True)]
        return idx  # to_device on the host

    # kernels ------------------------------------------------------------------------------
    def lower(self) -> None:
        root = self.root
        if self.kind == "matmul" and not isinstance(root.owner, st.MatmulOp):
            root = view_base(root)[0]  # a product written through views (gemm_out)
        getattr(self, "_" + self.kind)(root.owner if self.kind != "map" else root)

    def _store_out(self, v: SSAValue, idx: Sequence[Ix]) -> None:
        shape = shape_of(self.root.type)
        off = self.em.linear(idx, cstrides(shape))
        self.sc.store(v, self.out, off, dtype_name(self.root.type))

    def _map(self, v: SSAValue) -> None:
        reds = [o for o in self.kernel.body.block.ops if isinstance(o, st.ReduceOp)]
        if not reds:
            ivs = self.em.loop_nest(shape_of(v.type))
            self._store_out(self.read(v, ivs), ivs)
            self.em.close_nest(ivs)
            return
        # a row reduction fused in (row_fuse): per row, the reduction, then the row's map
        em, shape = self.em, shape_of(v.type)
        rows = em.loop_nest(shape[:-1])
        for red in reds:
            em.remember(("read", red.result, *rows, 0), self._row_reduce(red, rows))
        iv, _ = em.open_loop(shape[-1])
        idx = [*rows, iv]
        self._store_out(self.read(v, idx), idx)
        em.close_loop()
        em.close_nest(rows)

    def _row_reduce(self, op: st.ReduceOp, rows: Sequence[Ix]) -> SSAValue:
        """Row ``rows``'s reduction over the last axis (as :meth:`_reduce` computes it)."""
        em, sc = self.em, self.sc
        kind = op.name.removeprefix("kina.reduce_")
        dt, n = dtype_name(op.x.type), shape_of(op.x.type)[-1]
        if n > 1:
            iv, (acc,) = em.open_loop(n, [sc.identity(kind, dt)])
            (res,) = em.close_loop([sc.combine(kind, acc, self.read(op.x, [*rows, iv]), dt)])
        else:
            res = self.read(op.x, [*rows, 0])
        return sc.binary("div", res, sc.c(n, dt), dt) if kind == "mean" else res

    def _reduce(self, op: st.ReduceOp) -> None:
        em, sc = self.em, self.sc
        kind = op.name.removeprefix("kina.reduce_")
        xs, ax, keep = shape_of(op.x.type), int_prop(op, "axis"), int_prop(op, "keepdims")
        dt, n = dtype_name(op.x.type), shape_of(op.x.type)[int_prop(op, "axis")]

        def out_idx(xidx: Sequence[Ix]) -> list[Ix]:
            return [0 if d == ax else i for d, i in enumerate(xidx) if keep or d != ax]

        def finish(acc: SSAValue) -> SSAValue:
            return sc.binary("div", acc, sc.c(n, dt), dt) if kind == "mean" else acc

        if math.prod(xs[ax + 1 :]) == 1:  # a row reduction: carry the accumulator
            ivs = [em.loop_nest([s])[0] if d != ax else 0 for d, s in enumerate(xs)]
            if n > 1:
                iv, (acc,) = em.open_loop(n, [sc.identity(kind, dt)])
                xidx = [iv if d == ax else i for d, i in enumerate(ivs)]
                (res,) = em.close_loop([sc.combine(kind, acc, self.read(op.x, xidx), dt)])
            else:
                res = self.read(op.x, ivs)
            self._store_out(finish(res), out_idx(ivs))
            em.close_nest(ivs)
            return
        out_shape = shape_of(op.result.type)
        ivs = em.loop_nest(out_shape)
        self._store_out(sc.identity(kind, dt), ivs)
        em.close_nest(ivs)
        ivs = em.loop_nest(xs)
        off = em.linear(out_idx(ivs), cstrides(out_shape))
        acc = sc.widen(em.load_fresh(self.out, off), dt)
        sc.store(sc.combine(kind, acc, self.read(op.x, ivs), dt), self.out, off, dt)
        em.close_nest(ivs)
        if kind == "mean":
            ivs = em.loop_nest(out_shape)
            off = em.linear(ivs, cstrides(out_shape))
            sc.store(finish(sc.widen(em.load_fresh(self.out, off), dt)), self.out, off, dt)
            em.close_nest(ivs)

    def _softmax(self, op: st.SoftmaxOp) -> None:
        em, sc = self.em, self.sc
        xs, ax, dt = shape_of(op.x.type), int_prop(op, "axis"), dtype_name(op.x.type)
        strides = cstrides(xs)
        outer = [em.loop_nest([s])[0] if d != ax else 0 for d, s in enumerate(xs)]

        def at(iv: Ix) -> list[Ix]:
            return [iv if d == ax else i for d, i in enumerate(outer)]

        hi = self._causal_end(outer[ax - 1], xs[ax]) if causal_rows(op, xs, ax) else None
        # an input computed in the kernel (scale, mask) is computed once: the max pass keeps
        # it in the output row, which the exp pass reads back (a plain input is read twice;
        # f16/bf16 rows would round it, so they compute it twice too)
        keep = computed(op.x) and dt in ("f32", "f64") and KEEP_SOFTMAX_INPUT
        iv, (m,) = em.open_loop(xs[ax], [sc.identity("max", dt)], hi=hi)
        x = self.read(op.x, at(iv))
        if keep:
            sc.store(x, self.out, em.linear(at(iv), strides), dt)
        (m,) = em.close_loop([sc.combine("max", m, x, dt)])
        iv, (s,) = em.open_loop(xs[ax], [sc.c(0, dt)], hi=hi)
        off = em.linear(at(iv), strides)
        x = sc.widen(em.load_fresh(self.out, off), dt) if keep else self.read(op.x, at(iv))
        e = sc.unary("exp", sc.binary("sub", x, m, dt), dt)
        sc.store(e, self.out, off, dt)
        (s,) = em.close_loop([sc.combine("sum", s, e, dt)])
        inv = sc.unary("recip", s, dt)
        iv, _ = em.open_loop(xs[ax], hi=hi)
        off = em.linear(at(iv), strides)
        sc.store(sc.binary("mul", em.load_fresh(self.out, off), inv, dt), self.out, off, dt)
        em.close_loop()
        if hi is not None:  # masked keys: exp(-inf - max) / sum, 0 * (1 / sum) (NaN if all are)
            zero = sc.binary("mul", sc.c(0, dt), inv, dt)
            iv, _ = em.open_loop(xs[ax], lo=hi)
            sc.store(zero, self.out, em.linear(at(iv), strides), dt)
            em.close_loop()
        em.close_nest(outer)

    def _causal_end(self, row: Ix, n: int) -> Ix:
        """Where a causal row's work ends: row ``i`` reads keys ``[0, i + 1)``, rounded up to
        a multiple of 16 (at most ``n``) so the vector loops leave no scalar tail (the extra
        keys are masked: exp gives their exact 0); the rest of the row is stored as 0."""
        em = self.em
        end = em.imul(em.idiv(em.iadd(row, CAUSAL_STEP), CAUSAL_STEP), CAUSAL_STEP)
        if n % CAUSAL_STEP == 0 or isinstance(end, int):
            return min(end, n) if isinstance(end, int) else end
        a, b = em.ix(end), em.ix(n)
        return em.pure("minsi", lambda: arith.MinSIOp(a, b), [a, b])

    def _gather(self, op: st.GatherOp) -> None:
        em, sc = self.em, self.sc
        ishape, (v_rows, d) = shape_of(op.idx.type), shape_of(op.table.type)
        bivs = em.loop_nest(ishape)
        raw = self.read(op.idx, bivs)
        it = raw.type
        neg = sc.compare("lt", raw, em.const(0, it), "i64")
        high = sc.compare("ge", raw, em.const(v_rows, it), "i64")
        bad = sc.binary("add", neg, high, "bool")
        status = self.status
        assert status is not None
        pos = em.linear(bivs, cstrides(ishape))

        def record(e: Emitter) -> None:
            wide = sc.cast(raw, dtype_name(op.idx.type), "i64")
            fields = [e.const(GATHER_OOB, i64), e.const(self.index, i64)]
            fields += [sc.index_to(pos, "i64"), wide, e.const(v_rows, i64)]
            for k, val in enumerate(fields):
                e.store(val, status, k)

        em.if_then(bad, record)
        safe = sc.select(bad, em.const(0, it), raw)
        row = em.pure("index_cast", lambda: arith.IndexCastOp(safe, INDEX), [safe])
        div = em.loop_nest([d])
        self._store_out(self.read(op.table, [row, div[0]]), [*bivs, div[0]])
        em.close_nest(div)
        em.close_nest(bivs)

    def _scatter_add(self, op: st.ScatterAddOp) -> None:
        em, sc = self.em, self.sc
        ishape, (v_rows, d) = shape_of(op.idx.type), shape_of(op.result.type)
        dt = dtype_name(op.result.type)
        zero = em.loop_nest([v_rows, d])
        self._store_out(sc.c(0, dt), zero)
        em.close_nest(zero)
        bivs = em.loop_nest(ishape)
        raw = self.read(op.idx, bivs)
        it = raw.type
        neg = sc.compare("lt", raw, em.const(0, it), "i64")
        high = sc.compare("ge", raw, em.const(v_rows, it), "i64")
        bad = sc.binary("add", neg, high, "bool")
        safe = sc.select(bad, em.const(0, it), raw)
        row = em.pure("index_cast", lambda: arith.IndexCastOp(safe, INDEX), [safe])
        div = em.loop_nest([d])
        off = em.linear([row, div[0]], cstrides((v_rows, d)))
        # x + (-0.0) == x for every x: an out-of-range index changes nothing
        val = sc.select(bad, sc.c(-0.0, dt), self.read(op.src, [*bivs, div[0]]))
        acc = sc.widen(em.load_fresh(self.out, off), dt)
        sc.store(sc.binary("add", acc, val, dt), self.out, off, dt)
        em.close_nest(div)
        em.close_nest(bivs)

    def _concat(self, op: st.ConcatOp) -> None:
        ax, start = int_prop(op, "axis"), 0
        for x in op.xs:
            xs = shape_of(x.type)
            ivs = self.em.loop_nest(xs)
            oidx = [self.em.iadd(i, start) if d == ax else i for d, i in enumerate(ivs)]
            self._store_out(self.read(x, ivs), oidx)
            self.em.close_nest(ivs)
            start += xs[ax]

    def _matmul(self, op: st.MatmulOp) -> None:
        if self.impl == "blas":
            return self._gemm(op)
        em, sc = self.em, self.sc
        a_s, b_s, dt = shape_of(op.lhs.type), shape_of(op.rhs.type), dtype_name(op.lhs.type)
        ivs = em.loop_nest(shape_of(op.result.type))
        bidx, m, n = ivs[:-2], ivs[-2], ivs[-1]
        ab, bb = bcast_index(bidx, a_s[:-2]), bcast_index(bidx, b_s[:-2])
        kk = a_s[-1]
        k, (acc,) = em.open_loop(kk, [sc.c(0, dt)])
        prod = sc.binary("mul", self.read(op.lhs, [*ab, m, k]), self.read(op.rhs, [*bb, k, n]), dt)
        (acc,) = em.close_loop([sc.combine("sum", acc, prod, dt)])
        self._store_out(acc, ivs)
        em.close_nest(ivs)

    def _gemm(self, op: st.MatmulOp) -> None:
        em = self.em
        la, lb = self.layout(op.lhs), self.layout(op.rhs)
        assert la is not None and lb is not None, "fusion materialises BLAS operands"
        (abuf, alay), (bbuf, blay) = la, lb
        a_s, b_s, o_s = shape_of(op.lhs.type), shape_of(op.rhs.type), shape_of(op.result.type)
        m, k, n = a_s[-2], a_s[-1], b_s[-1]
        merged = merged_rows(alay, a_s, b_s)
        out = gemm_output(self.kernel)  # the product's result dims' strides, if viewed
        if merged is not None:
            assert out is None, "gemm_out folds only batched products"
            rows = math.prod(a_s[:-1])
            a, b = self.buf[abuf], self.buf[bbuf]
            self._call(a, merged, merged.offset, b, blay, blay.offset, 0, rows, n, k)
            return
        bivs = em.loop_nest(o_s[:-2])
        abat, bbat = bcast_index(bivs, a_s[:-2]), bcast_index(bivs, b_s[:-2])
        a_off0 = self.offset(alay, [*abat, 0, 0])
        b_off = self.offset(blay, [*bbat, 0, 0])
        if out is None:
            c_off: Ix = em.imul(em.linear(bivs, cstrides(o_s[:-2])), m * n)
            ldc = n
        else:  # written in place in the reader's layout: rows ldc apart (gemm_out)
            c_off, ldc = em.linear(bivs, out[1][:-2]), out[1][-2]
        roles = op.attributes.get("causal")
        a, b = self.buf[abuf], self.buf[bbuf]
        for row, col, mm, nn, kk in gemm_blocks(m, n, k, causal_roles(roles)):
            a_off = self.offset(alay, [*abat, row, 0]) if row else a_off0
            b_blk = self.offset(blay, [*bbat, 0, col]) if col else b_off
            c_blk = em.iadd(c_off, row * ldc + col) if row or col else c_off
            self._call(a, alay, a_off, b, blay, b_blk, c_blk, mm, nn, kk, ldc=ldc)
        em.close_nest(bivs)

    def _call(self, a: SSAValue, alay: Layout, a_off: Ix, b: SSAValue, blay: Layout, b_off: Ix, c_off: Ix, m: int, n: int, k: int, ldc: int | None = None) -> None:  # fmt: skip
        em = self.em
        va, vb = as_blas_matrix(alay), as_blas_matrix(blay)
        assert va is not None and vb is not None
        props = {"m": m, "n": n, "k": k, "lda": va.ld, "ldb": vb.ld, "ldc": ldc or n}
        props |= {"trans_a": int(va.trans), "trans_b": int(vb.trans)}
        operands = [a, em.ix(a_off), b, em.ix(b_off), self.out, em.ix(c_off)]
        gemm = GemmOp.create(
            operands=operands, properties={p: IntegerAttr(x, i64) for p, x in props.items()}
        )
        em.effect(gemm)
