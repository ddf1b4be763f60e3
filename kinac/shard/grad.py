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
from dataclasses import replace

from kinac.diag.model import Diagnostic
from kinac.reader import ast
from kinac.shard.annotations import Pinned, read_pinned
from kinac.shard.entry import entry_mesh
from kinac.shard.explicit import read_explicit, site_label, without_cascades
from kinac.shard.model import ShardPlan
from kinac.shard.propagate import propagate
from kinac.shard.redistribute import Dims
from kinac.tir.graph import Graph, Node


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
) -> tuple[Graph, ShardPlan, tuple[Dims | None, ...]]:
    """The plan of a value-and-gradient ``graph`` (outputs ``loss, grads in wrt order``), the
    graph it plans (``graph`` with partial sums reassociated, :func:`reassociate_partials`) and
    the layout each output is returned in (the loss has none)."""
    plan, outs = _plan(graph, wrt, mesh, pinned, diagnostics)
    for _ in range(8):  # each pass can expose an enclosing add; a chain is short
        if mesh is None or any(d.is_error for d in plan.diagnostics):
            break
        again = reassociate_partials(graph, plan)
        if again is None:
            break
        graph = again
        plan, outs = _plan(graph, wrt, mesh, pinned, diagnostics)
    return graph, plan, outs


def _plan(
    graph: Graph,
    wrt: Sequence[str],
    mesh: ast.Mesh | None,
    pinned: Mapping[int, Pinned],
    diagnostics: Sequence[Diagnostic],
) -> tuple[ShardPlan, tuple[Dims | None, ...]]:
    """Plan with the forward's written reshards pinned, then once more with each reverse
    reshard pinned to its forward operand's layout (:func:`reverse_pins`)."""
    pins = dict(pinned)
    diags = list(diagnostics)
    if mesh is not None:
        explicit, ds = read_explicit(
            graph, mesh
        )  # indices of this graph (reassociation moves them)
        pins.update(explicit)
        diags += ds
    plan, outs = _plan_once(graph, wrt, mesh, pins, diags)
    written = diags[len(diagnostics) :]
    plan = replace(plan, diagnostics=without_cascades(plan.diagnostics, written))
    if mesh is None or any(d.is_error for d in plan.diagnostics):
        return plan, outs
    rev = reverse_pins(graph, plan)
    if not rev:
        return plan, outs
    return _plan_once(graph, wrt, mesh, {**pins, **rev}, diags)


def reverse_pins(graph: Graph, plan: ShardPlan) -> dict[int, Pinned]:
    """Each reverse reshard (the cotangent of a written ``reshard``, marked ``cotangent`` by
    its VJP) pinned to the layout its forward reshard's operand has in ``plan``, partial axes
    replicated (the cotangent of a partial sum's share is the whole cotangent): the
    gradient's program moves the cotangent back as the forward moved the value (an
    all-gather's transpose is a reduce-scatter of a partial cotangent, or a slice).

    Forward and reverse are paired by the ``site`` where the reshard was written. A site
    written once pairs exactly; a site reached several times (a layer called per block) pairs
    when every forward operand there has one layout, and otherwise its reverses are left to
    propagation (correct, planned by the cost model)."""
    forward: dict[object, set[Dims]] = {}
    where: dict[object, Node] = {}
    for n in graph.nodes:
        if n.op == "reshard" and not n.attr("cotangent"):
            site = _site(n)
            forward.setdefault(site, set()).add(plan.layouts[n.args[0]].dims)
            where.setdefault(site, n)
    pins: dict[int, Pinned] = {}
    for i, n in enumerate(graph.nodes):
        if n.op != "reshard" or not n.attr("cotangent"):
            continue
        dims = forward.get(_site(n), set())
        if len(dims) != 1:
            continue
        (want,) = dims
        cause = site_label(where[_site(n)], "the reshard whose cotangent this is")
        axes = {a for a, _ in plan.axes}
        pins[i] = Pinned([tuple(d) for d in want], (), {a: cause for a in axes})
    return pins


