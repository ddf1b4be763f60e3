"""An emitter of loop nests over flat buffers (``scf`` / ``arith`` / ``memref``).

Kernels are written as straight-line code over loop induction variables; the emitter places
every pure op at the outermost loop level where its operands exist (loop-invariant code is
hoisted by construction: a bias load sits outside the loop over rows, a reduced row value
outside the loop over columns) and reuses an identical op already placed there (CSE). Loads
from kernel inputs count as pure (a kernel never writes what it reads); stores and loads of the
kernel's own output are effects, placed where they are written.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from xdsl.dialects import arith, memref, scf
from xdsl.dialects.builtin import FloatAttr, IndexType, IntegerAttr, IntegerType
from xdsl.ir import Attribute, Block, Operation, SSAValue

INDEX = IndexType()
Ix = int | SSAValue


@dataclass
class _Frame:
    block: Block
    anchor: Operation
    saved: list[Operation] = field(default_factory=list)


class Emitter:
    """Builds code into ``block`` (before its terminator ``end``), opening nested loops."""

    def __init__(self, block: Block, end: Operation) -> None:
        self.frames = [_Frame(block, end)]
        self.level: dict[SSAValue, int] = {a: 0 for a in block.args}
        self.memo: list[dict[Any, SSAValue]] = [{}]
        self.split: tuple[SSAValue, SSAValue] | None = None  # bounds of the first loop

    @property
    def depth(self) -> int:
        return len(self.frames) - 1

    def _lvl(self, vals: Sequence[SSAValue]) -> int:
        return max((self.level.get(v, 0) for v in vals), default=0)

    def _place(self, op: Operation, lvl: int) -> None:
        f = self.frames[lvl]
        f.block.insert_op_before(op, f.anchor)
        for r in op.results:
            self.level[r] = lvl

    def lookup(self, key: Any) -> SSAValue | None:
        for m in self.memo:
            v = m.get(key)
            if v is not None:
                return v
        return None

    def remember(self, key: Any, v: SSAValue) -> SSAValue:
        self.memo[self.level.get(v, 0)][key] = v
        return v

    def pure(
        self, tag: str, make: Callable[[], Operation], operands: Sequence[SSAValue], *extra: Any
    ) -> SSAValue:
        """Create (or reuse) a side-effect-free op at the outermost level it can live at.

        ``tag`` and ``extra`` (attributes, types) together with ``operands`` identify the op.
        """
        key = (tag, *operands, *extra)
        hit = self.lookup(key)
        if hit is not None:
            return hit
        op = make()
        self._place(op, self._lvl(operands))
        return self.remember(key, op.results[0])

    def effect(self, op: Operation) -> Operation:
        """Place an op with effects at the current level."""
        self._place(op, self.depth)
        return op

    # constants and index arithmetic -------------------------------------------------------
    def const(self, value: float | int, t: Attribute) -> SSAValue:
        attr: IntegerAttr | FloatAttr
        if isinstance(t, IndexType | IntegerType):
            attr = IntegerAttr(int(value), t)
        else:
            attr = FloatAttr(float(value), t)  # type: ignore[call-overload]
        key = ("const", repr(value), t)
        hit = self.lookup(key)
        if hit is not None:
            return hit
        op = arith.ConstantOp(attr)
        self._place(op, 0)
        return self.remember(key, op.result)

    def ix(self, v: Ix) -> SSAValue:
        return self.const(v, INDEX) if isinstance(v, int) else v

    def iadd(self, a: Ix, b: Ix) -> Ix:
        if isinstance(a, int) and isinstance(b, int):
            return a + b
        if a == 0:
            return b
        if b == 0:
            return a
        x, y = self.ix(a), self.ix(b)
        return self.pure("addi", lambda: arith.AddiOp(x, y), [x, y])

    def imul(self, a: Ix, c: int) -> Ix:
        if isinstance(a, int):
            return a * c
        if c == 0:
            return 0
        if c == 1:
            return a
        k = self.const(c, INDEX)
        return self.pure("muli", lambda: arith.MuliOp(a, k), [a, k])

    def idiv(self, a: Ix, c: int) -> Ix:
        if isinstance(a, int):
            return a // c
        if c == 1:
            return a
        k = self.const(c, INDEX)
        return self.pure("divui", lambda: arith.DivUIOp(a, k), [a, k])

    def imod(self, a: Ix, c: int) -> Ix:
        if isinstance(a, int):
            return a % c
        if c == 1:
            return 0
        k = self.const(c, INDEX)
        return self.pure("remui", lambda: arith.RemUIOp(a, k), [a, k])

    def linear(self, idx: Sequence[Ix], strides: Sequence[int], offset: int = 0) -> Ix:
        out: Ix = offset
        for i, s in zip(idx, strides, strict=True):
            out = self.iadd(out, self.imul(i, s))
        return out

    # memory -------------------------------------------------------------------------------
    def load(self, buf: SSAValue, off: Ix) -> SSAValue:
        """A load from a read-only input buffer (hoisted and shared like a pure op)."""
        o = self.ix(off)
        return self.pure("load", lambda: memref.LoadOp.get(buf, [o]), [buf, o])

    def load_fresh(self, buf: SSAValue, off: Ix) -> SSAValue:
        """A load of memory this kernel writes: placed here, never shared."""
        return self.effect(memref.LoadOp.get(buf, [self.ix(off)])).results[0]

    def store(self, value: SSAValue, buf: SSAValue, off: Ix) -> None:
        self.effect(memref.StoreOp.get(value, buf, [self.ix(off)]))

    # loops --------------------------------------------------------------------------------
    def open_loop(
        self, n: int, inits: Sequence[SSAValue] = (), lo: Ix = 0, hi: Ix | None = None
    ) -> tuple[SSAValue, list[SSAValue]]:
        """Open ``for iv in range(n)`` carrying ``inits``; returns the iv and the carried values.
        ``lo``/``hi`` narrow the range to ``[lo, hi)`` (index values computed outside the loop:
        a causal softmax row's keys); ``n`` stays the extent the parallel split sees."""
        lb, ub, st = self.ix(lo), self.ix(n if hi is None else hi), self.const(1, INDEX)
        if self.split is not None and n > 1:  # a parallel kernel: this chunk of the loop
            (lb, ub), self.split = self.split, None
        body = Block(arg_types=[INDEX, *(v.type for v in inits)])
        y = scf.YieldOp(*body.args[1:])
        body.add_op(y)
        loop = scf.ForOp(lb, ub, st, list(inits), body)
        self.effect(loop)
        parent = self.frames[-1]
        parent.saved.append(parent.anchor)
        parent.anchor = loop
        self.frames.append(_Frame(body, y))
        self.memo.append({})
        for a in body.args:
            self.level[a] = self.depth
        return body.args[0], list(body.args[1:])

    def close_loop(self, yields: Sequence[SSAValue] = ()) -> list[SSAValue]:
        """Close the innermost loop, yielding ``yields``; returns the loop's results."""
        f = self.frames.pop()
        self.memo.pop()
        if yields:
            old = f.anchor
            f.block.insert_op_before(scf.YieldOp(*yields), old)
            old.detach()
            old.erase()
        loop = f.block.parent_op()
        assert isinstance(loop, scf.ForOp)
        parent = self.frames[-1]
        parent.anchor = parent.saved.pop()
        for r in loop.results:
            self.level[r] = self.depth
        return list(loop.results)

    def loop_nest(self, shape: Sequence[int]) -> list[Ix]:
        """Open one loop per dim of extent > 1 (extent-1 dims index 0); close with ``close_nest``."""
        ivs: list[Ix] = []
        for n in shape:
            ivs.append(self.open_loop(n)[0] if n > 1 else 0)
        return ivs

    def close_nest(self, ivs: Sequence[Ix]) -> None:
        for iv in ivs:
            if not isinstance(iv, int):
                self.close_loop()

    def if_then(self, cond: SSAValue, body: Callable[[Emitter], None]) -> None:
        """``if cond: body`` (effects only); ``body`` emits into a fresh nested frame."""
        blk = Block()
        y = scf.YieldOp()
        blk.add_op(y)
        op = scf.IfOp(cond, [], [blk])
        self.effect(op)
        parent = self.frames[-1]
        parent.saved.append(parent.anchor)
        parent.anchor = op
        self.frames.append(_Frame(blk, y))
        self.memo.append({})
        body(self)
        self.frames.pop()
        self.memo.pop()
        parent.anchor = parent.saved.pop()
