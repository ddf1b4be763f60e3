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
