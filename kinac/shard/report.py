"""``kinac build --shardings``: each entry's layouts and planned collectives as rich tables.

Why here and not in the CLI: the tables are a view of :class:`ShardPlan` alone (plus a span
resolver), so they can be tested without a terminal; the CLI only finds the plans.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kinac.diag.model import Label
from kinac.shard.model import ShardPlan
from kinac.tir.graph import Graph


def tensor_name(graph: Graph, i: int) -> str:
    """A parameter by name, an intermediate as ``%i op``."""
    return graph.params[i][0] if i < len(graph.params) else f"%{i} {graph.nodes[i].op}"


def _where(label: Label | None, resolve: Callable[[Any], Any]) -> str:
    """``file:line:col`` of a label, or ``-``."""
    span = resolve(label.loc) if label is not None else None
    return f"{span.file}:{span.line}:{span.col}" if span is not None else "-"


def shardings_tables(
    entry: str, graph: Graph, plan: ShardPlan, resolve: Callable[[Any], Any]
) -> list[Any]:
    """The layout table (one row per tensor, one column per mesh axis) and the collective
    table (kind, axis, tensor, bytes, the annotation that caused it, why) of one entry."""
    from rich.table import Table
    from rich.text import Text

    if plan.mesh is None:
        return [Text(f"{entry}: no sharding annotation (every tensor on one device)")]
    axes = [a for a, _ in plan.axes]
    sizes = " x ".join(f"{a}={n}" for a, n in plan.axes)
    layout = Table(title=f"{entry}: layouts over mesh `{plan.mesh}` ({sizes})")
    layout.add_column("tensor")
    layout.add_column("type")
    for a in axes:
        layout.add_column(a, justify="center")
    for lay in plan.layouts:
        t = graph.nodes[lay.node].type
        ty = f"{t.dtype}[{' '.join(map(str, t.shape))}]"
        layout.add_row(tensor_name(graph, lay.node), ty, *(lay.spec(a) for a in axes))
    colls = Table(title=f"{entry}: {len(plan.collectives)} planned collectives")
    for col in ("kind", "axis", "tensor", "before", "bytes", "caused by", "why"):
        colls.add_column(col, justify="right" if col == "bytes" else "left")
    for c in plan.collectives:
        before = "output" if c.consumer < 0 else tensor_name(graph, c.consumer)
        colls.add_row(
            c.kind,
            c.axis,
            tensor_name(graph, c.node),
            before,
            f"{c.bytes:,}",
            _where(c.cause, resolve),
            c.reason,
        )
    return [layout, colls]


# -- pictures of layouts (``kinac build --shardings --visualize``) ---------------------------

_PALETTE = ("on #1f4e79", "on #7b3f00", "on #1e5631", "on #5b2c6f", "on #7a1f1f", "on #2f4f4f")


def block_label(
    ranks: list[int], coords: dict[int, dict[str, int]], partial: tuple[str, ...]
) -> str:
    """Who holds one block: ``dev 0,2`` (replicas), ``Σ 0+1`` (partial shares summed over the
    partial axes), ``Σ 0+1, Σ 4+5`` (replicas of a partial sum)."""
    if not partial:
        return "dev " + ",".join(map(str, ranks))
    groups: dict[tuple[tuple[str, int], ...], list[int]] = {}
    for r in ranks:
        rest = tuple(sorted((a, c) for a, c in coords[r].items() if a not in partial))
        groups.setdefault(rest, []).append(r)
    return ", ".join("Σ " + "+".join(map(str, g)) for g in groups.values())


def layout_picture(
    title: str,
    shape: tuple[int, ...],
    dims: tuple[tuple[str, ...], ...],
    partial: tuple[str, ...],
    axes: tuple[tuple[str, int], ...],
    color: bool = False,
) -> Any:
    """A 1-D or 2-D tensor's blocks over the mesh as a grid (like JAX's
    ``visualize_array_sharding``): one cell per block (rows: dim 0's chunks, columns: dim 1's),
    labelled with the devices that hold it (ranks row-major over the mesh axes)."""
    from itertools import product

    from rich import box
    from rich.console import Group
    from rich.table import Table
    from rich.text import Text

    assert len(shape) in (1, 2) and len(dims) == len(shape)
    size = dict(axes)
    names = [a for a, _ in axes]
    coords: dict[int, dict[str, int]] = {}
    for r, c in enumerate(product(*(range(n) for _, n in axes))):
        coords[r] = dict(zip(names, c, strict=True))

    def chunk(r: int, d: int) -> int:
        k = 0
        for a in dims[d]:
            k = k * size[a] + coords[r][a]
        return k

    splits = [1, 1]
    for d, axs in enumerate(dims):
        for a in axs:
            splits[d] *= size[a]
    if len(shape) == 1:  # one row of blocks
        splits = [1, splits[0]]
    cells: dict[tuple[int, int], list[int]] = {}
    for r in coords:
        at = (0, chunk(r, 0)) if len(shape) == 1 else (chunk(r, 0), chunk(r, 1))
        cells.setdefault(at, []).append(r)
    labels = {at: block_label(rs, coords, partial) for at, rs in cells.items()}
    width = max(7, max(len(x) for x in labels.values()) + 2)
    grid = Table(show_header=False, show_lines=True, box=box.SQUARE, padding=(1, 1))
    for _ in range(splits[1]):
        grid.add_column(width=width, justify="center")
    styles: dict[str, str] = {}
    for i in range(splits[0]):
        row = []
        for j in range(splits[1]):
            label = labels[i, j]
            style = styles.setdefault(label, _PALETTE[len(styles) % len(_PALETTE)]) if color else ""
            row.append(Text(label, style=style))
        grid.add_row(*row)
    return Group(Text(title), grid)


def layout_pictures(entry: str, graph: Graph, plan: ShardPlan, color: bool = False) -> list[Any]:
    """A picture of every 1-D and 2-D tensor's layout of one entry (higher ranks have no
    flat picture; the layout table covers them)."""
    from rich.text import Text

    if plan.mesh is None:
        return []
    mesh = ", ".join(f"{a}={n}" for a, n in plan.axes)
    out: list[Any] = [Text(f"{entry}: 1-D and 2-D tensors over mesh `{plan.mesh}` ({mesh})")]
    for lay in plan.layouts:
        t = graph.nodes[lay.node].type
        if len(t.shape) not in (1, 2):
            continue
        specs = "  ".join(f"{a}: {lay.spec(a)}" for a, _ in plan.axes)
        title = f"{tensor_name(graph, lay.node)}: {t.dtype}[{' '.join(map(str, t.shape))}]  {specs}"
        out.append(layout_picture(title, t.shape, lay.dims, lay.partial, plan.axes, color))
    return out
