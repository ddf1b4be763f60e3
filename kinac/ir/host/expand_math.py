"""Pass ``expand-math``: f32 ``exp``, ``log``, ``tanh`` and ``erf`` become vectorisable code.

LLVM lowers ``llvm.exp.f32`` on a vector to one ``expf`` call per lane, which stops the loop
vectoriser; and it has no ``erf`` at all. So each f32 transcendental becomes a call to a small
function of the module, written in ``arith``/``math`` ops only (FMA, floor, bit casts, selects),
that LLVM inlines and vectorises. The algorithms are the classic Cephes ones (``expf``, ``logf``,
``tanhf``: about 1.5 ulp) and the rational ``erf`` of Eigen/XLA (absolute error < 4e-7, like
PyTorch's own vectorised ``erf``), checked against numpy in
``tests/test_lower_math.py``; edge cases (``exp(-inf) = 0``, ``log(0) = -inf``, NaN in, NaN out)
are handled with selects. xDSL's own ``expand-math-to-polynomials`` is a Taylor expansion without
range reduction, too inaccurate for this. f64 stays with libm (scalar calls). A rare f32 libm
path (``kinac.prims.rare``) versions its loop first (:mod:`kinac.ir.host.rare_loops`).
"""

from __future__ import annotations

import math as pymath
from collections.abc import Callable

from xdsl.context import Context
from xdsl.dialects import arith, func, math
from xdsl.dialects.builtin import FloatAttr, IntegerAttr, ModuleOp, f32, i32
from xdsl.ir import Block, Operation, Region, SSAValue
from xdsl.passes import ModulePass
from xdsl.rewriter import Rewriter

from kinac.ir.host.rare_loops import version_rare_loops
from kinac.ir.host.scalar_algebra import libm_declarations

_EXP_P: tuple[float, ...] = (1.9875691500e-4, 1.3981999507e-3, 8.3334519073e-3, 4.1665795894e-2)
_EXP_P += (1.6666665459e-1, 5.0000001201e-1)
_LOG_P: tuple[float, ...] = (7.0376836292e-2, -1.1514610310e-1, 1.1676998740e-1, -1.2420140846e-1)
_LOG_P += (1.4249322787e-1, -1.6668057665e-1, 2.0000714765e-1, -2.4999993993e-1)
_LOG_P += (3.3333331174e-1,)
_TANH_P: tuple[float, ...] = (
    -5.70498872745e-3,
    2.06390887954e-2,
    -5.37397155531e-2,
    1.33314422036e-1,
)
_TANH_P += (-3.33332819422e-1,)
# erf as an odd/even rational function on [-4, 4] (as Eigen and XLA): |error| < 4e-7
_ERF_P: tuple[float, ...] = (-2.72614225801306e-10, 2.77068142495902e-08, -2.10102402082508e-06)
_ERF_P += (-5.69250639462346e-05, -7.34990630326855e-04, -2.95459980854025e-03)
_ERF_P += (-1.60960333262415e-02,)
_ERF_Q: tuple[float, ...] = (-1.45660718464996e-05, -2.13374055278905e-04, -1.68282697438203e-03)
_ERF_Q += (-7.37332916720468e-03, -1.42647390514189e-02)


class _B:
    """Straight-line f32/i32 code appended to a block."""

    def __init__(self, block: Block) -> None:
        self.block = block

    def _add(self, op: Operation) -> SSAValue:
        self.block.add_op(op)
        return op.results[0]

    def f(self, v: float) -> SSAValue:
        return self._add(arith.ConstantOp(FloatAttr(v, f32)))

    def i(self, v: int) -> SSAValue:
        return self._add(arith.ConstantOp(IntegerAttr(v, i32)))

    def add(self, a: SSAValue, b: SSAValue) -> SSAValue:
        return self._add(arith.AddfOp(a, b))

    def sub(self, a: SSAValue, b: SSAValue) -> SSAValue:
        return self._add(arith.SubfOp(a, b))

    def mul(self, a: SSAValue, b: SSAValue) -> SSAValue:
        return self._add(arith.MulfOp(a, b))

    def div(self, a: SSAValue, b: SSAValue) -> SSAValue:
        return self._add(arith.DivfOp(a, b))

    def fma(self, a: SSAValue, b: SSAValue, c: SSAValue) -> SSAValue:
        return self._add(math.FmaOp(a, b, c))

    def poly(self, x: SSAValue, coeffs: tuple[float, ...]) -> SSAValue:
        r = self.f(coeffs[0])
        for c in coeffs[1:]:
            r = self.fma(r, x, self.f(c))
        return r

    def cmp(self, a: SSAValue, b: SSAValue, pred: str) -> SSAValue:
        return self._add(arith.CmpfOp(a, b, pred))

    def sel(self, c: SSAValue, a: SSAValue, b: SSAValue) -> SSAValue:
        return self._add(arith.SelectOp(c, a, b))

    def iop(self, cls: type, a: SSAValue, b: SSAValue) -> SSAValue:
        return self._add(cls(a, b))

    def cast(self, cls: type, a: SSAValue, t: object) -> SSAValue:
        return self._add(cls(a, t))

    def call(self, name: str, x: SSAValue) -> SSAValue:
        return self._add(func.CallOp(name, [x], [f32]))


