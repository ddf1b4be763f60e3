"""What each Kina primitive computes on one element, as ``arith`` / ``math`` ops.

Registers hold the *compute* type of a dtype (f16 and bf16 compute in f32, holding values
already rounded to their precision; ``bool`` is ``i1``); buffers hold the *storage* type (f16
as ``f16``, bf16 as its ``i16`` bit pattern, bool as ``i8``). The semantics match
``kinac.tir.interp`` (integer floor division with ``x // 0 == 0``, NaN-propagating max/min,
saturating float-to-int casts). No primitive is written here: an elementwise op is its formula
from :mod:`kinac.prims.defs` over :class:`kinac.ir.host.scalar_algebra.HostAlgebra`. Float adds and multiplies may contract into FMAs; nothing else
is relaxed, so infinities and NaNs (the causal mask's ``-inf``) behave as in PyTorch.
"""

from __future__ import annotations

import math as pymath
from collections.abc import Sequence

from xdsl.dialects import arith
from xdsl.dialects.builtin import (
    Float16Type,
    Float64Type,
    IntegerType,
    f32,
    f64,
    i1,
    i8,
    i16,
    i32,
    i64,
)
from xdsl.dialects.utils.fast_math import FastMathFlag
from xdsl.ir import Attribute, SSAValue

from kinac.dtypes import FLOAT_DTYPES as FLOAT
from kinac.ir.host.loopgen import Emitter, Ix
from kinac.ir.host.scalar_algebra import HostAlgebra
from kinac.prims.elementwise import ELEMENTWISE, apply

CONTRACT = arith.FastMathFlagsAttr([FastMathFlag.ALLOW_CONTRACT])
REDUCE_FLAGS = arith.FastMathFlagsAttr([FastMathFlag.ALLOW_CONTRACT, FastMathFlag.REASSOC])

_COMPUTE: dict[str, Attribute] = {
    "f64": f64, "f32": f32, "f16": f32, "bf16": f32, "i64": i64, "i32": i32, "bool": i1,
}  # fmt: skip
_STORAGE: dict[str, Attribute] = {
    "f64": f64, "f32": f32, "f16": Float16Type(), "bf16": i16, "i64": i64, "i32": i32,
    "bool": i8,
}  # fmt: skip


def compute_type(dt: str) -> Attribute:
    return _COMPUTE[dt]


def storage_type(dt: str) -> Attribute:
    return _STORAGE[dt]


