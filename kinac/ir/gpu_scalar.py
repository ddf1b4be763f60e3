"""What each Kina primitive computes on one element, as LLVM IR text for the GPU.

The same semantics as the host's :mod:`kinac.ir.scalar` and the reference
:mod:`kinac.tir.interp`: registers hold the *compute* type (f16 and bf16 compute in f32, bool
is ``i1``), buffers the *storage* type (bf16 as its ``i16`` bit pattern, bool as ``i8``); integer
division floors with ``x // 0 == 0``; float max/min propagate NaN; float-to-int casts truncate,
saturate and map NaN to 0 (``llvm.fptosi.sat``). One difference from the host: inside one fused
kernel, f16/bf16 intermediates stay in f32 and are rounded where they are stored (or cast), as
``torch.compile`` does; PyTorch eager rounds after every op.

f32 ``exp`` is ``ex2.approx`` of ``x log2 e`` with that product's rounding error put back
(about 2 ulp, one MUFU op instead of a polynomial: the bf16 kernels are otherwise ALU-bound);
``log``, ``tanh`` and ``erf`` are the host's algorithms (Cephes, and the rational ``erf`` of
Eigen/XLA) with FMAs. Quotients inside ``sigmoid``/``silu``/``tanh``/``erf`` use the GPU's
approximate division (2 ulp); the ``div`` primitive is IEEE. No libdevice is needed. f64
transcendentals are not supported on the GPU yet (a clear error at lowering). No primitive is
written here: an elementwise op is its formula from :mod:`kinac.prims.defs` over
:class:`kinac.ir.gpu_scalar_algebra.GpuAlgebra`; this class keeps the careful base functions.
"""

from __future__ import annotations

import math
import struct

from kinac.ir.gpu_emit import Builder, Val
from kinac.ir.gpu_scalar_algebra import GpuAlgebra
from kinac.prims.elementwise import ELEMENTWISE, apply

COMPUTE = {"f64": "double", "f32": "float", "f16": "float", "bf16": "float",
           "i64": "i64", "i32": "i32", "bool": "i1"}  # fmt: skip
STORAGE = {"f64": "double", "f32": "float", "f16": "half", "bf16": "i16",
           "i64": "i64", "i32": "i32", "bool": "i8"}  # fmt: skip
ITEMSIZE = {"f64": 8, "f32": 4, "f16": 2, "bf16": 2, "i64": 8, "i32": 4, "bool": 1}
FLOAT = ("f64", "f32", "f16", "bf16")
LOG2E = 1.4426950216293335  # log2(e) rounded to f32
LOG2E_LO = 1.4426950408889634 - LOG2E

_LOG_P = (7.0376836292e-2, -1.1514610310e-1, 1.1676998740e-1, -1.2420140846e-1,
          1.4249322787e-1, -1.6668057665e-1, 2.0000714765e-1, -2.4999993993e-1,
          3.3333331174e-1)  # fmt: skip
_TANH_P = (-5.70498872745e-3, 2.06390887954e-2, -5.37397155531e-2, 1.33314422036e-1,
           -3.33332819422e-1)  # fmt: skip
_ERF_P = (-2.72614225801306e-10, 2.77068142495902e-08, -2.10102402082508e-06,
          -5.69250639462346e-05, -7.34990630326855e-04, -2.95459980854025e-03,
          -1.60960333262415e-02)  # fmt: skip
_ERF_Q = (-1.45660718464996e-05, -2.13374055278905e-04, -1.68282697438203e-03,
          -7.37332916720468e-03, -1.42647390514189e-02)  # fmt: skip


def round_constant(value: float, dt: str) -> float:
    """``value`` as storing it in ``dt`` keeps it (bf16: nearest even; f16: IEEE half)."""
    if dt == "f16":
        return float(struct.unpack("<e", struct.pack("<e", value))[0])
    try:
        f = struct.unpack("<f", struct.pack("<f", value))[0]
    except OverflowError:
        f = math.copysign(math.inf, value)
    if dt != "bf16" or f != f or math.isinf(f):
        return float(f)
    u = struct.unpack("<I", struct.pack("<f", f))[0]
    u = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16) << 16
    return float(struct.unpack("<f", struct.pack("<I", u & 0xFFFFFFFF))[0])


