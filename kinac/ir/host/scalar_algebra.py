"""The base scalar operations as host ``arith``/``math`` ops: how the host emits a formula.

Why: the host emitter (:class:`kinac.ir.host.scalar.Scalars`) knows no primitive; it evaluates each
primitive's formula from :mod:`kinac.prims.defs` over this :class:`HostAlgebra`. Values are SSA
registers of the *compute* type (``f32`` for f16/bf16, ``i1`` for bool), so each operation
dispatches on its operand's type. Float adds, multiplies and divides may contract into FMAs;
f32 ``exp``/``log``/``tanh``/``erf`` stay ``math`` ops that the ``expand-math`` pass replaces
by its careful vectorisable implementations; f64 ones (and ``libm``) are libm calls, each
declared in its module by :func:`libm_declarations` (so the module verifies after every pass).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from xdsl.dialects import arith, func, math
from xdsl.dialects.builtin import Float64Type, IntegerType, ModuleOp, StringAttr, f32, f64
from xdsl.ir import Attribute, SSAValue

if TYPE_CHECKING:
    from kinac.ir.host.scalar import Scalars

LIBM = "kinac.libm"  # marks a libm call (its value: the function) and the function's declaration
_FCMP = {"lt": "olt", "le": "ole", "gt": "ogt", "ge": "oge", "eq": "oeq", "ne": "une"}


def _is_int(v: SSAValue) -> bool:
    return isinstance(v.type, IntegerType)


def _is_bool(v: SSAValue) -> bool:
    return isinstance(v.type, IntegerType) and v.type.width.data == 1


class HostAlgebra:
    """:class:`kinac.prims.scalar.Algebra` on host SSA registers (hoisted and CSE'd)."""

    def __init__(self, sc: Scalars) -> None:
        self.sc, self.em = sc, sc.em

    def _op(self, tag: str, cls: type, args: list[SSAValue], *extra: object) -> SSAValue:
        return self.sc._op(tag, cls, args, *extra)

    def _float(self, name: str, a: SSAValue) -> None:
        if _is_int(a):
            raise NotImplementedError(f"{name} is not defined on integers")

    def const(self, value: float | int | bool, like: SSAValue) -> SSAValue:
        t: Attribute = like.type
        if _is_int(like):
            return self.em.const(int(value), t)
        return self.em.const(float(value), t)

    def add(self, a: SSAValue, b: SSAValue) -> SSAValue:
        if _is_bool(a):
            return self._op("ori", arith.OrIOp, [a, b])
        if _is_int(a):
            return self._op("addi", arith.AddiOp, [a, b])
        return self.sc.fop("addf", arith.AddfOp, a, b)

    def sub(self, a: SSAValue, b: SSAValue) -> SSAValue:
        if _is_bool(a):
            raise NotImplementedError("sub is not defined on bool")
        if _is_int(a):
            return self._op("subi", arith.SubiOp, [a, b])
        return self.sc.fop("subf", arith.SubfOp, a, b)

    def mul(self, a: SSAValue, b: SSAValue) -> SSAValue:
        if _is_bool(a):
            return self._op("andi", arith.AndIOp, [a, b])
        if _is_int(a):
            return self._op("muli", arith.MuliOp, [a, b])
        return self.sc.fop("mulf", arith.MulfOp, a, b)

    def div(self, a: SSAValue, b: SSAValue) -> SSAValue:
        if _is_bool(a):
            raise NotImplementedError("div is not defined on bool")
        if _is_int(a):
            return self._int_floordiv(a, b)
        return self.sc.fop("divf", arith.DivfOp, a, b)

    approx_div = div

    def fma(self, a: SSAValue, b: SSAValue, c: SSAValue) -> SSAValue:
        return self._op("fma", math.FmaOp, [a, b, c])

    def neg(self, a: SSAValue) -> SSAValue:
        if _is_int(a):
            return self._op("subi", arith.SubiOp, [self.em.const(0, a.type), a])
        return self._op("negf", arith.NegfOp, [a])

    def abs(self, a: SSAValue) -> SSAValue:
        if _is_int(a):
            return self._op("absi", math.AbsIOp, [a])
        return self._op("abs", math.AbsFOp, [a])

    def _math(self, name: str, cls: type, a: SSAValue) -> SSAValue:
        self._float(name, a)
        return self._op(name, cls, [a])

    def floor(self, a: SSAValue) -> SSAValue:
        return self._math("floor", math.FloorOp, a)

    def sqrt(self, a: SSAValue) -> SSAValue:
        return self._math("sqrt", math.SqrtOp, a)

    def exp(self, a: SSAValue) -> SSAValue:
        return self._math("exp", math.ExpOp, a)

    def log(self, a: SSAValue) -> SSAValue:
        return self._math("log", math.LogOp, a)

    def tanh(self, a: SSAValue) -> SSAValue:
        return self._math("tanh", math.TanhOp, a)

    def erf(self, a: SSAValue) -> SSAValue:
        return self._math("erf", math.ErfOp, a)

    def pow(self, a: SSAValue, b: SSAValue) -> SSAValue:
        if _is_bool(a):
            raise NotImplementedError("pow is not defined on bool")
        if _is_int(a):
            return self._int_pow(a, b)
        return self._op("pow", math.PowFOp, [a, b])

    def maximum(self, a: SSAValue, b: SSAValue) -> SSAValue:
        if _is_bool(a):
            return self._op("ori", arith.OrIOp, [a, b])
        if _is_int(a):
            return self._op("maxsi", arith.MaxSIOp, [a, b])
        return self._op("maximumf", arith.MaximumfOp, [a, b])

    def minimum(self, a: SSAValue, b: SSAValue) -> SSAValue:
        if _is_bool(a):
            return self._op("andi", arith.AndIOp, [a, b])
        if _is_int(a):
            return self._op("minsi", arith.MinSIOp, [a, b])
        return self._op("minimumf", arith.MinimumfOp, [a, b])

    def compare(self, pred: str, a: SSAValue, b: SSAValue) -> SSAValue:
        if not _is_int(a):
            return self._op("cmpf", arith.CmpfOp, [a, b], _FCMP[pred])
        ipred = pred if pred in ("eq", "ne") else ("u" if _is_bool(a) else "s") + pred
        return self._op("cmpi", arith.CmpiOp, [a, b], ipred)

    def select(self, c: SSAValue, a: SSAValue, b: SSAValue) -> SSAValue:
        return self._op("select", arith.SelectOp, [c, a, b])

    def libm(self, name: str, a: SSAValue) -> SSAValue:
        """A call of libm's double-precision ``name`` (f32 widens and rounds back)."""
        self._float(name, a)
        x = a if isinstance(a.type, Float64Type) else self._op("extf", arith.ExtFOp, [a], f64)

        def make() -> func.CallOp:
            call = func.CallOp(name, [x], [f64])
            call.attributes[LIBM] = StringAttr(name)
            return call

        r = self.em.pure(f"libm.{name}", make, [x])
        return (
            r if isinstance(a.type, Float64Type) else self._op("truncf", arith.TruncFOp, [r], f32)
        )

    def _int_floordiv(self, a: SSAValue, b: SSAValue) -> SSAValue:
        t = a.type
        zero, one, m1 = self.em.const(0, t), self.em.const(1, t), self.em.const(-1, t)
        bz = self._op("cmpi", arith.CmpiOp, [b, zero], "eq")
        bm1 = self._op("cmpi", arith.CmpiOp, [b, m1], "eq")
        safe = self.select(self._op("ori", arith.OrIOp, [bz, bm1]), one, b)
        q = self._op("divsi", arith.DivSIOp, [a, safe])
        r = self._op("subi", arith.SubiOp, [a, self._op("muli", arith.MuliOp, [q, safe])])
        rnz = self._op("cmpi", arith.CmpiOp, [r, zero], "ne")
        sign = self._op("xori", arith.XOrIOp, [r, safe])
        neg = self._op("cmpi", arith.CmpiOp, [sign, zero], "slt")
        adj = self._op("andi", arith.AndIOp, [rnz, neg])
        q = self.select(adj, self._op("subi", arith.SubiOp, [q, one]), q)
        q = self.select(bm1, self._op("subi", arith.SubiOp, [zero, a]), q)
        return self.select(bz, zero, q)

    def _int_pow(self, a: SSAValue, b: SSAValue) -> SSAValue:
        t = a.type
        assert isinstance(t, IntegerType)
        zero, one = self.em.const(0, t), self.em.const(1, t)
        em = self.em
        _, (res, base, e) = em.open_loop(t.width.data - 1, [one, a, b])
        bit = self._op("andi", arith.AndIOp, [e, one])
        odd = self._op("cmpi", arith.CmpiOp, [bit, zero], "ne")
        res2 = self.select(odd, self._op("muli", arith.MuliOp, [res, base]), res)
        base2 = self._op("muli", arith.MuliOp, [base, base])
        e2 = self._op("shrsi", arith.ShRSIOp, [e, one])
        pos = em.close_loop([res2, base2, e2])[0]
        m1 = self.em.const(-1, t)
        even = self._op(
            "cmpi", arith.CmpiOp, [self._op("andi", arith.AndIOp, [b, one]), zero], "eq"
        )
        neg = self.select(
            self._op("cmpi", arith.CmpiOp, [a, one], "eq"),
            one,
            self.select(
                self._op("cmpi", arith.CmpiOp, [a, m1], "eq"), self.select(even, one, m1), zero
            ),
        )
        return self.select(self._op("cmpi", arith.CmpiOp, [b, zero], "sge"), pos, neg)


def libm_declarations(module: ModuleOp) -> None:
    """Make ``module``'s libm declarations its libm calls: a ``func.func private @name``
    (marked :data:`LIBM`, appended in name order) for each function called and not yet
    declared, none left for a function no longer called (a pass erased its calls).

    Why: a ``func.call`` must name a function of its module to verify; ``loops-to-llvm``
    turns each declaration into the LLVM ``declare`` of the external it links against.
    """
    calls: dict[str, func.CallOp] = {}
    decls: dict[str, func.FuncOp] = {}
    for o in module.walk():
        if isinstance(o, func.CallOp) and LIBM in o.attributes:
            calls.setdefault(o.callee.string_value(), o)
        elif isinstance(o, func.FuncOp) and LIBM in o.attributes:
            decls[o.sym_name.data] = o
    for name, d in decls.items():
        if name not in calls:
            d.detach()
            d.erase()
    for name in sorted(calls.keys() - decls.keys()):
        call = calls[name]
        d = func.FuncOp.external(name, list(call.arguments.types), list(call.result_types))
        d.attributes[LIBM] = StringAttr(name)
        module.body.block.add_op(d)
