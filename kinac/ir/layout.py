"""Layout algebra: how a view of a buffer maps logical indices to element offsets.

View ops (transpose, reshape, slice, broadcast_to, repeat_interleave) never copy: each turns the
layout of its input into a new layout of the same buffer, and the kernels that read it fold the
layout into their index arithmetic (a BLAS call reads it as ``lda`` and a transpose flag).

A layout is a tuple of logical dims plus an element offset. Each dim is a tuple of *sub-dims*
``(size, stride)``, outermost first: logical index ``i`` of a dim with sub-dims
``(n0, s0), (n1, s1)`` is at ``(i // n1) * s0 + (i % n1) * s1``. Plain strided views have one
sub-dim per dim; ``repeat_interleave`` adds a stride-0 inner sub-dim, and a reshape that merges
non-contiguous dims keeps them apart as sub-dims (as CuTe layouts do). A reshape that would need
to split a sub-dim unevenly has no layout (``None``): the lowering then materialises a copy.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

SubDim = tuple[int, int]
Dim = tuple[SubDim, ...]


def _simplify(dim: list[SubDim]) -> Dim:
    """Drop size-1 sub-dims and merge neighbours that are contiguous with each other."""
    subs = [sd for sd in dim if sd[0] != 1]
    if not subs:
        return ((1, 0),)
    out = [subs[0]]
    for n, s in subs[1:]:
        n0, s0 = out[-1]
        if s0 == n * s:
            out[-1] = (n0 * n, s)
        else:
            out.append((n, s))
    return tuple(out)


def cstrides(shape: Sequence[int]) -> list[int]:
    """The element strides of a C-contiguous (row-major) array of ``shape``."""
    out = [1] * len(shape)
    for i in range(len(shape) - 2, -1, -1):
        out[i] = out[i + 1] * shape[i + 1]
    return out


@dataclass(frozen=True)
class Layout:
    """Logical dims (each a tuple of ``(size, stride)`` sub-dims) and an element offset."""

    dims: tuple[Dim, ...]
    offset: int = 0

    @staticmethod
    def contiguous(shape: tuple[int, ...]) -> Layout:
        strides = cstrides(shape)
        return Layout(tuple(_simplify([(n, st)]) for n, st in zip(shape, strides, strict=True)))

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(math.prod(n for n, _ in d) for d in self.dims)

    def stride(self, axis: int) -> int | None:
        """The stride of ``axis`` when it is a plain strided dim, else ``None``."""
        d = self.dims[axis]
        if len(d) == 1:
            return d[0][1] if d[0][0] != 1 else 0
        return None

    def is_contiguous(self) -> bool:
        return self == Layout.contiguous(self.shape)

    def offset_of(self, idx: tuple[int, ...]) -> int:
        """The element offset of a concrete index (used by tests and constant folding)."""
        off = self.offset
        for i, dim in zip(idx, self.dims, strict=True):
            inner = math.prod(n for n, _ in dim)
            for n, s in dim:
                inner //= n
                off += ((i // inner) % n) * s
        return off

    def transpose(self, perm: tuple[int, ...]) -> Layout:
        return Layout(tuple(self.dims[p] for p in perm), self.offset)

    def slice(self, axis: int, start: int, stop: int) -> Layout | None:
        dim = self.dims[axis]
        n0, s0 = dim[0]
        inner = math.prod(n for n, _ in dim[1:])
        if start % inner or stop % inner:
            return None
        new = ((stop // inner - start // inner, s0), *dim[1:])
        dims = list(self.dims)
        dims[axis] = _simplify(list(new))
        return Layout(tuple(dims), self.offset + (start // inner) * s0)

    def broadcast_to(self, shape: tuple[int, ...]) -> Layout:
        lead = len(shape) - len(self.dims)
        dims: list[Dim] = [((n, 0),) if n != 1 else ((1, 0),) for n in shape[:lead]]
        for d, n in zip(self.dims, shape[lead:], strict=True):
            dims.append(d if math.prod(x for x, _ in d) == n else _simplify([(n, 0)]))
        return Layout(tuple(dims), self.offset)

    def repeat_interleave(self, axis: int, repeats: int) -> Layout:
        dims = list(self.dims)
        dims[axis] = _simplify([*dims[axis], (repeats, 0)])
        return Layout(tuple(dims), self.offset)

    def reshape(self, shape: tuple[int, ...]) -> Layout | None:
        flat = [sd for d in self.dims for sd in d if sd[0] != 1]
        out: list[Dim] = []
        for n in shape:
            taken: list[SubDim] = []
            need = n
            while need > 1:
                if not flat:
                    return None
                m, s = flat[0]
                if need % m == 0:
                    taken.append(flat.pop(0))
                    need //= m
                elif m % need == 0:
                    taken.append((need, s * (m // need)))
                    flat[0] = (m // need, s)
                    need = 1
                else:
                    return None
            out.append(_simplify(taken))
        if flat:
            return None
        return Layout(tuple(out), self.offset)


@dataclass(frozen=True)
class MatrixView:
    """A BLAS operand: per-batch matrix ``rows x cols`` at ``ld`` with an optional transpose."""

    trans: bool
    ld: int


def as_blas_matrix(layout: Layout) -> MatrixView | None:
    """How BLAS can read the last two dims of ``layout``, or ``None`` if it cannot."""
    rank = len(layout.dims)
    rows, cols = layout.shape[-2:]
    sr, sc = layout.stride(rank - 2), layout.stride(rank - 1)
    if sr is None or sc is None:
        return None
    if (cols == 1 or sc == 1) and (rows == 1 or sr >= cols):
        return MatrixView(False, sr if rows > 1 else max(cols, 1))
    if (rows == 1 or sr == 1) and (cols == 1 or sc >= rows):
        return MatrixView(True, sc if cols > 1 else max(rows, 1))
    return None