def _site(node: Node) -> tuple[object, ...]:
    """Where a reshard was written (``(file, defn, nid)``), hashable whatever decoded it."""
    return tuple(node.attr("site") or ())


def _plan_once(
    graph: Graph,
    wrt: Sequence[str],
    mesh: ast.Mesh | None,
    pinned: Mapping[int, Pinned],
    diagnostics: Sequence[Diagnostic],
) -> tuple[ShardPlan, tuple[Dims | None, ...]]:
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
    return propagate(graph, pinned, mesh, diagnostics, hints=hints), tuple(outs)


def plan_gradient_entry(
    graph: Graph, wrt: Sequence[str], sig: ast.Signature, meshes: Sequence[ast.Mesh], file: str
) -> tuple[Graph, ShardPlan, tuple[Dims | None, ...]]:
    """:func:`plan_gradient` with the loss defn's annotations and written reshards (the mesh
    :func:`kinac.shard.entry.entry_mesh` finds, as for the forward)."""
    mesh = entry_mesh(sig, meshes, graph)
    pinned, diags = annotated_pins(graph, sig, mesh, file) if mesh is not None else ({}, [])
    return plan_gradient(graph, wrt, mesh, pinned, diags)


def reassociate_partials(graph: Graph, plan: ShardPlan) -> Graph | None:
    """``(r + p1) + p2`` rewritten ``r + (p1 + p2)`` where ``p1`` and ``p2`` are partial sums
    over the same axes and ``r`` is not (None when nothing matches).

    Why: a cotangent is accumulated in a fixed order, so a tensor used by a replicated path
    and by two paths that end split (the input of an RMSNorm under tensor parallelism: the
    residual's cotangent, and the norm's two terms, each a partial sum) is summed
    ``(residual + term1) + term2``: each add meets a partial sum with a whole value and
    all-reduces it, twice per norm. Summing the partials first makes one partial sum, reduced
    once: Megatron's one backward all-reduce per column-parallel group. Only adds of one
    shape and dtype whose inner add has no other use; the float sums are reordered (within an
    ulp of the single-device order, not bitwise)."""
    nodes = graph.nodes
    uses = [0] * len(nodes)
    for n in nodes:
        for a in n.args:
            uses[a] += 1
    for o in graph.outputs:
        uses[o] += 1
    part = {lay.node: tuple(sorted(lay.partial)) for lay in plan.layouts}
    swap: dict[int, tuple[int, int, int]] = {}  # outer add -> (r, p1, p2)
    inner: set[int] = set()
    for i, n in enumerate(nodes):
        if n.op != "add" or len(n.args) != 2 or n.args[0] == n.args[1]:
            continue
        for k in (0, 1):
            u, p2 = n.args[k], n.args[1 - k]
            un = nodes[u]
            if un.op != "add" or uses[u] != 1 or u in swap or u in inner:
                continue
            if not part.get(p2) or len(un.args) != 2:
                continue
            r, p1 = un.args
            if part.get(r) and not part.get(p1):
                r, p1 = p1, r
            if part.get(r) or part.get(p1) != part[p2]:
                continue
            if any(nodes[x].type != n.type for x in (u, r, p1, p2)):
                continue
            swap[i] = (r, p1, p2)
            inner.add(u)
            break
    if not swap:
        return None
    new: dict[int, int] = {}
    out: list[Node] = []
    for i, n in enumerate(nodes):
        if i in inner:
            continue
        if i in swap:
            r, p1, p2 = swap[i]
            out.append(Node("add", (new[p1], new[p2]), (), n.type))
            out.append(Node("add", (new[r], len(out) - 1), (), n.type))
        else:
            out.append(Node(n.op, tuple(new[a] for a in n.args), n.attrs, n.type))
        new[i] = len(out) - 1
    return Graph(graph.name, graph.params, tuple(out), tuple(new[o] for o in graph.outputs))
