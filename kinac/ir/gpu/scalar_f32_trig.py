"""``x mod pi/2`` for huge f64 arguments that are f32 values (Payne-Hanek), as LLVM IR text.

Why: f32 ``sin``/``cos`` past 1e6 widen to f64 and run :meth:`F64Math.sin_quadrant
<kinac.ir.gpu.scalar_f64.F64Math.sin_quadrant>` (``kinac.prims.rare``). Its reduction for
``|x| >= 2^50`` (:func:`kinac.ir.gpu.scalar_f64_trig.reduce_large`) serves every double: a
53-bit mantissa split in two, seven 24-bit chunks of ``2/pi`` chosen from 42 by selects, and
it took the f32 kernel from 28 to 64 registers. An f32 value has a 24-bit mantissa ``M`` and
an exponent below 128, so ``M c`` is an exact double for a 24-bit chunk ``c`` without a split,
and five chunks from the first that matters (chosen from nine by selects) leave a truncation
error below 2^-70 in ``x 2/pi`` (mod 4): far below what an f32 result needs near the f32
closest to a multiple of pi/2 (tests/test_trig_range.py checks those from 1e7 to 1e38).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kinac.ir.gpu.emit import Val
from kinac.ir.gpu.scalar_f64_trig import (
    mod4,
    pow2_normal,
    quadrant_and_rest,
    two_over_pi_chunks,
    two_sum_add,
)

if TYPE_CHECKING:
    from kinac.ir.gpu.scalar_f64 import F64Math

CHUNKS = 5
FIRSTS = 5  # the first chunk that matters is 0..4 for an exponent below 128


def reduce_large_f32(m: F64Math, ax: Val) -> tuple[Val, Val]:
    """``(n, r)`` with ``ax = n pi/2 + r`` (``n`` integral in 0..3, ``|r| <= pi/4`` up to
    rounding) for a finite f32 value ``ax >= 2^50`` held in a double."""
    sc, table = m.sc, two_over_pi_chunks()
    bits = sc.op(f"bitcast double {ax.ref} to i64", "i64")
    e = sc.op(f"lshr i64 {bits.ref}, 52", "i64")
    e = sc.op(f"sub i64 {e.ref}, 1023", "i64")  # ax = M 2^(e-23), M in [2^23, 2^24)
    mb = sc.op(f"and i64 {bits.ref}, 4503599627370495", "i64")
    mb = sc.op(f"or i64 {mb.ref}, {1075 << 52}", "i64")
    mant = m.mul(sc.op(f"bitcast i64 {mb.ref} to double", "double"), 2.0**-29)  # M, exact
    # term j: M c_(i0+j) 2^(e - 47 - 24 (i0 + j)); its lowest bit is >= 4 (a multiple of 4)
    # for i0 + j <= (e - 49) / 24, so i0 = (e - 25) / 24 (e >= 50 here)
    i0 = sc.op(f"sdiv i64 {sc.op(f'sub i64 {e.ref}, 25', 'i64').ref}, 24", "i64")
    hits = [sc.op(f"icmp eq i64 {i0.ref}, {k}", "i1") for k in range(FIRSTS)]
    s0 = sc.op(f"sub i64 {e.ref}, 47", "i64")
    s0 = sc.op(f"sub i64 {s0.ref}, {sc.op(f'mul i64 {i0.ref}, 24', 'i64').ref}", "i64")
    acc, comp = m.v(0.0), m.v(0.0)
    for j in range(CHUNKS):
        c = m.v(table[j])
        for k in range(1, FIRSTS):
            c = m.sel(hits[k], table[k + j], c)
        s = sc.op(f"sub i64 {s0.ref}, {24 * j}", "i64")
        term = mod4(m, m.mul(m.mul(mant, c), pow2_normal(m, s)))
        acc, comp = two_sum_add(m, acc, comp, term)
    return quadrant_and_rest(m, acc, comp)
