"""Layouts for training a model on a simulated mesh without annotating its source: data
parallel, tensor parallel (Megatron) and both (docs/sharding.md, "Gradients on a mesh").

Why by name: a training entry's roles are already named (``tokens`` and ``targets`` are the data,
:mod:`kinac.train.params`), and the transformer blocks of the workspaces name their projections
``wq wk wv wo wg wu wd`` (with a layer number in the decoder: ``wq0`` ...). Megatron's rule on
those names: the projections that fan out (q, k, v, gate, up) are column-parallel (split on
their output dim, axis 1), the ones that fan back in (o, down) row-parallel (axis 0); everything
else (embedding, norms, LM head) is replicated. The batch is split on dim 0 over ``dp``. The
gradient plan then follows from propagation (:mod:`kinac.shard.grad`).
"""

from __future__ import annotations

from collections.abc import Sequence

COLUMN = ("wq", "wk", "wv", "wg", "wu")
ROW = ("wo", "wd")
DATA = ("tokens", "targets")
LAYOUTS = ("dp", "tp", "2d")

Dims = tuple[tuple[str, ...], ...]


def megatron_role(name: str) -> str | None:
    """``column``, ``row`` or None for a parameter name (a trailing layer number ignored)."""
    base = name.rstrip("0123456789")
    if base in COLUMN:
        return "column"
    if base in ROW:
        return "row"
    return None


def mesh_shape(layout: str, n: int) -> tuple[str, tuple[int, ...], tuple[str, ...]] | str:
    """The mesh (name, shape, axes) of ``layout`` on ``n`` devices, or why there is none:
    ``dp`` and ``tp`` are 1-D meshes of ``n``; ``2d`` is ``dp x tp`` = ``2 x n/2``."""
    if layout not in LAYOUTS:
        return f"unknown layout {layout!r}: use {', '.join(LAYOUTS)}"
    if n < 1:
        return f"{n} devices: a mesh needs at least 1"
    if layout == "2d":
        if n % 2 or n < 4:
            return f"the 2d layout (dp x tp = 2 x N/2) needs an even N >= 4 devices, got {n}"
        return "grid", (2, n // 2), ("dp", "tp")
    return layout, (n,), (layout,)


def training_layouts(layout: str, params: Sequence[tuple[str, int]]) -> dict[str, Dims]:
    """Each parameter's layout (mesh axes per dim) for ``layout``: ``params`` are (name,
    rank); unnamed parameters are replicated."""
    dp = layout in ("dp", "2d")
    tp = layout in ("tp", "2d")
    out: dict[str, Dims] = {}
    for name, rank in params:
        dims: list[tuple[str, ...]] = [() for _ in range(rank)]
        if dp and name in DATA and rank:
            dims[0] = ("dp",)
        role = megatron_role(name) if tp and rank == 2 else None
        if role is not None:
            dims[1 if role == "column" else 0] = ("tp",)
        if any(dims):
            out[name] = tuple(dims)
    return out
