"""The records ``shard_propagate`` returns: each tensor's layout and each planned collective.

Why records: the result is a memoised query value (compared by the engine to stop
re-running what follows), so it is frozen, canonical and span-free except for labels,
which are ``NodeRef``s resolved only when rendered.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kinac.diag.model import Diagnostic, Label
from kinac.rules.codec import record

if TYPE_CHECKING:
    from kinac.tir.graph import Graph


@record
class TensorLayout:
    """A tensor's layout over the mesh: ``dims[i]`` are the mesh axes that split dim ``i``
    (major first; ``()`` is replicated along it), ``partial`` the axes over which the value
    is a partial sum (``@partial(sum)``). Every mesh axis appears at most once."""

    node: int
    name: str
    dims: tuple[tuple[str, ...], ...]
    partial: tuple[str, ...] = ()

    def spec(self, axis: str) -> str:
        """``S(i)``, ``P(sum)`` or ``R``: this tensor's layout over one mesh axis."""
        if axis in self.partial:
            return "P(sum)"
        for i, axes in enumerate(self.dims):
            if axis in axes:
                return f"S({i})"
        return "R"


@record
class Collective:
    """One redistribution the lowering would insert: ``kind`` is ``all-reduce``,
    ``reduce-scatter``, ``all-gather`` or ``slice`` (replicated to sharded, no traffic),
    over mesh axis ``axis``, on tensor ``node`` before op ``consumer`` (``-1``: the entry's
    output). ``bytes`` is the payload per device (see docs/sharding.md, cost model);
    ``cause`` the annotation whose sharding made it necessary."""

    kind: str
    axis: str
    node: int
    consumer: int
    bytes: int
    cause: Label | None
    reason: str


@record
class Use:
    """A layout with its partial axes: how an op reads an operand (``ShardPlan.reads``) or
    what it computes locally before its result is redistributed (``ShardPlan.computed``)."""

    dims: tuple[tuple[str, ...], ...]
    partial: tuple[str, ...] = ()


@record
class ShardPlan:
    """The propagation result of one entry: the mesh (``None`` when no annotation names
    one: nothing is sharded), every node's layout, the collectives in program order, and
    diagnostics (K0703/K0704 errors, notes for redistributions). Without a mesh ``layouts``
    is empty (every tensor is whole on one device: :meth:`layout_of` derives a node's), so an
    entry without sharding does not store, encode and fingerprint a layout per node on every
    build (165 KB at 32 transformer layers, re-encoded by each edit). ``reads[i]`` is the layout
    op ``i`` reads each operand in, ``computed[i]`` what it computes locally (before a slice
    or reduce-scatter of its result): the per-device program is built from these
    (:mod:`kinac.shard.device`), the collectives being the redistributions between them."""

    mesh: str | None
    axes: tuple[tuple[str, int], ...]
    layouts: tuple[TensorLayout, ...]
    collectives: tuple[Collective, ...]
    diagnostics: tuple[Diagnostic, ...]
    reads: tuple[tuple[Use, ...], ...] = ()
    computed: tuple[Use, ...] = ()
    results: tuple[Use | None, ...] = ()
    """Per entry output, the layout its declared result type asks for (``-> (tensor …
    @sharded …)``; None or absent: the node's own layout, partial axes all-reduced)."""

    def layout_of(self, graph: Graph, i: int) -> TensorLayout:
        """Node ``i``'s layout: the recorded one, or replicated when there is no mesh."""
        if self.mesh is not None:
            return self.layouts[i]
        name = graph.params[i][0] if i < len(graph.params) else f"%{i}"
        return TensorLayout(i, name, tuple(() for _ in graph.nodes[i].type.shape))

    def count(self, kind: str) -> int:
        """How many collectives of ``kind`` are planned."""
        return sum(1 for c in self.collectives if c.kind == kind)
