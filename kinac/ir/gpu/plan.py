"""Launch-shape decisions of the GPU lowering: vector widths, threads per row, grid sizes.

Pure functions of shapes and dtypes (unit-tested on the CPU), so the shape of every launch is
part of the lowered entry and of its cache key, never decided at run time.

- **Vector width** ``V``: a thread handles ``V`` consecutive elements of the innermost dim, so
  that its loads and stores are 16 bytes where alignment allows (4 x f32, 8 x bf16).
- **Map kernels**: 256 threads per block; each thread handles ``U`` vector groups (``U`` loads
  in flight) only when the grid still has 64 blocks per SM (a coarser grid ends on a tail).
- **Row kernels** (reductions, softmax, norms over the last axis): ``T`` threads per row (a
  power of two; a warp, or part of one for short rows, or several warps sharing partials
  through shared memory for long ones) and ``C <= MAX_CHUNKS`` chunks of ``T * V`` elements per
  row, fully unrolled, so a row is read once and kept in registers between passes; ``T`` grows
  until a thread holds about 32 values (more would cost occupancy).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

BLOCK = 256
MAX_CHUNKS = 16
MAX_VALUES = 32
CHUNK_TARGET = 4
SMS = 132  # H200; only a sizing heuristic (a different GPU runs the same code correctly)
I32_LIMIT = 2**31 - 1


@dataclass(frozen=True)
class RowConfig:
    """``T`` threads per row, ``C`` unrolled chunks of ``T * V`` elements, ``rows`` per block."""

    threads: int
    chunks: int
    vec: int
    rows_per_block: int

    @property
    def block(self) -> int:
        return self.threads * self.rows_per_block


def vector_width(last: int, itemsize: int, cap: int = 8) -> int:
    """The widest power of two ``V <= min(16 / itemsize, cap)`` that divides ``last``."""
    v = max(1, min(16 // max(itemsize, 1), cap))
    while v > 1 and last % v:
        v //= 2
    return v


def next_pow2(n: int) -> int:
    p = 1
    while p < n:
        p *= 2
    return p


MAP_BLOCKS_PER_SM = 64  # a map thread takes more vector groups only past this many blocks a SM


def map_unroll(groups: int) -> int:
    """Vector groups per thread: 4 or 2 while the grid still has :data:`MAP_BLOCKS_PER_SM`
    blocks per SM, else 1. Measured on the H200 (2026-12-02, ``benches/gpu_map_ab.py``: the 45M
    block's ``silu(gate) * up``, 4096 x 5632 bf16, in place): 4 groups (the rule before, >= 2
    blocks a SM) 38.5 us, 85% of copy bandwidth; 2 groups 35.3 us; 1 group 33.5 us, 98%: a
    grid of 21 blocks a SM ends on a tail that 85 blocks a SM do not have. At 8192 x 8192 4
    and 2 groups both reach 98-99%. Issuing every load before the arithmetic (the 4-group
    kernel waits on its first group's two loads one after the other) did not close the gap."""
    for u in (4, 2):
        if -(-groups // (BLOCK * u)) >= MAP_BLOCKS_PER_SM * SMS:
            return u
    return 1


def map_grid(groups: int, unroll: int) -> int:
    return max(1, -(-groups // (BLOCK * unroll)))


def row_config(length: int, vec: int, rows: int) -> RowConfig | None:
    """Threads and chunks for rows of ``length`` elements (``None``: too long to unroll)."""
    vectors = -(-length // vec)
    if vectors <= 32 * CHUNK_TARGET:
        t = min(32, next_pow2(-(-vectors // CHUNK_TARGET)))
    else:
        per_thread = max(1, MAX_VALUES // vec)  # registers: a row slice of 32 values
        t = min(1024, next_pow2(-(-vectors // per_thread)))
        t = max(t, 32)
        # more threads per row when there are too few rows to fill the GPU with warps
        while t < 1024 and rows * t < 64 * 32 * SMS and -(-vectors // (2 * t)) >= 2:
            t *= 2
    chunks = -(-vectors // t)
    if chunks > MAX_CHUNKS:
        return None
    per_block = max(1, BLOCK // t) if t <= BLOCK else 1
    return RowConfig(t, chunks, vec, per_block)


def index_type(*numels: int) -> str:
    """``i32`` index arithmetic when every offset fits, else ``i64``."""
    return "i32" if max(numels, default=0) < I32_LIMIT // 2 else "i64"


# ---- reductions that one kernel would run with too little parallelism ----------------------
ROW_SPLIT_MAX = 4096
"""The longest first-stage row of a split reduction (a row kernel of up to 256 threads)."""
COLUMN_MAX_STEPS = 64
"""A column reduction's thread may loop this many times before the reduction is split."""
COLUMN_THREADS = 1 << 15
"""A column reduction with at least this many threads keeps its loop (it fills the GPU)."""


def divisors(n: int) -> list[int]:
    """The divisors of ``n``, ascending."""
    small = [d for d in range(1, math.isqrt(n) + 1) if n % d == 0]
    return sorted({*small, *(n // d for d in small)})


def reduction_split(shape: tuple[int, ...], axis: int, itemsize: int) -> int | None:
    """The inner factor ``Q`` of ``n = shape[axis] = P * Q`` to reduce first, or ``None`` when
    one kernel reduces ``axis`` with enough parallelism.

    Why: a reduction over the last axis whose rows are too long for the row kernel, and a
    reduction over another axis with few outputs, run as a thread per output group looping
    over the whole axis: the 45M block's scalar loss was one thread adding 8.4M values
    (~280 ms on the H200, 11-38x eager). Reducing ``[.., P, Q, ..]`` over ``Q`` and then over
    ``P`` makes both stages parallel, in a fixed order (deterministic, no atomics).
    Rows: the largest divisor ``Q <= ROW_SPLIT_MAX`` the row kernel takes. Columns (more than
    ``COLUMN_MAX_STEPS`` steps, fewer than ``COLUMN_THREADS`` threads): the divisor nearest
    ``sqrt(n)``, so both stages loop about ``sqrt(n)`` times (a stage still too long is split
    again). ``None`` as well when ``n`` has no useful divisor (a prime length).
    """
    n = shape[axis]
    lead = math.prod(shape[:axis])
    inner = math.prod(shape[axis + 1 :])
    if n <= 1:
        return None
    if inner == 1:
        if row_config(n, vector_width(n, itemsize), lead) is not None:
            return None
        for q in reversed(divisors(n)):
            if q <= ROW_SPLIT_MAX and q < n and q >= 16:
                if row_config(q, vector_width(q, itemsize), lead * (n // q)) is not None:
                    return q
        return None
    vec = vector_width(shape[-1], itemsize)
    if n <= COLUMN_MAX_STEPS or lead * inner // vec >= COLUMN_THREADS:
        return None
    cands = [d for d in divisors(n) if 1 < d < n]
    if not cands:
        return None
    root = math.sqrt(n)
    return min(cands, key=lambda d: (abs(math.log(d / root)), d))


# ---- kernels that may write their output over an input (the arena's first fit) ------------
INPLACE_KINDS = frozenset({"map", "row", "softmax"})
_ROW_OPS = frozenset({"reduce_sum", "reduce_mean", "reduce_max", "reduce_min", "softmax"})
_FREE_OPS = frozenset({"kernel", "yield", "const", "iota", "full"})
_VIEW_OPS = frozenset({"reshape", "broadcast_to"})
_OP = re.compile(
    r'(?:(%\w+) = )?"kina\.(\w+)"\(([^)]*)\)(?: <\{([^}]*)\}>)? : \(([^)]*)\) -> (tensor<[^>]*>)'
)
_ARGS = re.compile(r"\^bb0\(([^)]*)\)")


def _dims(t: str) -> tuple[int, ...]:
    """``tensor<4x16xf32>`` -> ``(4, 16)`` (a scalar ``tensor<f32>`` -> ``()``)."""
    parts = t[len("tensor<") : -1].split("x")
    return tuple(int(p) for p in parts[:-1])


def inplace_inputs(kind: str, text: str, itemsize: int) -> tuple[int, ...]:
    """The inputs (by position) of a generated kernel that its output may overwrite: the
    inputs of exactly the output's type, when every thread reads an element of them only at
    the indices it writes, and has read it before it writes there.

    Why: the gradient's attention backward holds ``P``, ``dP`` and ``dS`` (each ``[B, H, S,
    S]``) at once, though ``dP`` dies where ``dS`` is made; writing ``dS`` over ``dP`` (and a
    softmax over its scores, a map over a dying input of its shape) lowers the arena's peak.

    Safe by construction for the kernels accepted here: a *map* (elementwise ops, constants,
    iotas: each thread reads its inputs at its own output indices), or a *row* / *softmax*
    kernel that caches its rows in registers (a single-launch :func:`row_config`) and whose
    reductions and softmaxes run over the last axis of a value of the output's shape (so a
    thread's output depends on every element it read). A reshape or broadcast of values that
    read no offered input (the loss gradient's ``broadcast(1 / N)``) is allowed; any other
    view, gather, matmul, other reduction, or an op this function does not know, and the
    input is not offered. Parsed
    from the kernel's canonical text (plain Python: the stitch runs without xDSL)."""
    from kinac.ir.pieces import ARITH

    if kind not in INPLACE_KINDS:
        return ()
    fn = re.search(r"function_type = \(([^)]*)\) -> (tensor<[^>]*>)", text)
    bbs = _ARGS.findall(text)
    if fn is None or len(bbs) < 2:
        return ()
    out = fn.group(2)
    shape = _dims(out)
    numel = math.prod(shape)
    if kind != "map":
        if not shape or shape[-1] <= 1:
            return ()
        last = shape[-1]
        if row_config(last, vector_width(last, itemsize), numel // last) is None:
            return ()
    found = _OP.findall(text)
    named = [n for n in re.findall(r'"kina\.(\w+)"', text) if n not in ("kernel", "yield")]
    if sorted(named) != sorted(f[1] for f in found if f[1] not in ("kernel", "yield")):
        return ()  # an op this parser did not read: offer nothing
    names = [a.split(": ", 1) for a in bbs[1].split(", ")]
    tainted = {n for n, t in names if t == out}  # values read from the offered inputs
    for res, op, args, attrs, operands, result in found:
        if op in _FREE_OPS:
            continue
        if math.prod(_dims(result)) > numel:
            return ()
        if op in _ROW_OPS:
            if kind == "map" or operands.split(", ")[0] != out:
                return ()
            axis = re.search(r"axis = (-?\d+)", attrs)
            if axis is None or int(axis.group(1)) not in (len(shape) - 1, -1):
                return ()
        elif op in _VIEW_OPS and not tainted & set(args.split(", ")):
            continue  # a constant's or a small input's broadcast: reads no offered input
        elif op not in ARITH:
            return ()
        if res and tainted & set(args.split(", ")):
            tainted.add(res)
    return tuple(i for i, (_, t) in enumerate(names) if t == out)
