"""Redistribution: the collective steps that turn one layout of a tensor into another.

Why a function of its own: the per-device program (:mod:`kinac.shard.device`) needs it at
every seam the plan left (an operand read in another layout than it has, a result computed
whole then sliced, a partial sum reduced or reduce-scattered, an entry output), and the
answer depends only on the two layouts. One generic rule, so every seam gets the same,
correct, sequence:

1. each partial axis the target does not keep: a ``reduce-scatter`` along the dim the target
   splits over it when that split comes next on that dim (its chunk is then the minor one),
   else an ``all-reduce``;
2. per dim, the axes beyond the longest common prefix of the two splits are all-gathered,
   minor first (gathering a major axis while a minor one still splits the dim would not
   concatenate contiguous chunks); an axis gathered off one dim that the target splits next
   on another is one ``all-to-all`` instead of a gather and a slice;
3. per dim, the target's axes not split yet are sliced locally (no traffic), in order.

A move to a partial layout (adding a partial axis) has no collective: the caller reports it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

Dims = tuple[tuple[str, ...], ...]


@dataclass(frozen=True)
class Move:
    """One step: ``kind`` over mesh ``axis`` on tensor dim ``dim`` (-1 for an all-reduce),
    ``concat_dim`` for an all-to-all, and the layout after it."""

    kind: str
    axis: str
    dim: int
    concat_dim: int
    dims: Dims
    partial: tuple[str, ...]


def moves(
    src: tuple[Dims, tuple[str, ...]], dst: tuple[Dims, tuple[str, ...]]
) -> list[Move] | None:
    """The steps from layout ``src`` to ``dst`` (each ``(dims, partial)``); ``None`` when
    ``dst`` adds a partial axis (no collective makes a replicated value partial)."""
    dims, partial = [tuple(d) for d in src[0]], tuple(src[1])
    want, want_p = dst
    if set(want_p) - set(partial):
        return None
    out: list[Move] = []

    def emit(kind: str, axis: str, dim: int, concat: int = -1) -> None:
        out.append(Move(kind, axis, dim, concat, tuple(dims), partial))

    for p in [p for p in partial if p not in want_p]:
        partial = tuple(x for x in partial if x != p)
        hit = next((d for d, w in enumerate(want) if w[: len(dims[d]) + 1] == (*dims[d], p)), None)
        if hit is None:
            emit("all-reduce", p, -1)
        else:
            dims[hit] = (*dims[hit], p)
            emit("reduce-scatter", p, hit)
    for d in range(len(dims)):
        while dims[d] != want[d][: len(dims[d])]:
            x = dims[d][-1]
            dims[d] = dims[d][:-1]
            to = next(
                (
                    e
                    for e, w in enumerate(want)
                    if e != d and w[: len(dims[e]) + 1] == (*dims[e], x)
                ),
                None,
            )
            if to is not None:
                dims[to] = (*dims[to], x)
                emit("all-to-all", x, to, d)
            else:
                emit("all-gather", x, d)
    for d in range(len(dims)):  # every split is now a prefix of the target's: slice the rest
        for x in want[d][len(dims[d]) :]:
            dims[d] = (*dims[d], x)
            emit("slice", x, d)
    return out


def local_shape(shape: tuple[int, ...], dims: Dims, sizes: Mapping[str, int]) -> tuple[int, ...]:
    """``shape`` with each dim divided by the sizes of the mesh axes splitting it."""
    out = []
    for n, axes in zip(shape, dims, strict=True):
        for a in axes:
            n //= sizes[a]
        out.append(n)
    return tuple(out)
