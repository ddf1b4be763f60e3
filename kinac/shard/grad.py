"""Sharding a gradient graph: the parameters pinned, each gradient hinted to its parameter's
layout, the loss replicated (docs/sharding.md, "Gradients on a mesh").

Why no rule of its own: the gradient graph (:func:`kinac.grad.value_and_grad`) is an ordinary
Graph whose outputs are ``(loss, d loss / d w1, ...)``, so the one propagation algorithm plans
it like any entry and the collectives of the backward pass fall out of the factor rules: a
weight read replicated by a batch-split activation gets a gradient that is a partial sum over
the batch axis (contraction over the split rows), all-reduced at the end (data parallel's
gradient all-reduce); the cotangent of an all-gathered operand is a partial sum that the
consumer wants split, so it is reduce-scattered (the transpose of an all-gather); a tensor used
replicated by a column-parallel matmul gets a partial cotangent, all-reduced (Megatron's ``f``).

What is pinned and how:

- the parameters: their annotated layouts (or, from Python, explicit layouts), exactly as
  :func:`kinac.shard.entry.plan_entry` pins them;
- each gradient output: its parameter's layout, as a *hint* (``propagate(..., hints=)``): set
  before the fixpoint and never overwritten, but a disagreement with another layout is decided
  by the cost model, never a K0704 (the user annotated the parameter, not its gradient);
- the outputs are returned in those layouts whatever their nodes' own (``output_dims``): a
  gradient node shared by two parameters (two unused parameters' zeros), or one whose hint lost,
  is redistributed at the end. A ``@partial(sum)`` parameter's gradient is replicated over that
  axis (d loss / d share = d loss / d sum, on every rank);
- the loss: rank 0, returned with no partial axis (all-reduced).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from kinac.diag.model import Diagnostic
from kinac.reader import ast
from kinac.shard.annotations import Pinned, read_pinned
from kinac.shard.entry import named_mesh
from kinac.shard.model import ShardPlan
from kinac.shard.propagate import propagate
from kinac.shard.redistribute import Dims
from kinac.tir.graph import Graph


def annotated_pins(
    graph: Graph, sig: ast.Signature, mesh: ast.Mesh, file: str
) -> tuple[dict[int, Pinned], list[Diagnostic]]:
    """Each annotated parameter's pinned layout over ``mesh`` (as ``plan_entry`` reads them)."""
    pinned: dict[int, Pinned] = {}
    diags: list[Diagnostic] = []
    types = {p.name: p.type for p in sig.params if p.type is not None}
    for i, (name, tt) in enumerate(graph.params):
        ty = types.get(name)
        if ty is None:
            continue
        pin, ds = read_pinned(ty, len(tt.shape), mesh, file, sig.name, name)
        diags += ds
        if pin is not None:
            pinned[i] = pin
    return pinned, diags


def explicit_pins(
    graph: Graph, layouts: Mapping[str, Sequence[Sequence[str]]]
) -> dict[int, Pinned]:
    """Pins from Python: ``{param: axes per dim}`` (no annotation, so no cause to cite). Every
    mesh axis not named is replicated for that parameter."""
    index = {name: i for i, (name, _) in enumerate(graph.params)}
    return {index[name]: Pinned([tuple(d) for d in dims], (), {}) for name, dims in layouts.items()}


def plan_gradient(
    graph: Graph,
    wrt: Sequence[str],
    mesh: ast.Mesh | None,
    pinned: Mapping[int, Pinned],
    diagnostics: Sequence[Diagnostic] = (),
) -> tuple[ShardPlan, tuple[Dims | None, ...]]:
    """The plan of a value-and-gradient ``graph`` (outputs ``loss, grads in wrt order``) and the
    layout each output is returned in (``None``: its node's own; the loss has none)."""
    index = {name: i for i, (name, _) in enumerate(graph.params)}
    hints: dict[int, Pinned] = {}
    outs: list[Dims | None] = [tuple(() for _ in graph.nodes[graph.outputs[0]].type.shape)]
    for w, o in zip(wrt, graph.outputs[1:], strict=True):
        pin = pinned.get(index[w])
        rank = len(graph.params[index[w]][1].shape)
        dims: Dims = tuple(tuple(d) for d in pin.dims) if pin is not None else ((),) * rank
        if pin is not None and o >= len(graph.params):
            hints.setdefault(o, Pinned(list(dims), (), dict(pin.where)))
        outs.append(dims)
    plan = propagate(graph, pinned, mesh, diagnostics, hints=hints)
    return plan, tuple(outs)


def plan_gradient_entry(
    graph: Graph, wrt: Sequence[str], sig: ast.Signature, meshes: Sequence[ast.Mesh], file: str
) -> tuple[ShardPlan, tuple[Dims | None, ...]]:
    """:func:`plan_gradient` with the loss defn's annotations (the mesh its first names)."""
    mesh = named_mesh(sig, meshes)
    pinned, diags = annotated_pins(graph, sig, mesh, file) if mesh is not None else ({}, [])
    return plan_gradient(graph, wrt, mesh, pinned, diags)
