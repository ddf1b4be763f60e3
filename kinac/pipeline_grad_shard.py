"""Gradients on a mesh as queries: the gradient graph's sharding plan and its per-device program.

Why a module of its own: the gradient graph (``grad_graph``, :mod:`kinac.pipeline_grad`) is an
ordinary graph, so sharding it is the forward's stage run once more with the gradient outputs
tied to their parameters' layouts (:mod:`kinac.shard.grad`); its per-device program is built and
compiled by the same functions and segment queries as an entry's (:mod:`kinac.pipeline_shard`):
a gradient segment identical to a forward one is compiled once. Keys are ``(EntryKey, wrt)``.

    grad_graph ─► grad_shard_propagate ─► grad_device_program ─► segment_lowered ─► segment_object
    signature, meshes ─┘                      shard_spans ─┘

Registered by the import at the end of :mod:`kinac.pipeline`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kinac import pipeline, pipeline_grad  # pipeline_grad may be mid-import: attributes at call
from kinac.pipeline_support import CheckEnv, DefnKey, EntryKey
from kinac.rules import Database, query
from kinac.rules.codec import record

if TYPE_CHECKING:  # the shard package imports the checker's factor rules: loaded when run
    from kinac.artifacts.sharded import DeviceProgram
    from kinac.shard.model import ShardPlan
    from kinac.tir.graph import Graph

GradKey = tuple[EntryKey, tuple[str, ...]]


@record
class GradShardPlan:
    """The gradient graph's plan, the layout each output is returned in (the loss replicated,
    each gradient in its parameter's layout; docs/sharding.md), and the graph planned when
    it is not ``grad_graph``'s (partial sums reassociated: :mod:`kinac.shard.grad`)."""

    plan: ShardPlan
    outputs: tuple[tuple[tuple[str, ...], ...] | None, ...]
    graph: Graph | None = None


@query("grad_shard_propagate", stage="shard")
def grad_shard_propagate(db: Database, key: GradKey) -> GradShardPlan | None:
    """The sharding of ``(loss, gradients)``: the loss defn's parameters pinned by their
    annotations, each gradient hinted to its parameter's layout (None when the gradient graph
    cannot be built)."""
    from kinac.shard.grad import plan_gradient_entry

    entry, wrt = key
    spec = pipeline_grad.grad_graph(db, key)
    sig = pipeline.signature(db, DefnKey(entry.file, entry.defn))
    if spec.graph is None or sig is None:
        return None
    meshes = CheckEnv(db).meshes(entry.file)
    with pipeline.entry_internal_errors(entry, "sharding the gradient"):
        graph, plan, outs = plan_gradient_entry(spec.graph, wrt, sig, meshes, entry.file)
    return GradShardPlan(plan, outs, None if graph is spec.graph else graph)


@query("grad_device_program", stage="shard")
def grad_device_program(db: Database, key: GradKey) -> DeviceProgram | None:
    """The gradient graph's SPMD program (:func:`kinac.shard.device.device_program` with the
    outputs in their asked layouts): None without a mesh or with sharding errors."""
    from kinac.diag.model import Label, NodeRef
    from kinac.pipeline_shard import shard_spans
    from kinac.shard.device import device_program as build

    spec = pipeline_grad.grad_graph(db, key)
    gp = grad_shard_propagate(db, key)
    if spec.graph is None or gp is None or gp.plan.mesh is None:
        return None
    plan = gp.plan
    if any(d.is_error for d in plan.diagnostics):
        return None
    refs = tuple(
        dict.fromkeys(
            c.cause.loc
            for c in plan.collectives
            if c.cause is not None and isinstance(c.cause.loc, NodeRef)
        )
    )
    spans: dict[object, str] = dict(zip(refs, shard_spans(db, refs), strict=True))

    def span_of(label: Label | None) -> str:
        return spans.get(label.loc, "") if label is not None else ""

    with pipeline.entry_internal_errors(key[0], "sharded lowering of the gradient"):
        return build(gp.graph or spec.graph, plan, span_of, gp.outputs)


def grad_shardings_tables(db: Database, entry: Any, key: EntryKey, resolve: Any) -> list[Any]:
    """``kinac build --shardings`` for a kina.toml entry with ``grad = [...]``: the gradient
    graph's layouts and planned collectives (:func:`kinac.shard.report.shardings_tables`),
    titled ``ENTRY gradient wrt w1, w2`` (nothing for an entry without ``grad``)."""
    from kinac.shard.report import shardings_tables

    if not getattr(entry, "grad", None):
        return []
    gkey = (key, tuple(entry.grad))
    spec = pipeline_grad.grad_graph(db, gkey)
    gp = grad_shard_propagate(db, gkey)
    if spec.graph is None or gp is None:
        return []
    title = f"{entry.name} gradient wrt {', '.join(entry.grad)}"  # no [..]: rich markup
    return shardings_tables(title, gp.graph or spec.graph, gp.plan, resolve)


__all__ = [
    "GradShardPlan",
    "grad_device_program",
    "grad_shard_propagate",
    "grad_shardings_tables",
]
