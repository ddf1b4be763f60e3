"""A grouped (pointer-array) GEMM as one strided batch, where the addresses it is bound to allow.

Why (issue 14): :mod:`kinac.ir.gpu.gemm_group` groups products sharing their left operand
into one ``pointers`` call, each member's weight and output in its own buffer; where the
bound addresses lie at one stride per operand (the shared input at stride 0, the weights
wherever the caller allocated them, the outputs adjacent in the arena) the call can be one
strided-batched call, which cuBLASLt's algorithms (and so the GEMM tuner) take and which
needs none of the pointer-array kernel's workspace. Pure functions of addresses: the CPU
tests check them; :mod:`kinac.rt.cuda.blas` binds with them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from kinac.rt.cuda.blas import ColMajor

STRIDE_ALIGN = 16  # bytes: a batch stride taken from bound addresses keeps 16-byte alignment
STRIDE_LIMIT = 1 << 40  # bytes: a TMA stride is below 2^40 (addresses further apart: pointers)


def strided_form(
    addrs: tuple[tuple[int, ...], ...], itemsizes: tuple[int, ...]
) -> tuple[tuple[int, ...], tuple[int, ...]] | None:
    """A pointer-array batch as one strided batch, where its bound addresses allow it.

    ``addrs``: each operand's byte address per batch (in batch order), ``itemsizes`` each
    operand's element size. Returns each operand's first address and its stride in elements,
    or ``None`` where an operand's addresses are no arithmetic progression, or a stride is not
    a multiple of 16 bytes below 2^40 (cuBLAS's strided kernels load tiles by TMA, whose
    strides are such), or the non-zero strides differ in sign even with the batches taken
    in the reverse order (a call computes the same products in any batch order; negative
    strides are never passed: TMA strides are unsigned), or the last operand (the output) has
    stride 0 over several batches."""
    diffs = []
    for ps in addrs:
        d = ps[1] - ps[0] if len(ps) > 1 else 0
        if any(ps[i + 1] - ps[i] != d for i in range(len(ps) - 1)) or d % STRIDE_ALIGN:
            return None
        if abs(d) >= STRIDE_LIMIT:
            return None
        diffs.append(d)
    if len(addrs[-1]) > 1 and diffs[-1] == 0:
        return None
    rev = any(d < 0 for d in diffs)
    if rev and any(d > 0 for d in diffs):
        return None
    firsts = tuple(ps[-1] if rev else ps[0] for ps in addrs)
    strides = tuple(abs(d) // sz for d, sz in zip(diffs, itemsizes, strict=True))
    return firsts, strides


def bound_addresses(
    cm: ColMajor, batch: int, ptr: Callable[[str], int], sizes: tuple[int, int, int]
) -> tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]]:
    """Each batch's byte address of cuBLAS's A, B and C (column-major) once bound."""
    out = []
    for which, size in zip("abc", sizes, strict=True):
        offs: tuple[int, ...] = getattr(cm, f"{which}_offs")
        bases = [ptr(b) for b in cm.batch_bufs(which, batch)]
        out.append(tuple(p + o * size for p, o in zip(bases, offs, strict=True)))
    return out[0], out[1], out[2]
