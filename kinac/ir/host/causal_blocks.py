"""The blocks of a causal softmax row and of the products around it (issue 14, docs/host.md).

One module for the rules the marking (:mod:`kinac.ir.host.causal`) and the kernel lowering
(:mod:`kinac.ir.host.kernel_loops`) must agree on: which softmax skips its rows' masked keys
(:func:`causal_rows`), how far a row reads (keys ``[0, i]`` rounded up to
:data:`CAUSAL_STEP`), and the BLAS calls a marked product makes (:func:`gemm_blocks`).
"""

from __future__ import annotations

from xdsl.dialects.builtin import StringAttr
from xdsl.ir import Attribute

from kinac.ir.dialects import kina as el
from kinac.ir.dialects import kina_struct as st
from kinac.ir.dialects.kina import shape_of

CAUSAL_STEP = 16  # a causal row's keys are rounded up to this (a 16-lane vector)
CAUSAL_ROWS = 32  # the blocks of a causal product: at least this many rows (a multiple of 16)
CAUSAL_BLOCKS = 8  # ... and at most this many blocks
SCORES_BY_KEYS = True  # a "scores" product by key blocks (each for all the rows that read it)


def seen_keys(rows_end: int) -> int:
    """The keys rows ``[0, rows_end)`` of a causal softmax read: ``[0, rows_end)`` rounded up."""
    return -(-rows_end // CAUSAL_STEP) * CAUSAL_STEP


def causal_row_blocks(m: int) -> list[tuple[int, int]]:
    """The row blocks ``[r0, r1)`` of a causal product of ``m`` rows: each block's keys end at
    its last row, so the product does ``(1 + 2 + ... + b) / b^2`` of the full work for ``b``
    blocks (62% for 4), at the price of ``b`` BLAS calls per matrix, each on thinner blocks."""
    blocks = max(1, min(CAUSAL_BLOCKS, -(-m // CAUSAL_ROWS)))
    rows = seen_keys(-(-m // blocks))
    return [(r0, min(r0 + rows, m)) for r0 in range(0, m, rows)]


def causal_rows(op: st.SoftmaxOp, xs: tuple[int, ...], ax: int) -> bool:
    """The softmax over the last axis of ``scores + causal`` (``-inf`` where key ``j`` >
    query ``i``, the second-last axis), with no more queries than keys: row ``i`` is 0 past
    key ``i`` whatever the scores, so its loops stop there (as a fused attention kernel skips
    the masked blocks; a masked score of +inf or NaN, which would make the whole row NaN, is
    not read). The mask test is the GPU attention pass's (imported only for a candidate)."""
    add = op.x.owner
    if ax != len(xs) - 1 or ax < 1 or xs[ax - 1] > xs[ax] or not isinstance(add, el.BinaryOp):
        return False
    if add.name != "kina.add":
        return False
    for mask in (add.lhs, add.rhs):
        if isinstance(mask.owner, el.WhereOp | el.CastOp):
            from kinac.ir.gpu.attention import is_causal_mask

            if is_causal_mask(mask) and shape_of(mask.type)[-2:] == xs[-2:]:
                return True
    return False


def causal_roles(attr: Attribute | None) -> tuple[str, ...]:
    """The roles in a product's ``causal`` attribute (none: an ordinary product)."""
    return tuple(attr.data.split(",")) if isinstance(attr, StringAttr) else ()


def gemm_blocks(m: int, n: int, k: int, roles: tuple[str, ...]) -> list[tuple[int, ...]]:
    """The BLAS calls of one ``[m, k] @ [k, n]`` product with causal ``roles``: ``(row, col,
    rows, cols, depth)``, A read from row ``row``, B from column ``col``, C written at
    ``(row, col)``. ``"scores"`` alone: per key block ``[c0, c1)``, the rows ``[c0, m)`` that
    read it (taller calls than row blocks: OpenBLAS ran ``32 x 64 @ 64 x keys`` no faster than
    the whole product); otherwise per row block ``[r0, r1)``, over keys ``[0, r1)`` (rounded
    up) for ``"scores"`` (columns) and ``"weights"`` (depth). No roles: one call."""
    if roles == ("scores",) and SCORES_BY_KEYS:
        return [(c0, c0, m - c0, c1 - c0, k) for c0, c1 in causal_row_blocks(n) if c0 < m]
    calls: list[tuple[int, ...]] = []
    for r0, r1 in causal_row_blocks(m) if roles else [(0, m)]:
        cols = min(seen_keys(r1), n) if "scores" in roles else n
        depth = min(seen_keys(r1), k) if "weights" in roles else k
        calls.append((r0, 0, r1 - r0, cols, depth))
    return calls