def _exp(b: _B, x: SSAValue) -> SSAValue:
    # below -104 the result rounds to 0 (exp(-103.97) is half the least subnormal); past 88.75
    # to inf (ln of the largest float is 88.7228: the product below overflows on its own)
    lo, hi = b.f(-104.0), b.f(88.75)
    xc = b._add(arith.MinimumfOp(b._add(arith.MaximumfOp(x, lo)), hi))
    n = b._add(math.FloorOp(b.fma(xc, b.f(1.44269504088896341), b.f(0.5))))
    r = b.fma(n, b.f(-0.693359375), xc)
    r = b.fma(n, b.f(2.12194440e-4), r)
    p = b.poly(r, _EXP_P)
    y = b.add(b.fma(p, b.mul(r, r), r), b.f(1.0))
    # y 2^n as y 2^(m-1) 2^(n-m+1): 2^(m-1) without a float-to-int conversion (which LLVM
    # scalarises): the low bits of m + 2^23 + 126 are m + 126, its biased exponent. m = n, or
    # n + 64 when 2^(n-1) is below the normal range (n < -125: a subnormal result, down to
    # n = -150): then the last product rounds y 2^(n+63), a normal float, once into the
    # subnormals (it was flushed to 0: exp(-100) is 3.8e-44)
    tiny = b.cmp(n, b.f(-125.0), "olt")
    m = b.add(n, b.sel(tiny, b.f(64.0), b.f(0.0)))
    biased = b.cast(arith.BitcastOp, b.add(m, b.f(8388734.0)), i32)
    scale = b.cast(arith.BitcastOp, b.iop(arith.ShLIOp, biased, b.i(23)), f32)
    y = b.mul(b.mul(y, scale), b.sel(tiny, b.f(2.0**-63), b.f(2.0)))
    y = b.sel(b.cmp(x, lo, "olt"), b.f(0.0), y)
    return b.sel(b.cmp(x, hi, "ogt"), b.f(pymath.inf), y)


def _log(b: _B, x: SSAValue) -> SSAValue:
    small = b.cmp(x, b.f(1.17549435e-38), "olt")
    xs = b.sel(small, b.mul(x, b.f(8388608.0)), x)
    bits = b.cast(arith.BitcastOp, xs, i32)
    e = b.iop(arith.AndIOp, b.iop(arith.ShRUIOp, bits, b.i(23)), b.i(0xFF))
    e = b.iop(arith.SubiOp, e, b.sel(small, b.i(149), b.i(126)))
    mbits = b.iop(arith.OrIOp, b.iop(arith.AndIOp, bits, b.i(-2139095041)), b.i(0x3F000000))
    m = b.cast(arith.BitcastOp, mbits, f32)
    lt = b.cmp(m, b.f(0.707106781186547524), "olt")
    e = b.sel(lt, b.iop(arith.SubiOp, e, b.i(1)), e)
    ef = b.cast(arith.SIToFPOp, e, f32)
    one = b.f(1.0)
    m = b.sel(lt, b.sub(b.add(m, m), one), b.sub(m, one))
    z = b.mul(m, m)
    y = b.mul(b.mul(b.poly(m, _LOG_P), m), z)
    y = b.fma(ef, b.f(-2.12194440e-4), y)
    y = b.fma(z, b.f(-0.5), y)
    r = b.fma(ef, b.f(0.693359375), b.add(m, y))
    r = b.sel(b.cmp(x, b.f(0.0), "oeq"), b.f(-pymath.inf), r)
    r = b.sel(b.cmp(x, b.f(0.0), "olt"), b.f(pymath.nan), r)
    r = b.sel(b.cmp(x, b.f(pymath.inf), "oeq"), x, r)
    return b.sel(b.cmp(x, x, "uno"), x, r)


def _tanh(b: _B, x: SSAValue) -> SSAValue:
    ax = b._add(math.AbsFOp(x))
    z = b.mul(x, x)
    small = b.fma(b.mul(b.poly(z, _TANH_P), z), x, x)
    t = b.call("kinac_expf", b.mul(ax, b.f(2.0)))
    one = b.f(1.0)
    big = b.sub(one, b.div(b.f(2.0), b.add(t, one)))
    big = b._add(math.CopySignOp(big, x))
    return b.sel(b.cmp(ax, b.f(0.625), "olt"), small, big)


def _erf(b: _B, a: SSAValue) -> SSAValue:
    x = b._add(arith.MinimumfOp(b._add(arith.MaximumfOp(a, b.f(-4.0))), b.f(4.0)))
    x2 = b.mul(x, x)
    p = b.mul(x, b.poly(x2, _ERF_P))
    return b.div(p, b.poly(x2, _ERF_Q))


_FUNCS: dict[type[Operation], tuple[str, Callable[[_B, SSAValue], SSAValue]]] = {
    math.ExpOp: ("kinac_expf", _exp),
    math.LogOp: ("kinac_logf", _log),
    math.TanhOp: ("kinac_tanhf", _tanh),
    math.ErfOp: ("kinac_erff", _erf),
}
_DEPS = {"kinac_tanhf": ("kinac_expf",)}


def math_function(name: str) -> func.FuncOp:
    """The ``func.func private @name(f32) -> f32`` that computes one expanded function."""
    body = next(fn for n, fn in _FUNCS.values() if n == name)
    block = Block(arg_types=[f32])
    b = _B(block)
    block.add_op(func.ReturnOp(body(b, block.args[0])))
    return func.FuncOp(name, ([f32], [f32]), Region(block), "private")


class ExpandMath(ModulePass):
    """Replace f32 ``math.exp/log/tanh/erf`` by calls to module-local implementations."""

    name = "expand-math"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        version_rare_loops(op)
        libm_declarations(op)  # a rare path dropped (its loop cannot re-run): its call is gone
        needed: set[str] = set()
        for o in list(op.walk()):
            entry = _FUNCS.get(type(o))
            if entry is None or o.results[0].type != f32:
                continue
            call = func.CallOp(entry[0], [o.operands[0]], [f32])
            Rewriter.replace_op(o, call)
            needed.add(entry[0])
        for n in list(needed):
            needed.update(_DEPS.get(n, ()))
        for name, _ in _FUNCS.values():
            if name in needed:
                op.body.block.add_op(math_function(name))
