"""The base scalar operations as LLVM IR text for the GPU: how the GPU emits a formula.

Why: the GPU emitter (:class:`kinac.ir.gpu.scalar.Scalars`) knows no primitive; it evaluates
each primitive's formula from :mod:`kinac.prims.defs` over this :class:`GpuAlgebra`. Values are
registers of the *compute* type (``float`` for f16/bf16, ``i1`` for bool), so each operation
dispatches on its operand's type. ``exp``/``log``/``tanh``/``erf``/``pow`` are the careful
functions of :class:`~kinac.ir.gpu.scalar.Scalars` (f32) and
:class:`~kinac.ir.gpu.scalar_f64.F64Math` (f64, which also generates the ``libm`` functions
``log1p``, ``sin``, ``cos``: no libdevice is linked; f32 ``sin``/``cos`` past 1e6 widen to
it, behind a branch: ``rare``); ``approx_div`` is the GPU's 2-ulp division.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from kinac.ir.gpu.emit import Val

if TYPE_CHECKING:
    from kinac.ir.gpu.scalar import Scalars

_FCMP = {"lt": "olt", "le": "ole", "gt": "ogt", "ge": "oge", "eq": "oeq", "ne": "une"}
_INT_TYPES = ("i1", "i32", "i64")
_F32_VIA_F64 = ("sin", "cos")  # f32 libm calls computed by F64Math and rounded to f32


def _is_int(v: Val) -> bool:
    return v.ty in _INT_TYPES


class GpuAlgebra:
    """:class:`kinac.prims.scalar.Algebra` on GPU registers (LLVM IR text)."""

    def __init__(self, sc: Scalars) -> None:
        self.sc, self.b = sc, sc.b

    def _float(self, name: str, a: Val) -> None:
        if _is_int(a):
            raise NotImplementedError(f"{name} is not defined on integers")

    def const(self, value: float | int | bool, like: Val) -> Val:
        if like.ty == "i1":
            return self.b.ci(int(bool(value)), "i1")
        if _is_int(like):
            return self.b.ci(int(value), like.ty)
        return self.b.cf(float(value), like.ty)

    def _int_or_float(self, iop: str, fop: str, a: Val, b: Val) -> Val:
        if _is_int(a):
            return self.sc.op(f"{iop} {a.ty} {a.ref}, {b.ref}", a.ty)
        return self.sc.fbin(fop, a, b)

    def add(self, a: Val, b: Val) -> Val:
        return self._int_or_float("or" if a.ty == "i1" else "add", "fadd", a, b)

    def sub(self, a: Val, b: Val) -> Val:
        if a.ty == "i1":
            raise NotImplementedError("sub is not defined on bool")
        return self._int_or_float("sub", "fsub", a, b)

    def mul(self, a: Val, b: Val) -> Val:
        return self._int_or_float("and" if a.ty == "i1" else "mul", "fmul", a, b)

    def div(self, a: Val, b: Val) -> Val:
        if a.ty == "i1":
            raise NotImplementedError("div is not defined on bool")
        if _is_int(a):
            return self.sc.floordiv(a, b)
        return self.sc.fbin("fdiv", a, b)

    def approx_div(self, a: Val, b: Val) -> Val:
        self._float("approx_div", a)
        if b.ty == "float":  # ``a * rcp.approx(b)``: PTX's ``div.approx.f32`` is 0 for
            # 2^126 < |b| < 2^128 (silu(-88) was -0, not -1.3e-36); ``rcp.approx`` is full-range
            return self.sc.fbin("fmul", a, self.sc.fbin("fdiv", self.sc.f(1.0), b, "afn"))
        return self.sc.fbin("fdiv", a, b, "afn")

    def fma(self, a: Val, b: Val, c: Val) -> Val:
        return self.sc.intr("fma", a, b, c)

    def neg(self, a: Val) -> Val:
        if _is_int(a):
            return self.sc.op(f"sub {a.ty} 0, {a.ref}", a.ty)
        return self.sc.op(f"fneg {a.ty} {a.ref}", a.ty)

    def abs(self, a: Val) -> Val:
        if not _is_int(a):
            return self.sc.intr("fabs", a)
        ty = a.ty
        self.b.declare(f"declare {ty} @llvm.abs.{ty}({ty}, i1)")
        return self.sc.op(f"call {ty} @llvm.abs.{ty}({ty} {a.ref}, i1 false)", ty)

    def floor(self, a: Val) -> Val:
        self._float("floor", a)
        return self.sc.intr("floor", a)

    def sqrt(self, a: Val) -> Val:
        self._float("sqrt", a)
        return self.sc.intr("sqrt", a)

    def exp(self, a: Val) -> Val:
        self._float("exp", a)
        return self.sc.exp(a)

    def log(self, a: Val) -> Val:
        self._float("log", a)
        return self.sc.log(a)

    def tanh(self, a: Val) -> Val:
        self._float("tanh", a)
        return self.sc.tanh(a)

    def erf(self, a: Val) -> Val:
        self._float("erf", a)
        return self.sc.erf(a)

    def pow(self, a: Val, b: Val) -> Val:
        if a.ty == "i1":
            raise NotImplementedError("pow is not defined on bool")
        if _is_int(a):
            return self.sc.int_pow(a, b)
        return self.sc.pow(a, b)

    def maximum(self, a: Val, b: Val) -> Val:
        if a.ty == "i1":
            return self.sc.op(f"or i1 {a.ref}, {b.ref}", "i1")
        return self.sc.intr("smax" if _is_int(a) else "maximum", a, b)

    def minimum(self, a: Val, b: Val) -> Val:
        if a.ty == "i1":
            return self.sc.op(f"and i1 {a.ref}, {b.ref}", "i1")
        return self.sc.intr("smin" if _is_int(a) else "minimum", a, b)

    def compare(self, pred: str, a: Val, b: Val) -> Val:
        if not _is_int(a):
            return self.sc.op(f"fcmp {_FCMP[pred]} {a.ty} {a.ref}, {b.ref}", "i1")
        ipred = pred if pred in ("eq", "ne") else ("u" if a.ty == "i1" else "s") + pred
        return self.sc.op(f"icmp {ipred} {a.ty} {a.ref}, {b.ref}", "i1")

    def select(self, c: Val, a: Val, b: Val) -> Val:
        return self.b.select(c, a, b)

    def rare(self, cond: Val, slow: Callable[[], Val], usual: Val) -> Val:
        """``slow()`` behind a branch (:func:`kinac.prims.rare.rare`): the ordinary case costs
        a compare and a branch, not the slow path's instructions."""
        return self.b.if_values(cond, lambda: [slow()], [usual])[0]

    def libm(self, name: str, a: Val) -> Val:
        if a.ty == "float" and name in _F32_VIA_F64:  # f32 sin/cos past 1e6: f64, rounded
            w = self.sc.op(f"fpext float {a.ref} to double", "double")
            r64 = self.sc.f64.sin_quadrant(w, 0 if name == "sin" else 1, f32_arg=True)
            return self.sc.op(f"fptrunc double {r64.ref} to float", "float")
        r = self.sc.f64.libm(name, a) if a.ty == "double" else None
        if r is None:  # f32 code uses the primitive's kernel_f32; a new libm name needs F64Math
            raise NotImplementedError(
                f"{name} on {'f64' if a.ty == 'double' else a.ty} has no GPU implementation "
                "(add it to kinac/ir/gpu/scalar_f64.py)"
            )
        return r