class Scalars:
    """Element-level semantics emitted through a :class:`Builder`."""

    def __init__(self, b: Builder) -> None:
        self.b = b
        self.alg = GpuAlgebra(self)

    def f(self, v: float, ty: str = "float") -> Val:
        return self.b.cf(v, ty)

    def c(self, value: float | int | bool, dt: str) -> Val:
        if dt == "bool":
            return self.b.ci(int(bool(value)), "i1")
        if dt in FLOAT:
            return self.b.cf(round_constant(float(value), dt), COMPUTE[dt])
        return self.b.ci(int(value), COMPUTE[dt])

    def op(self, text: str, ty: str) -> Val:
        return self.b.emit(text, ty)

    def fbin(self, op: str, a: Val, b: Val, flags: str = "contract") -> Val:
        return self.op(f"{op} {flags} {a.ty} {a.ref}, {b.ref}", a.ty)

    def intr(self, name: str, *args: Val) -> Val:
        ty = args[0].ty
        suffix = {"float": "f32", "double": "f64", "i32": "i32", "i64": "i64"}[ty]
        return self.b.call(f"llvm.{name}.{suffix}", ty, list(args))

    # ---- storage <-> registers --------------------------------------------------------------
    def widen(self, raw: Val, dt: str) -> Val:
        if dt == "f16":
            return self.op(f"fpext half {raw.ref} to float", "float")
        if dt == "bf16":
            w = self.op(f"zext i16 {raw.ref} to i32", "i32")
            w = self.op(f"shl i32 {w.ref}, 16", "i32")
            return self.op(f"bitcast i32 {w.ref} to float", "float")
        if dt == "bool":
            return self.op(f"icmp ne i8 {raw.ref}, 0", "i1")
        return raw

    def narrow(self, v: Val, dt: str) -> Val:
        if dt == "f16":
            return self.op(f"fptrunc float {v.ref} to half", "half")
        if dt == "bf16" and self.b.flavour == "nvptx":  # cvt.rn.bf16.f32
            h = self.op(f"fptrunc float {v.ref} to bfloat", "bfloat")
            return self.op(f"bitcast bfloat {h.ref} to i16", "i16")
        if dt == "bf16":
            bits = self.op(f"bitcast float {v.ref} to i32", "i32")
            lsb = self.op(f"lshr i32 {bits.ref}, 16", "i32")
            lsb = self.op(f"and i32 {lsb.ref}, 1", "i32")
            r = self.op(f"add i32 {bits.ref}, 32767", "i32")
            r = self.op(f"add i32 {r.ref}, {lsb.ref}", "i32")
            r = self.op(f"lshr i32 {r.ref}, 16", "i32")
            q = self.op(f"lshr i32 {bits.ref}, 16", "i32")
            q = self.op(f"or i32 {q.ref}, 64", "i32")
            nan = self.op(f"fcmp uno float {v.ref}, 0.0", "i1")
            r = self.b.select(nan, q, r)
            return self.op(f"trunc i32 {r.ref} to i16", "i16")
        if dt == "bool":
            return self.op(f"zext i1 {v.ref} to i8", "i8")
        return v

    def round(self, v: Val, dt: str) -> Val:
        """An f32 register rounded to f16/bf16 precision (no-op for other dtypes)."""
        if dt in ("f16", "bf16"):
            return self.widen(self.narrow(v, dt), dt)
        return v

    # ---- elementwise: each primitive's formula from kinac.prims.defs over GpuAlgebra ---------
    def unary(self, op: str, x: Val, dt: str) -> Val:
        return self.elementwise(op, [x], dt)

    def binary(self, op: str, a: Val, b: Val, dt: str) -> Val:
        return self.elementwise(op, [a, b], dt)

    def compare(self, op: str, a: Val, b: Val, dt: str) -> Val:
        """``op`` on two ``dt`` registers: an ``i1``."""
        return self.elementwise(op, [a, b], dt)

    def elementwise(self, op: str, args: list[Val], dt: str) -> Val:
        """The primitive ``op`` on ``dt`` registers (not rounded: stores round)."""
        try:
            return apply(ELEMENTWISE[op], self.alg, args, dt)
        except NotImplementedError as e:  # name the primitive the user wrote, not a base op
            if str(e).startswith(f"{op} "):
                raise
            raise NotImplementedError(f"{op} ({e})") from None

    @staticmethod
    def need_f32(op: str, ty: str) -> None:
        if ty != "float":
            raise NotImplementedError(f"{op} on f64 is not supported by the CUDA back end yet")

    # ---- integer arithmetic (GpuAlgebra calls these) ------------------------------------------
    def floordiv(self, a: Val, b: Val) -> Val:
        ty, bd = a.ty, self.b
        zero, one, m1 = bd.ci(0, ty), bd.ci(1, ty), bd.ci(-1, ty)
        bz = self.op(f"icmp eq {ty} {b.ref}, 0", "i1")
        bm1 = self.op(f"icmp eq {ty} {b.ref}, -1", "i1")
        safe = bd.select(self.op(f"or i1 {bz.ref}, {bm1.ref}", "i1"), one, b)
        q = self.op(f"sdiv {ty} {a.ref}, {safe.ref}", ty)
        r = self.op(f"srem {ty} {a.ref}, {safe.ref}", ty)
        rnz = self.op(f"icmp ne {ty} {r.ref}, 0", "i1")
        sign = self.op(f"xor {ty} {r.ref}, {safe.ref}", ty)
        neg = self.op(f"icmp slt {ty} {sign.ref}, 0", "i1")
        adj = self.op(f"and i1 {rnz.ref}, {neg.ref}", "i1")
        q = bd.select(adj, self.op(f"sub {ty} {q.ref}, 1", ty), q)
        q = bd.select(bm1, self.op(f"sub {ty} 0, {a.ref}", ty), q)
        del m1
        return bd.select(bz, zero, q)

    def int_pow(self, a: Val, b: Val) -> Val:
        ty, bd = a.ty, self.b
        bits = 63 if ty == "i64" else 31
        res, base, e = bd.ci(1, ty), a, b
        for _ in range(bits):
            odd = self.op(f"trunc {ty} {e.ref} to i1", "i1")
            res = bd.select(odd, self.op(f"mul {ty} {res.ref}, {base.ref}", ty), res)
            base = self.op(f"mul {ty} {base.ref}, {base.ref}", ty)
            e = self.op(f"ashr {ty} {e.ref}, 1", ty)
        even = self.op(f"trunc {ty} {b.ref} to i1", "i1")
        is1 = self.op(f"icmp eq {ty} {a.ref}, 1", "i1")
        ism1 = self.op(f"icmp eq {ty} {a.ref}, -1", "i1")
        sgn = bd.select(even, bd.ci(-1, ty), bd.ci(1, ty))
        neg = bd.select(is1, bd.ci(1, ty), bd.select(ism1, sgn, bd.ci(0, ty)))
        pos = self.op(f"icmp sge {ty} {b.ref}, 0", "i1")
        return bd.select(pos, res, neg)

    def cast(self, x: Val, src: str, dst: str) -> Val:
        ct = COMPUTE[dst]
        if src == dst:
            return x
        if dst == "bool":
            if src in FLOAT:
                return self.op(f"fcmp une {x.ty} {x.ref}, 0.0", "i1")
            return self.op(f"icmp ne {x.ty} {x.ref}, 0", "i1")
        if src == "bool":
            if dst in FLOAT:
                return self.b.select(x, self.f(1.0, ct), self.f(0.0, ct))
            return self.op(f"zext i1 {x.ref} to {ct}", ct)
        if src in FLOAT and dst in FLOAT:
            if x.ty == ct:
                return self.round(x, dst)
            conv = "fpext" if ct == "double" else "fptrunc"
            return self.round(self.op(f"{conv} {x} to {ct}", ct), dst)
        if src in FLOAT:
            isuf, fsuf = ct, "f32" if x.ty == "float" else "f64"
            name = f"llvm.fptosi.sat.{isuf}.{fsuf}"
            return self.b.call(name, ct, [x])
        if dst in FLOAT:
            return self.round(self.op(f"sitofp {x} to {ct}", ct), dst)
        wide = {"i32": 32, "i64": 64}
        if wide[dst] > wide[src]:
            return self.op(f"sext {x} to {ct}", ct)
        return self.op(f"trunc {x} to {ct}", ct)

    def index_to(self, i: Val, dt: str) -> Val:
        """An index value (``iota``) as ``dt``."""
        if i.ty != "i64":
            i = self.op(f"sext {i} to i64", "i64")
        return self.cast(i, "i64", dt) if dt != "i64" else i

    # ---- reductions ---------------------------------------------------------------------------
    def identity(self, kind: str, dt: str) -> Val:
        if kind in ("sum", "mean"):
            return self.c(0, dt)
        if dt == "bool":
            return self.c(kind == "min", dt)
        if dt in FLOAT:
            return self.b.cf(-math.inf if kind == "max" else math.inf, COMPUTE[dt])
        bits = 63 if dt == "i64" else 31
        return self.c(-(2**bits) if kind == "max" else 2**bits - 1, dt)

    def combine(self, kind: str, acc: Val, v: Val, dt: str) -> Val:
        if kind in ("sum", "mean") and dt in FLOAT:
            return self.fbin("fadd", acc, v, "reassoc contract")
        if kind in ("sum", "mean") and dt != "bool":
            return self.op(f"add {acc.ty} {acc.ref}, {v.ref}", acc.ty)
        return self.binary("add" if kind in ("sum", "mean") else kind, acc, v, dt)

    # ---- transcendental functions (f32) ---------------------------------------------------------
    def fma(self, a: Val, b: Val, c: Val) -> Val:
        return self.b.call("llvm.fma.f32", "float", [a, b, c])

    def poly(self, x: Val, coeffs: tuple[float, ...]) -> Val:
        r = self.f(coeffs[0])
        for c in coeffs[1:]:
            r = self.fma(r, x, self.f(c))
        return r

    def fcmp(self, pred: str, a: Val, b: Val) -> Val:
        return self.op(f"fcmp {pred} float {a.ref}, {b.ref}", "i1")

    def ex2(self, t: Val) -> Val:
        """``2 ** t``: the GPU's ``ex2.approx.ftz`` (one MUFU op); libm's on the host."""
        if self.b.flavour == "nvptx":
            return self.b.call("llvm.nvvm.ex2.approx.ftz.f", "float", [t])
        return self.intr("exp2", t)

    def exp(self, x: Val) -> Val:
        """``2 ** (x log2 e)`` with the rounding error of ``x log2 e`` put back (about 2 ulp)."""
        xc = self.intr("minnum", self.intr("maxnum", x, self.f(-104.0)), self.f(89.0))
        t = self.fbin("fmul", xc, self.f(LOG2E), "")
        e = self.fma(xc, self.f(LOG2E), self.op(f"fneg float {t.ref}", "float"))
        e = self.fma(xc, self.f(LOG2E_LO), e)
        r = self.ex2(t)
        y = self.fma(r, self.fbin("fmul", e, self.f(math.log(2.0))), r)
        return self.b.select(self.fcmp("uno", x, x), x, y)

    def log(self, x: Val) -> Val:
        bd = self.b
        small = self.fcmp("olt", x, self.f(1.17549435e-38))
        xs = bd.select(small, self.fbin("fmul", x, self.f(8388608.0)), x)
        bits = self.op(f"bitcast float {xs.ref} to i32", "i32")
        e = self.op(f"lshr i32 {bits.ref}, 23", "i32")
        e = self.op(f"and i32 {e.ref}, 255", "i32")
        e = self.op(f"sub i32 {e.ref}, {bd.select(small, bd.ci(149), bd.ci(126)).ref}", "i32")
        mb = self.op(f"and i32 {bits.ref}, -2139095041", "i32")
        mb = self.op(f"or i32 {mb.ref}, 1056964608", "i32")
        m = self.op(f"bitcast i32 {mb.ref} to float", "float")
        lt = self.fcmp("olt", m, self.f(0.707106781186547524))
        e = bd.select(lt, self.op(f"sub i32 {e.ref}, 1", "i32"), e)
        ef = self.op(f"sitofp i32 {e.ref} to float", "float")
        one = self.f(1.0)
        m = bd.select(
            lt, self.fbin("fsub", self.fbin("fadd", m, m), one), self.fbin("fsub", m, one)
        )
        z = self.fbin("fmul", m, m)
        y = self.fbin("fmul", self.fbin("fmul", self.poly(m, _LOG_P), m), z)
        y = self.fma(ef, self.f(-2.12194440e-4), y)
        y = self.fma(z, self.f(-0.5), y)
        r = self.fma(ef, self.f(0.693359375), self.fbin("fadd", m, y))
        r = bd.select(self.fcmp("oeq", x, self.f(0.0)), self.f(-math.inf), r)
        r = bd.select(self.fcmp("olt", x, self.f(0.0)), self.f(math.nan), r)
        r = bd.select(self.fcmp("oeq", x, self.f(math.inf)), x, r)
        return bd.select(self.fcmp("uno", x, x), x, r)

    def tanh(self, x: Val) -> Val:
        ax = self.intr("fabs", x)
        z = self.fbin("fmul", x, x)
        small = self.fma(self.fbin("fmul", self.poly(z, _TANH_P), z), x, x)
        t = self.exp(self.fbin("fmul", ax, self.f(2.0)))
        one = self.f(1.0)
        big = self.fbin(
            "fsub", one, self.fbin("fdiv", self.f(2.0), self.fbin("fadd", t, one), "afn")
        )
        big = self.intr("copysign", big, x)
        r = self.b.select(self.fcmp("olt", ax, self.f(0.625)), small, big)
        return self.b.select(self.fcmp("uno", x, x), x, r)

    def erf(self, a: Val) -> Val:
        x = self.intr("minnum", self.intr("maxnum", a, self.f(-4.0)), self.f(4.0))
        x2 = self.fbin("fmul", x, x)
        p = self.fbin("fmul", x, self.poly(x2, _ERF_P))
        r = self.fbin("fdiv", p, self.poly(x2, _ERF_Q), "afn")
        return self.b.select(self.fcmp("uno", a, a), a, r)

    def pow(self, a: Val, b: Val) -> Val:
        bd = self.b
        r = self.exp(self.fbin("fmul", b, self.log(self.intr("fabs", a))))
        fl = self.intr("floor", b)
        is_int = self.fcmp("oeq", fl, b)
        half = self.fbin("fmul", b, self.f(0.5))
        odd = bd.and1(is_int, self.fcmp("one", self.intr("floor", half), half))
        neg_r = bd.select(odd, self.op(f"fneg float {r.ref}", "float"), r)
        neg = bd.select(is_int, neg_r, self.f(math.nan))
        r = bd.select(self.fcmp("olt", a, self.f(0.0)), neg, r)
        r = bd.select(self.fcmp("oeq", b, self.f(0.0)), self.f(1.0), r)
        return bd.select(self.fcmp("oeq", a, self.f(1.0)), self.f(1.0), r)