class Scalars:
    """Element-level semantics, emitted through an :class:`Emitter` (hoisted and CSE'd)."""

    def __init__(self, em: Emitter) -> None:
        self.em = em
        self.alg = HostAlgebra(self)

    def c(self, value: float | int | bool, dt: str) -> SSAValue:
        if dt == "bool":
            return self.em.const(int(bool(value)), i1)
        if dt in FLOAT:
            return self.round(self.em.const(float(value), compute_type(dt)), dt)
        return self.em.const(int(value), compute_type(dt))

    def _op(self, tag: str, cls: type, args: Sequence[SSAValue], *extra: object) -> SSAValue:
        def make() -> arith.Operation:
            return cls(*args, *extra)

        return self.em.pure(tag, make, list(args), *extra)

    def fop(self, tag: str, cls: type, *args: SSAValue) -> SSAValue:
        """A float binary op that may contract into an FMA."""
        return self._op(tag, cls, args, CONTRACT)

    # storage <-> registers ----------------------------------------------------------------
    def load(self, buf: SSAValue, off: Ix, dt: str) -> SSAValue:
        return self.widen(self.em.load(buf, off), dt)

    def widen(self, raw: SSAValue, dt: str) -> SSAValue:
        if dt == "f16":
            return self._op("extf", arith.ExtFOp, [raw], f32)
        if dt == "bf16":
            w = self._op("extui", arith.ExtUIOp, [raw], i32)
            w = self._op("shli", arith.ShLIOp, [w, self.em.const(16, i32)])
            return self._op("bitcast", arith.BitcastOp, [w], f32)
        if dt == "bool":
            return self._op("cmpi", arith.CmpiOp, [raw, self.em.const(0, i8)], "ne")
        return raw

    def narrow(self, v: SSAValue, dt: str) -> SSAValue:
        if dt == "f16":
            return self._op("truncf", arith.TruncFOp, [v], Float16Type())
        if dt == "bf16":
            w = self._op("bitcast", arith.BitcastOp, [v], i32)
            w = self._op("shrui", arith.ShRUIOp, [w, self.em.const(16, i32)])
            return self._op("trunci", arith.TruncIOp, [w], i16)
        if dt == "bool":
            return self._op("extui", arith.ExtUIOp, [v], i8)
        return v

    def store(self, v: SSAValue, buf: SSAValue, off: Ix, dt: str) -> None:
        self.em.store(self.narrow(v, dt), buf, off)

    def round(self, v: SSAValue, dt: str) -> SSAValue:
        """Round an f32 register to f16 / bf16 precision (a no-op for other dtypes)."""
        if dt == "f16":
            h = self._op("truncf", arith.TruncFOp, [v], Float16Type())
            return self._op("extf", arith.ExtFOp, [h], f32)
        if dt != "bf16":
            return v
        bits = self._op("bitcast", arith.BitcastOp, [v], i32)
        lsb = self._op("shrui", arith.ShRUIOp, [bits, self.em.const(16, i32)])
        lsb = self._op("andi", arith.AndIOp, [lsb, self.em.const(1, i32)])
        r = self._op("addi", arith.AddiOp, [bits, self.em.const(0x7FFF, i32)])
        r = self._op("addi", arith.AddiOp, [r, lsb])
        r = self._op("andi", arith.AndIOp, [r, self.em.const(-65536, i32)])
        rf = self._op("bitcast", arith.BitcastOp, [r], f32)
        nan = self._op("cmpf", arith.CmpfOp, [v, v], "uno")
        return self.select(nan, self.em.const(pymath.nan, f32), rf)

    # elementwise ops: each primitive's formula from kinac.prims.defs over HostAlgebra -------
    def select(self, c: SSAValue, a: SSAValue, b: SSAValue) -> SSAValue:
        return self._op("select", arith.SelectOp, [c, a, b])

    def unary(self, op: str, x: SSAValue, dt: str) -> SSAValue:
        return self.elementwise(op, [x], dt)

    def binary(self, op: str, a: SSAValue, b: SSAValue, dt: str) -> SSAValue:
        return self.elementwise(op, [a, b], dt)

    def compare(self, op: str, a: SSAValue, b: SSAValue, dt: str) -> SSAValue:
        """``op`` on two ``dt`` registers: an ``i1``."""
        return self.elementwise(op, [a, b], dt)

    def elementwise(self, op: str, args: list[SSAValue], dt: str) -> SSAValue:
        """The primitive ``op`` on ``dt`` registers, rounded to ``dt`` (floats)."""
        d = ELEMENTWISE[op]
        r = apply(d, self.alg, args, dt)
        return self.round(r, dt) if dt in FLOAT and d.kind != "compare" else r

    def cast(self, x: SSAValue, src: str, dst: str) -> SSAValue:
        ct = compute_type(dst)
        if src == dst:
            return x
        if dst == "bool":
            if src in FLOAT:
                return self._op("cmpf", arith.CmpfOp, [x, self.em.const(0.0, x.type)], "une")
            return self._op("cmpi", arith.CmpiOp, [x, self.em.const(0, x.type)], "ne")
        if src == "bool":
            if dst in FLOAT:
                return self.select(x, self.em.const(1.0, ct), self.em.const(0.0, ct))
            return self._op("extui", arith.ExtUIOp, [x], ct)
        if src in FLOAT and dst in FLOAT:
            if x.type == ct:
                return self.round(x, dst)
            cls = arith.ExtFOp if isinstance(ct, Float64Type) else arith.TruncFOp
            return self.round(self._op("fcvt", cls, [x], ct), dst)
        if src in FLOAT:
            return self._op("fptosi", arith.FPToSIOp, [x], ct)
        if dst in FLOAT:
            return self.round(self._op("sitofp", arith.SIToFPOp, [x], ct), dst)
        assert isinstance(ct, IntegerType) and isinstance(x.type, IntegerType)
        if ct.width.data > x.type.width.data:
            return self._op("extsi", arith.ExtSIOp, [x], ct)
        return self._op("trunci", arith.TruncIOp, [x], ct)

    def index_to(self, i: Ix, dt: str) -> SSAValue:
        """An index value (iota) as ``dt``."""
        v = self.em.ix(i)
        as_i64 = self._op("index_cast", arith.IndexCastOp, [v], i64)
        return self.cast(as_i64, "i64", dt) if dt != "i64" else as_i64

    # reductions ---------------------------------------------------------------------------
    def identity(self, kind: str, dt: str) -> SSAValue:
        if kind in ("sum", "mean"):
            return self.c(0, dt)
        if dt == "bool":
            return self.c(kind == "min", dt)
        if dt in FLOAT:
            return self.c(-pymath.inf if kind == "max" else pymath.inf, dt)
        bits = 63 if dt == "i64" else 31
        return self.c(-(2**bits) if kind == "max" else 2**bits - 1, dt)

    def combine(self, kind: str, acc: SSAValue, v: SSAValue, dt: str) -> SSAValue:
        """``acc (+|max|min) v`` for a loop-carried accumulator (reassociable floats)."""
        if kind in ("sum", "mean") and dt in FLOAT:
            return self._op("addf", arith.AddfOp, [acc, v], REDUCE_FLAGS)
        if (
            kind == "sum" and dt == "bool"
        ):  # bool + is or (as the GPU's and torch's): i1 addi is xor
            return self.binary("max", acc, v, dt)
        if kind in ("sum", "mean"):
            return self._op("addi", arith.AddiOp, [acc, v])
        return self.binary(kind, acc, v, dt)
