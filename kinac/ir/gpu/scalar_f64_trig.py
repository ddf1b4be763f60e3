"""``x mod pi/2`` for huge f64 arguments (Payne-Hanek), as generated LLVM IR text.

Why: ``sin``/``cos`` reduce ``x = k pi/2 + r`` with ``pi/2`` in three doubles
(:meth:`kinac.ir.gpu.scalar_f64.F64Math.sin_quadrant`); past about 2^53 the product
``x 2/pi`` is no longer the integer ``k`` to within one and the remainder is garbage
(``sin(1e18)`` was 2.4e24, ``sin(1e300)`` inf; numpy, the host and the interpreter give the
true value). For ``|x| >= 2^50`` the reduction here multiplies the 53-bit mantissa ``M`` of
``|x| = M 2^(e-52)`` by the bits of ``2/pi`` that matter at that exponent (the 24-bit chunks
``c_i`` of ``2/pi = sum c_i 2^-24(i+1)``; the ones above them only add multiples of 4), exactly:
``M`` is split into 27 + 26 bits so each product is an exact double, each scaled term is
reduced mod 4 exactly, and the terms are summed with their rounding errors kept (TwoSum).
Seven chunks leave a truncation error below 2^-90 in ``x 2/pi`` (mod 4). The chunk of each
position is chosen by a chain of selects (no table in memory: a kernel's module needs no
globals). The chunks are computed here from Machin's formula in integers.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING

from kinac.ir.gpu.emit import Val

if TYPE_CHECKING:
    from kinac.ir.gpu.scalar_f64 import F64Math

LARGE = 2.0**50
"""From here on :func:`reduce_large` is used (the three-double reduction holds to ~2^53)."""
CHUNKS = 7  # chunks of 2/pi per reduction (7 x 24 bits past the first one that matters)


@functools.cache
def two_over_pi_chunks(n: int = 48) -> tuple[float, ...]:
    """The first ``n`` 24-bit chunks of ``2/pi`` (``0xA2F983, 0x6E4E44, ...``) as doubles."""
    bits = 24 * n + 64

    def atan_inv(k: int) -> int:  # atan(1/k) 2^bits
        total, term, i, sign = 0, (1 << bits) // k, 1, 1
        while term:
            total += sign * (term // i)
            term //= k * k
            i, sign = i + 2, -sign
        return total

    pi = 16 * atan_inv(5) - 4 * atan_inv(239)  # pi 2^bits
    v = (2 << (2 * bits)) // pi  # 2/pi 2^bits
    return tuple(float((v >> (bits - 24 * (i + 1))) & 0xFFFFFF) for i in range(n))


def mod4(m: F64Math, t: Val) -> Val:
    """``t mod 4`` for ``t >= 0`` (exact)."""
    return m.sub(t, m.mul(m.floor(m.mul(t, 0.25)), 4.0))


def pow2_normal(m: F64Math, s: Val) -> Val:
    """``2^s`` for an i64 ``s`` in the normal range."""
    e = m.sc.op(f"add i64 {s.ref}, 1023", "i64")
    e = m.sc.op(f"shl i64 {e.ref}, 52", "i64")
    return m.sc.op(f"bitcast i64 {e.ref} to double", "double")


def reduce_large(m: F64Math, ax: Val) -> tuple[Val, Val]:
    """``(n, r)`` with ``ax = n pi/2 + r`` (``n`` an integral double in 0..3, ``|r| <= pi/4``
    up to rounding) for a finite ``ax >= 2^50``."""
    sc, table = m.sc, two_over_pi_chunks()
    bits = sc.op(f"bitcast double {ax.ref} to i64", "i64")
    e = sc.op(f"lshr i64 {bits.ref}, 52", "i64")
    e = sc.op(f"sub i64 {e.ref}, 1023", "i64")  # ax >= 2^50: positive and normal
    mb = sc.op(f"and i64 {bits.ref}, 4503599627370495", "i64")
    mb = sc.op(f"or i64 {mb.ref}, {1075 << 52}", "i64")
    mant = sc.op(f"bitcast i64 {mb.ref} to double", "double")  # M, an integer in [2^52, 2^53)
    mh = m.floor(m.mul(mant, 2.0**-26))
    ml = m.fma(mh, -(2.0**26), mant)  # exact
    t = sc.op(f"sub i64 {e.ref}, 54", "i64")
    neg = sc.op(f"icmp slt i64 {t.ref}, 0", "i1")
    i0 = sc.op(f"sdiv i64 {t.ref}, 24", "i64")
    i0 = m.b.select(neg, m.b.ci(0, "i64"), i0)  # the first chunk that is not a multiple of 4
    hits = [sc.op(f"icmp eq i64 {i0.ref}, {k}", "i1") for k in range(len(table) - CHUNKS + 1)]
    s0 = sc.op(f"sub i64 {e.ref}, 76", "i64")
    s0 = sc.op(f"sub i64 {s0.ref}, {sc.op(f'mul i64 {i0.ref}, 24', 'i64').ref}", "i64")
    acc, comp = m.v(0.0), m.v(0.0)
    for j in range(CHUNKS):
        c = m.v(table[j])
        for k in range(1, len(hits)):
            c = m.sel(hits[k], table[k + j], c)
        s = sc.op(f"sub i64 {s0.ref}, {24 * j}", "i64")
        hi = mod4(m, m.mul(m.mul(mh, c), pow2_normal(m, sc.op(f"add i64 {s.ref}, 26", "i64"))))
        lo = mod4(m, m.mul(m.mul(ml, c), pow2_normal(m, s)))
        for term in (hi, lo):
            acc, comp = two_sum_add(m, acc, comp, term)
    return quadrant_and_rest(m, acc, comp)


def two_sum_add(m: F64Math, acc: Val, comp: Val, term: Val) -> tuple[Val, Val]:
    """``term`` added to the running sum ``acc + comp`` (TwoSum: the pair stays the exact sum)."""
    total = m.add(acc, term)
    back = m.sub(total, acc)
    err = m.add(m.sub(acc, m.sub(total, back)), m.sub(term, back))
    return total, m.add(comp, err)


def quadrant_and_rest(m: F64Math, acc: Val, comp: Val) -> tuple[Val, Val]:
    """From ``x 2/pi`` mod 4 as the exact pair ``acc + comp``: the quadrant ``n`` (0..3) and the
    remainder ``r`` in ``[-pi/4, pi/4]`` (``x = n pi/2 + r``), shared by the f64 and f32
    large-argument reductions."""
    acc = mod4(m, acc)
    n = m.floor(m.add(acc, 0.5))
    f = m.add(m.sub(acc, n), comp)
    n2 = m.floor(m.add(f, 0.5))
    f = m.sub(f, n2)  # in [-1/2, 1/2]
    n = mod4(m, m.add(n, n2))
    pio2_hi, pio2_lo = 1.5707963267948966, 6.123233995736766e-17
    return n, m.fma(f, pio2_hi, m.mul(f, pio2_lo))
