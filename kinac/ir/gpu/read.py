"""Reading a ``kina.kernel`` body by index, ``V`` lanes at a time, for a GPU thread.

``read(v, idx, lax)`` produces the ``V`` elements of ``v`` at the index ``idx`` whose position
``lax`` advances by one per lane (``lax=None``: all lanes read the same element). It recurses
through elementwise ops (which broadcast) and views down to loads of the kernel's input buffers,
like the host's :class:`kinac.ir.host.kernel_loops.KernelLowering`, but decides per load how the lanes
map to memory, from the view's layout (:mod:`kinac.ir.layout`):

- lanes contiguous in memory and the offset provably a multiple of ``V``: one vector load
  (16 bytes for 4 x f32 or 8 x bf16), split in 16-byte pieces when wider;
- lanes at a fixed stride: ``V`` scalar loads; stride 0 (a broadcast): one load for all lanes;
- anything else (a view that is no layout): one index computation per lane.

Results are memoised per (value, index) within a scope, so a row kernel that reads its row
in several passes loads it once and keeps it in registers. Special values (the row reductions
of a fused norm, a softmax) are supplied by the kernel generator through ``special``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Generator, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from xdsl.dialects.builtin import IntegerAttr
from xdsl.ir import BlockArgument, Operation, SSAValue

from kinac.dtypes import ITEMSIZE
from kinac.ir.dialects import kina as el
from kinac.ir.dialects import kina_struct as st
from kinac.ir.dialects.kina import dtype_name, int_prop, ints_prop, shape_of
from kinac.ir.gpu.emit import Builder, Ix, Val
from kinac.ir.gpu.scalar import STORAGE, Scalars
from kinac.ir.layout import Layout, cstrides
from kinac.ir.trampoline import evaluate
from kinac.ir.views import VIEWS, chain_layout, view_base

Lanes = list[Val]
Special = Callable[[list[Ix], int | None], Lanes]
ReadReq = tuple[SSAValue, tuple[Ix, ...], int | None]  # a value, its index, the lane axis


def bcast(idx: Sequence[Ix], lax: int | None, shape: Sequence[int]) -> tuple[list[Ix], int | None]:
    """The index into an operand of ``shape`` broadcast to ``idx``, and its lane position."""
    lead = len(idx) - len(shape)
    new: list[Ix] = [0 if n == 1 else idx[lead + j] for j, n in enumerate(shape)]
    nl = None
    if lax is not None and lax >= lead and shape[lax - lead] != 1:
        nl = lax - lead
    return new, nl


def _key(idx: Sequence[Ix]) -> tuple[Any, ...]:
    return tuple(i if isinstance(i, int) else i.ref for i in idx)


class BodyReader:
    """Reads values of one kernel body (see the module docstring)."""

    def __init__(
        self, body_args: Sequence[SSAValue], ptrs: Sequence[Val], b: Builder, ix: str, vec: int
    ) -> None:
        self.buf = dict(zip(body_args, ptrs, strict=True))
        self.b, self.sc, self.ix, self.vec = b, Scalars(b), ix, vec
        self.memo: list[dict[Any, Lanes]] = [{}]
        self.special: dict[SSAValue, Special] = {}

    @contextmanager
    def scope(self) -> Iterator[None]:
        """Values memoised inside (a loop or branch body) are forgotten after it."""
        self.memo.append({})
        try:
            yield
        finally:
            self.memo.pop()

    def uniform(self, v: Val) -> Lanes:
        return [v] * self.vec

    def lanewise(self, fn: Callable[..., Val], *lists: Lanes) -> Lanes:
        """``fn`` applied lane by lane (once when every operand is uniform)."""
        if all(all(x is lst[0] for x in lst) for lst in lists):
            return self.uniform(fn(*(lst[0] for lst in lists)))
        return [fn(*args) for args in zip(*lists, strict=True)]

    # ---- reading ---------------------------------------------------------------------------
    def read(self, v: SSAValue, idx: Sequence[Ix], lax: int | None) -> Lanes:
        """The lanes of ``v`` at ``idx``; iterative (see :mod:`kinac.ir.trampoline`), so fused
        chains of any length read without recursion."""
        return evaluate((v, tuple(idx), lax), self._memo_hit, self._read, self._memo_store)

    def _memo_hit(self, req: ReadReq) -> Lanes | None:
        key = (req[0], _key(req[1]), req[2])
        for m in reversed(self.memo):
            hit = m.get(key)
            if hit is not None:
                return hit
        return None

    def _memo_store(self, req: ReadReq, lanes: Lanes) -> None:
        self.memo[-1][(req[0], _key(req[1]), req[2])] = lanes

    def read1(self, v: SSAValue, idx: Sequence[Ix]) -> Val:
        return self.read(v, idx, None)[0]

    def _read(self, req: ReadReq) -> Generator[ReadReq, Lanes, Lanes]:
        v, idx, lax = req[0], list(req[1]), req[2]
        sc, dt = self.sc, dtype_name(v.type)
        hook = self.special.get(v)
        if hook is not None:
            return hook(idx, lax)
        if isinstance(v, BlockArgument):
            return self.load(self.buf[v], Layout.contiguous(shape_of(v.type)), idx, lax, dt)
        op = v.owner
        assert isinstance(op, Operation)
        if isinstance(op, VIEWS):
            base, chain = view_base(v)
            lay = chain_layout(base, chain) if base in self.buf else None
            if lay is not None:
                return self.load(self.buf[base], lay, idx, lax, dt)
            out: Lanes = []
            for j in range(self.vec if lax is not None else 1):  # an index per lane
                i = list(idx)
                if lax is not None:
                    i[lax] = self.b.iadd(i[lax], j, self.ix)
                out.append((yield (op.x, tuple(self.view_index(op, i)), None))[0])
            return out if lax is not None else self.uniform(out[0])
        if isinstance(op, el.UnaryOp):
            name = op.name[5:]
            x = yield (op.x, req[1], lax)
            return self.lanewise(lambda x: sc.unary(name, x, dt), x)
        if isinstance(op, el.CastOp):
            src = dtype_name(op.x.type)
            x = yield (op.x, req[1], lax)
            return self.lanewise(lambda x: sc.cast(x, src, dt), x)
        if isinstance(op, el.BinaryOp):
            li, ll = bcast(idx, lax, shape_of(op.lhs.type))
            a = yield (op.lhs, tuple(li), ll)
            ri, rl = bcast(idx, lax, shape_of(op.rhs.type))
            b = yield (op.rhs, tuple(ri), rl)
            name, src = op.name[5:], dtype_name(op.lhs.type)
            if isinstance(op, el.CompareOp):
                return self.lanewise(lambda x, y: sc.compare(name, x, y, src), a, b)
            # ``div`` is IEEE (correctly rounded) at every vector width, even when the divisor
            # is uniform over the lanes: ``x * (1 / b)`` is not ``x / b`` (docs/gpu-precision.md)
            return self.lanewise(lambda x, y: sc.binary(name, x, y, dt), a, b)
        if isinstance(op, el.WhereOp):
            got: list[Lanes] = []
            for operand in op.operands:
                oi, ol = bcast(idx, lax, shape_of(operand.type))
                got.append((yield (operand, tuple(oi), ol)))
            return self.lanewise(self.b.select, *got)
        if isinstance(op, st.ConstOp | st.FullOp):
            val = op.value
            assert isinstance(val, IntegerAttr) or hasattr(val, "value")
            return self.uniform(sc.c(val.value.data, dt))  # type: ignore[union-attr]
        if isinstance(op, st.IotaOp):
            ax = int_prop(op, "axis")
            if ax == lax:
                return [sc.index_to(self.b.ival(self.b.iadd(idx[ax], j, self.ix), self.ix), dt)
                        for j in range(self.vec)]  # fmt: skip
            return self.uniform(sc.index_to(self.b.ival(idx[ax], self.ix), dt))
        raise NotImplementedError(f"{op.name} cannot be recomputed inside a GPU kernel")

    def per_lane(self, idx: list[Ix], lax: int | None, one: Callable[[list[Ix]], Val]) -> Lanes:
        if lax is None:
            return self.uniform(one(idx))
        out = []
        for j in range(self.vec):
            i = list(idx)
            i[lax] = self.b.iadd(i[lax], j, self.ix)
            out.append(one(i))
        return out

    def view_index(self, op: st.ViewOp, idx: list[Ix]) -> list[Ix]:
        """The input index of a view at output index ``idx`` (when it is no layout)."""
        b, ix = self.b, self.ix
        src = shape_of(op.x.type)
        if isinstance(op, st.TransposeOp):
            res: list[Ix] = [0] * len(idx)
            for i, p in enumerate(ints_prop(op, "perm")):
                res[p] = idx[i]
            return res
        if isinstance(op, st.BroadcastToOp):
            return bcast(idx, None, src)[0]
        if isinstance(op, st.SliceOp):
            res = list(idx)
            ax = int_prop(op, "axis")
            res[ax] = b.iadd(res[ax], int_prop(op, "start"), ix)
            return res
        if isinstance(op, st.RepeatInterleaveOp):
            res = list(idx)
            ax = int_prop(op, "axis")
            res[ax] = b.idiv(res[ax], int_prop(op, "repeats"), ix)
            return res
        if isinstance(op, st.ReshapeOp):
            flat = self.linear(idx, cstrides(shape_of(op.result.type)))
            return [
                b.imod(b.idiv(flat, s, ix), n, ix) for s, n in zip(cstrides(src), src, strict=True)
            ]
        return idx  # to_device / to_host: same elements

    # ---- index arithmetic and memory ---------------------------------------------------------
    def linear(self, idx: Sequence[Ix], strides: Sequence[int], offset: int = 0) -> Ix:
        out: Ix = offset
        for i, s in zip(idx, strides, strict=True):
            out = self.b.iadd(out, self.b.imul(i, s, self.ix), self.ix)
        return out

    def unflatten(self, flat: Ix, shape: Sequence[int]) -> list[Ix]:
        """The row-major multi-index of ``flat`` in ``shape``."""
        b, ix = self.b, self.ix
        out: list[Ix] = []
        rest = flat
        for n in reversed(shape):
            out.append(b.imod(rest, n, ix) if n > 1 else 0)
            rest = b.idiv(rest, n, ix)
        return list(reversed(out))

    def offset(self, lay: Layout, idx: Sequence[Ix]) -> Ix:
        b, ix = self.b, self.ix
        off: Ix = lay.offset
        for i, dim in zip(idx, lay.dims, strict=True):
            inner = math.prod(n for n, _ in dim)
            for j, (n, s) in enumerate(dim):
                inner //= n
                if s == 0 or n == 1:
                    continue
                t = b.idiv(i, inner, ix) if inner > 1 else i
                t = b.imod(t, n, ix) if j > 0 else t
                off = b.iadd(off, b.imul(t, s, ix), ix)
        return off

    def aligned(self, lay: Layout, lax: int) -> bool:
        """Is the lane-0 offset a multiple of ``V`` for every index (with idx[lax] % V == 0)?"""
        v = self.vec
        if lay.offset % v:
            return False
        for d, dim in enumerate(lay.dims):
            for k, (_, s) in enumerate(dim):
                if d == lax and k == len(dim) - 1:
                    continue
                if s % v:
                    return False
        return True

    def load(self, ptr: Val, lay: Layout, idx: list[Ix], lax: int | None, dt: str) -> Lanes:
        v = self.vec
        if lax is None or v == 1:
            return self.uniform(self.scalar_load(ptr, self.offset(lay, idx), dt))
        n, s = lay.dims[lax][-1]
        if n % v:
            return self.per_lane(idx, lax, lambda i: self.scalar_load(ptr, self.offset(lay, i), dt))
        off0 = self.offset(lay, idx)
        if s == 0:
            return self.uniform(self.scalar_load(ptr, off0, dt))
        if s == 1 and self.aligned(lay, lax):
            return self.vector_load(ptr, off0, dt)
        return [self.scalar_load(ptr, self.b.iadd(off0, j * s, self.ix), dt) for j in range(v)]

    def scalar_load(self, ptr: Val, off: Ix, dt: str) -> Val:
        stt = STORAGE[dt]
        p = self.b.gep(stt, ptr, off, self.ix)
        return self.sc.widen(self.b.load(stt, p, ITEMSIZE[dt]), dt)

    def pieces(self, dt: str) -> int:
        """Elements per (at most 16-byte) vector access."""
        return max(1, min(self.vec, 16 // ITEMSIZE[dt]))

    def vector_load(self, ptr: Val, off0: Ix, dt: str) -> Lanes:
        stt, pe = STORAGE[dt], self.pieces(dt)
        if pe == 1:
            return [
                self.scalar_load(ptr, self.b.iadd(off0, j, self.ix), dt) for j in range(self.vec)
            ]
        vty = f"<{pe} x {stt}>"
        out: Lanes = []
        for p in range(self.vec // pe):
            q = self.b.gep(stt, ptr, self.b.iadd(off0, p * pe, self.ix), self.ix)
            vec = self.b.load(vty, q, pe * ITEMSIZE[dt])
            out += [self.sc.widen(self.b.extract(vec, j, stt), dt) for j in range(pe)]
        return out

    def store(self, ptr: Val, off0: Ix, vals: Lanes, dt: str) -> None:
        """Store lanes at consecutive offsets (``off0`` a multiple of ``V``)."""
        stt, pe = STORAGE[dt], self.pieces(dt)
        raw = [self.sc.narrow(x, dt) for x in vals]
        if pe == 1 or len(vals) == 1:
            for j, r in enumerate(raw):
                q = self.b.gep(stt, ptr, self.b.iadd(off0, j, self.ix), self.ix)
                self.b.store(r, q, ITEMSIZE[dt])
            return
        for p in range(len(vals) // pe):
            q = self.b.gep(stt, ptr, self.b.iadd(off0, p * pe, self.ix), self.ix)
            self.b.store(self.b.pack(raw[p * pe : (p + 1) * pe]), q, pe * ITEMSIZE[dt])
