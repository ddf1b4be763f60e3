"""The f64 base operations the GPU has no instruction for, as generated LLVM IR text.

Why: PTX has ``sqrt``/``div``/``fma`` in f64 but no f64 transcendental, and kinac links no
libdevice, so ``exp``, ``log``, ``tanh``, ``erf``, ``pow``, ``log1p``, ``sin`` and ``cos`` on f64
registers are generated here from published algorithms (our own code):

- ``exp``: Cody-Waite reduction ``x = k ln2 + r`` (``ln2`` in two parts, fdlibm's split, through
  FMAs), the Taylor polynomial of ``e^r`` on ``|r| <= ln2/2`` to degree 13 (truncation below
  2^-60), then ``2^k`` applied in two exact halves (subnormal results round once).
- ``log``: ``x = 2^e m`` with ``m`` in ``[sqrt(1/2), sqrt 2)``, ``log m = 2 atanh(s)`` with
  ``s = (m - 1)/(m + 1)`` (``|s| <= 0.172``) carried as a double-double, and the atanh series
  to ``s^23``; the result is a double-double ``(hi, lo)``, so ``pow`` gets extra bits.
- ``pow``: ``exp(b log|a|)`` with ``b log|a|`` as a double-double, the C99 special cases.
- ``log1p``: ``log(u) + (x - (u - 1)) / u`` with ``u = 1 + x`` (the rounding of ``1 + x``
  corrected to first order).
- ``tanh``: from ``expm1`` (the same reduction as ``exp``): ``-t/(t+2)`` with
  ``t = expm1(-2|x|)`` below 1, ``1 - 2/(t+2)`` with ``t = expm1(2|x|)`` above, 1 past 22.
- ``erf``: fdlibm's ``s_erf.c`` rational approximations (Sun Microsystems, 1993: "permission
  to use, copy, modify, and distribute this software is freely granted, provided that this
  notice is preserved"), coefficients below, without branches (each region is selected).
- ``sin``/``cos``: ``k = round(x 2/pi)``, ``r = x - k pi/2`` with ``pi/2`` in three doubles
  through FMAs (accurate to about 2^53), past 2^50 a Payne-Hanek reduction
  (:mod:`kinac.ir.gpu.scalar_f64_trig`, behind a branch), Taylor polynomials on
  ``[-pi/4, pi/4]`` to ``r^19``, and the quadrant ``k mod 4``.

Measured against numpy's f64 (``tests/test_gpu_f64.py``): within 1-2 ulp; the table is in
``docs/gpu.md``. No fast-math flags: the emulated kernels (``emu``) compute bit for bit what
the GPU computes.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from kinac.ir.gpu.emit import Val

if TYPE_CHECKING:
    from kinac.ir.gpu.scalar import Scalars

Num = Val | float

LN2_HI, LN2_LO = 6.93147180369123816490e-01, 1.90821492927058770002e-10  # fdlibm's split
INV_LN2 = 1.4426950408889634
PIO2 = (1.5707963267948966, 6.123233995736766e-17, -1.4973849048591698e-33)  # sum: pi/2
TWO_OVER_PI = 0.6366197723675814
_EXP_TAYLOR = tuple(1 / math.factorial(n) for n in range(13, 1, -1))  # 1/13! .. 1/2!
_EXPM1_TAYLOR = tuple(1 / math.factorial(n) for n in range(17, 1, -1))  # |r| < ln2
_ATANH = tuple(1 / (2 * n + 1) for n in range(11, 0, -1))  # 1/23 .. 1/3
_SIN = tuple((-1) ** n / math.factorial(2 * n + 1) for n in range(9, 0, -1))  # 1/19! .. -1/3!
_COS = tuple((-1) ** n / math.factorial(2 * n) for n in range(9, 1, -1))  # 1/18! .. 1/4!

# fdlibm s_erf.c
_ERX = 8.45062911510467529297e-01
_PP = (-2.37630166566501626084e-05, -5.77027029648944159157e-03, -2.84817495755985104766e-02,
       -3.25042107247001499370e-01, 1.28379167095512558561e-01)  # fmt: skip
_QQ = (-3.96022827877536812320e-06, 1.32494738004321644526e-04, 5.08130628187576562776e-03,
       6.50222499887672944485e-02, 3.97917223959155352819e-01, 1.0)  # fmt: skip
_PA = (-2.16637559486879084300e-03, 3.54783043256182359371e-02, -1.10894694282396677476e-01,
       3.18346619901161753674e-01, -3.72207876035701323847e-01, 4.14856118683748331666e-01,
       -2.36211856075265944077e-03)  # fmt: skip
_QA = (1.19844998467991074170e-02, 1.36370839120290507362e-02, 1.26171219808761642112e-01,
       7.18286544141962662868e-02, 5.40397917702171048937e-01, 1.06420880400844228286e-01,
       1.0)  # fmt: skip
_RA = (-9.81432934416914548592e+00, -8.12874355063065934246e+01, -1.84605092906711035994e+02,
       -1.62396669462573470355e+02, -6.23753324503260060396e+01, -1.05586262253232909814e+01,
       -6.93858572707181764372e-01, -9.86494403484714822705e-03)  # fmt: skip
_SA = (-6.04244152148580987438e-02, 6.57024977031928170135e+00, 1.08635005541779435134e+02,
       4.29008140027567833386e+02, 6.45387271733267880336e+02, 4.34565877475229228821e+02,
       1.37657754143519042600e+02, 1.96512716674392571292e+01, 1.0)  # fmt: skip
_RB = (0.0, -4.83519191608651397019e+02, -1.02509513161107724954e+03,
       -6.37566443368389627722e+02, -1.60636384855821916062e+02, -1.77579549177547519889e+01,
       -7.99283237680523006574e-01, -9.86494292470009928597e-03)  # fmt: skip
_SB = (0.0, -2.24409524465858183362e+01, 4.74528541206955367215e+02,
       2.55305040643316442583e+03, 3.19985821950859553908e+03, 1.53672958608443695994e+03,
       3.25792512996573918826e+02, 3.03380607434824582924e+01, 1.0)  # fmt: skip


class F64Math:
    """The f64 functions above, emitted through a :class:`Scalars` (``double`` registers)."""

    def __init__(self, sc: Scalars) -> None:
        self.sc, self.b = sc, sc.b

    # ---- plumbing ---------------------------------------------------------------------------
    def v(self, x: Num) -> Val:
        return x if isinstance(x, Val) else self.b.cf(float(x), "double")

    def _bin(self, op: str, a: Num, b: Num) -> Val:
        return self.sc.op(f"{op} double {self.v(a).ref}, {self.v(b).ref}", "double")

    def add(self, a: Num, b: Num) -> Val:
        return self._bin("fadd", a, b)

    def sub(self, a: Num, b: Num) -> Val:
        return self._bin("fsub", a, b)

    def mul(self, a: Num, b: Num) -> Val:
        return self._bin("fmul", a, b)

    def div(self, a: Num, b: Num) -> Val:
        return self._bin("fdiv", a, b)

    def fma(self, a: Num, b: Num, c: Num) -> Val:
        return self.sc.intr("fma", self.v(a), self.v(b), self.v(c))

    def neg(self, a: Val) -> Val:
        return self.sc.op(f"fneg double {a.ref}", "double")

    def fabs(self, a: Val) -> Val:
        return self.sc.intr("fabs", a)

    def floor(self, a: Val) -> Val:
        return self.sc.intr("floor", a)

    def cmp(self, pred: str, a: Num, b: Num) -> Val:
        return self.sc.op(f"fcmp {pred} double {self.v(a).ref}, {self.v(b).ref}", "i1")

    def sel(self, c: Val, a: Num, b: Num) -> Val:
        return self.b.select(c, self.v(a), self.v(b))

    def poly(self, x: Val, coeffs: tuple[float, ...]) -> Val:
        r = self.v(coeffs[0])
        for k in coeffs[1:]:
            r = self.fma(r, x, k)
        return r

    def keep_nan(self, x: Val, r: Val) -> Val:
        return self.sel(self.cmp("uno", x, x), x, r)

    def pow2(self, k: Val) -> Val:
        """``2^k`` for an integral double ``k`` in [-1022, 1023] (built from its bits)."""
        ki = self.sc.op(f"fptosi double {k.ref} to i64", "i64")
        e = self.sc.op(f"add i64 {ki.ref}, 1023", "i64")
        e = self.sc.op(f"shl i64 {e.ref}, 52", "i64")
        return self.sc.op(f"bitcast i64 {e.ref} to double", "double")

    def scale(self, y: Val, k: Val) -> Val:
        """``y 2^k`` for integral ``k`` in [-2044, 2046], in two exact halves."""
        k1 = self.floor(self.mul(k, 0.5))
        return self.mul(self.mul(y, self.pow2(k1)), self.pow2(self.sub(k, k1)))

    def reduce_ln2(self, x: Val) -> tuple[Val, Val]:
        """``(k, r)`` with ``x = k ln2 + r``, ``|r| <= ln2/2`` (x clamped to [-746, 710])."""
        xc = self.sc.intr("minnum", self.sc.intr("maxnum", x, self.v(-746.0)), self.v(710.0))
        k = self.floor(self.fma(xc, INV_LN2, 0.5))
        r = self.fma(self.neg(k), LN2_HI, xc)
        return k, self.fma(self.neg(k), LN2_LO, r)

    # ---- exp, expm1 ---------------------------------------------------------------------------
    def exp(self, x: Val) -> Val:
        k, r = self.reduce_ln2(x)
        q = self.poly(r, _EXP_TAYLOR)
        p = self.fma(self.mul(r, r), q, r)  # e^r - 1
        return self.keep_nan(x, self.scale(self.add(p, 1.0), k))

    def expm1(self, x: Val) -> Val:
        """``e^x - 1`` for ``|x| <= 64`` (tanh's range): ``2^k (e^r - 1) + (2^k - 1)``, with
        ``k = 0`` (Taylor to degree 17) below ``ln2``, where ``k = -1`` would cancel."""
        k, _ = self.reduce_ln2(x)
        k = self.sel(self.cmp("olt", self.fabs(x), LN2_HI), 0.0, k)  # no cancellation below ln2
        r = self.fma(self.neg(k), LN2_LO, self.fma(self.neg(k), LN2_HI, x))
        p = self.fma(self.mul(r, r), self.poly(r, _EXPM1_TAYLOR), r)
        s = self.pow2(k)
        return self.fma(s, p, self.sub(s, 1.0))

    # ---- log as a double-double ---------------------------------------------------------------
    def log_dd(self, x: Val) -> tuple[Val, Val]:
        """``log x`` as ``hi + lo`` (for ``x > 0``; other inputs: see :meth:`log`)."""
        sc = self.sc
        small = self.cmp("olt", x, 2.2250738585072014e-308)
        xs = self.sel(small, self.mul(x, 2.0**54), x)
        bits = sc.op(f"bitcast double {xs.ref} to i64", "i64")
        e = sc.op(f"lshr i64 {bits.ref}, 52", "i64")
        e = sc.op(f"and i64 {e.ref}, 2047", "i64")
        ef = self.sub(
            sc.op(f"sitofp i64 {e.ref} to double", "double"), self.sel(small, 1077.0, 1023.0)
        )
        mb = sc.op(f"and i64 {bits.ref}, 4503599627370495", "i64")
        mb = sc.op(f"or i64 {mb.ref}, 4607182418800017408", "i64")
        m = sc.op(f"bitcast i64 {mb.ref} to double", "double")  # [1, 2)
        big = self.cmp("ogt", m, math.sqrt(2.0))
        m = self.sel(big, self.mul(m, 0.5), m)
        ef = self.sel(big, self.add(ef, 1.0), ef)
        f = self.sub(m, 1.0)  # exact
        u = self.add(f, 2.0)
        ul = self.add(self.sub(2.0, u), f)  # 2 + f == u + ul exactly
        s = self.div(f, u)
        rem = self.sub(self.fma(self.neg(s), u, f), self.mul(s, ul))
        sl = self.div(rem, u)  # s + sl = f / (2 + f)
        z = self.mul(s, s)
        t = self.mul(z, self.poly(z, _ATANH))  # atanh(s) = s (1 + t)
        kh = self.mul(ef, LN2_HI)  # exact
        a = self.add(s, s)
        h = self.add(kh, a)  # two-sum(kh, a)
        bb = self.sub(h, kh)
        err = self.add(self.sub(kh, self.sub(h, bb)), self.sub(a, bb))
        lo = self.add(self.fma(ef, LN2_LO, err), self.fma(self.add(s, s), t, self.add(sl, sl)))
        hi = self.add(h, lo)
        return hi, self.sub(lo, self.sub(hi, h))

    def log_specials(self, x: Val, r: Val) -> Val:
        r = self.sel(self.cmp("oeq", x, 0.0), -math.inf, r)
        r = self.sel(self.cmp("olt", x, 0.0), math.nan, r)
        r = self.sel(self.cmp("oeq", x, math.inf), x, r)
        return self.keep_nan(x, r)

    def log(self, x: Val) -> Val:
        hi, lo = self.log_dd(x)
        return self.log_specials(x, self.add(hi, lo))

    def log1p(self, x: Val) -> Val:
        u = self.add(x, 1.0)
        c = self.sub(x, self.sub(u, 1.0))  # the rounding of 1 + x
        cu = self.sel(self.cmp("oeq", c, 0.0), 0.0, self.div(c, u))
        hi, lo = self.log_dd(u)
        r = self.log_specials(u, self.add(hi, self.add(lo, cu)))
        r = self.sel(self.cmp("oeq", x, math.inf), x, r)
        return self.sel(self.cmp("oeq", x, 0.0), x, r)  # keeps -0

    # ---- pow ----------------------------------------------------------------------------------
    def pow(self, a: Val, b: Val) -> Val:
        hi, lo = self.log_dd(self.fabs(a))
        th = self.mul(b, hi)
        tl = self.add(self.fma(b, hi, self.neg(th)), self.mul(b, lo))
        finite = self.cmp("olt", self.fabs(th), 800.0)
        tl = self.sel(finite, tl, 0.0)
        th = self.sel(self.cmp("oeq", self.fabs(a), 0.0), self.mul(b, -math.inf), th)
        th = self.sel(self.cmp("oeq", self.fabs(a), math.inf), self.mul(b, math.inf), th)
        y = self.exp(th)
        r = self.sel(self.cmp("oeq", y, math.inf), y, self.fma(y, tl, y))
        fl = self.floor(b)
        is_int = self.cmp("oeq", fl, b)
        half = self.mul(b, 0.5)
        odd = self.b.and1(is_int, self.cmp("one", self.floor(half), half))
        neg_r = self.sel(odd, self.neg(r), r)
        # a negative base: NaN for a non-integral exponent, except -0 and -inf (C99: +0 or
        # +inf as for +0 and +inf, which the magnitude ``r`` already is)
        edge = self.b.emit(
            f"or i1 {self.cmp('oeq', a, 0.0).ref}, {self.cmp('oeq', self.fabs(a), math.inf).ref}",
            "i1",
        )
        real = self.b.emit(f"or i1 {is_int.ref}, {edge.ref}", "i1")
        neg = self.sel(real, neg_r, math.nan)
        signbit = self.sc.op(f"bitcast double {a.ref} to i64", "i64")
        signbit = self.sc.op(f"icmp slt i64 {signbit.ref}, 0", "i1")
        negative = self.b.and1(signbit, self.cmp("oeq", a, a))
        r = self.sel(negative, neg, r)
        r = self.sel(self.cmp("uno", a, b), math.nan, r)  # a NaN operand (log_dd(NaN) is not)
        one = self.b.and1(
            self.cmp("oeq", self.fabs(a), 1.0), self.cmp("oeq", self.fabs(b), math.inf)
        )
        r = self.sel(one, 1.0, r)
        r = self.sel(self.cmp("oeq", b, 0.0), 1.0, r)
        return self.sel(self.cmp("oeq", a, 1.0), 1.0, r)

    # ---- tanh, erf ----------------------------------------------------------------------------
    def tanh(self, x: Val) -> Val:
        ax = self.fabs(x)
        below = self.cmp("olt", ax, 1.0)
        arg = self.sel(
            below, self.mul(ax, -2.0), self.mul(self.sc.intr("minnum", ax, self.v(22.0)), 2.0)
        )
        t = self.expm1(arg)
        d = self.add(t, 2.0)
        dl = self.add(self.sub(2.0, d), t)  # t + 2 == d + dl exactly (|t| < 2 when below)
        q = self.div(self.neg(t), d)  # -t / (d + dl), corrected to first order:
        q = self.add(
            q, self.div(self.sub(self.fma(self.neg(q), d, self.neg(t)), self.mul(q, dl)), d)
        )
        z = self.sel(below, q, self.sub(1.0, self.div(2.0, d)))
        z = self.sel(self.cmp("oge", ax, 22.0), 1.0, z)
        return self.keep_nan(x, self.sc.intr("copysign", z, x))

    def erf(self, x: Val) -> Val:
        ax = self.fabs(x)
        z = self.mul(x, x)
        small = self.fma(x, self.div(self.poly(z, _PP), self.poly(z, _QQ)), x)  # |x| < 0.84375
        s = self.sub(ax, 1.0)
        mid = self.add(_ERX, self.div(self.poly(s, _PA), self.poly(s, _QA)))  # < 1.25
        axc = self.sc.intr("minnum", self.sc.intr("maxnum", ax, self.v(1.25)), self.v(6.0))
        w = self.div(1.0, self.mul(axc, axc))
        near = self.cmp("olt", axc, 1 / 0.35)
        rr = self.sel(near, _RA[0], _RB[0])
        for ra, rb in zip(_RA[1:], _RB[1:], strict=True):
            rr = self.fma(rr, w, self.sel(near, ra, rb))
        ss = self.sel(near, _SA[0], _SB[0])
        for sa, sb in zip(_SA[1:], _SB[1:], strict=True):
            ss = self.fma(ss, w, self.sel(near, sa, sb))
        bits = self.sc.op(f"bitcast double {axc.ref} to i64", "i64")
        bits = self.sc.op(f"and i64 {bits.ref}, -4294967296", "i64")
        zh = self.sc.op(f"bitcast i64 {bits.ref} to double", "double")  # low word cleared
        e1 = self.exp(self.sub(self.mul(self.neg(zh), zh), 0.5625))
        e2 = self.exp(self.add(self.mul(self.sub(zh, axc), self.add(zh, axc)), self.div(rr, ss)))
        large = self.sub(1.0, self.div(self.mul(e1, e2), axc))
        r = self.sel(self.cmp("olt", ax, 1.25), mid, large)
        r = self.sel(self.cmp("oge", ax, 6.0), 1.0, r)
        r = self.sc.intr("copysign", r, x)
        return self.keep_nan(x, self.sel(self.cmp("olt", ax, 0.84375), small, r))

    # ---- sin, cos -----------------------------------------------------------------------------
    def sin_quadrant(self, x: Val, shift: int, f32_arg: bool = False) -> Val:
        """``sin(x + shift pi/2)`` (``shift`` 0: sin, 1: cos); ``|x| >= 2^50`` is reduced by
        :func:`kinac.ir.gpu.scalar_f64_trig.reduce_large` (``sin(1e18)`` was 2.4e24), or, for
        an ``x`` that is an f32 value (``f32_arg``), by the lighter
        :func:`kinac.ir.gpu.scalar_f32_trig.reduce_large_f32`."""
        from kinac.ir.gpu.scalar_f32_trig import reduce_large_f32
        from kinac.ir.gpu.scalar_f64_trig import LARGE, reduce_large

        if f32_arg:
            reduce_large = reduce_large_f32

        k = self.floor(self.fma(x, TWO_OVER_PI, 0.5))
        r = x
        for part in PIO2:
            r = self.fma(self.neg(k), part, r)
        ax = self.fabs(x)
        big = self.b.and1(self.cmp("oge", ax, LARGE), self.cmp("olt", ax, math.inf))
        nl, rl = self.b.if_values(big, lambda: list(reduce_large(self, ax)), [self.v(0.0)] * 2)
        minus = self.cmp("olt", x, 0.0)  # x = -(n pi/2 + r) = (-n) pi/2 + (-r)
        k = self.sel(big, self.sel(minus, self.neg(nl), nl), k)
        r = self.sel(big, self.sel(minus, self.neg(rl), rl), r)
        z = self.mul(r, r)
        s = self.fma(self.mul(r, z), self.poly(z, _SIN), r)
        hz = self.mul(z, 0.5)
        w = self.sub(1.0, hz)
        tail = self.fma(self.mul(z, z), self.poly(z, _COS), self.sub(self.sub(1.0, w), hz))
        c = self.add(w, tail)
        q = self.add(k, float(shift))
        q = self.sub(q, self.mul(self.floor(self.mul(q, 0.25)), 4.0))  # 0..3
        odd = self.cmp("oeq", self.sub(q, self.mul(self.floor(self.mul(q, 0.5)), 2.0)), 1.0)
        v = self.sel(odd, c, s)
        return self.sel(self.cmp("oge", q, 2.0), self.neg(v), v)

    def libm(self, name: str, x: Val) -> Val | None:
        """The math-library function ``name`` on f64, or ``None`` if not generated here."""
        if name == "log1p":
            return self.log1p(x)
        if name in ("sin", "cos"):
            return self.sin_quadrant(x, 0 if name == "sin" else 1)
        return None
