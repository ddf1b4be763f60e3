"""From an entry's signature and graph to its plan: which mesh, which layouts are pinned.

The query in :mod:`kinac.pipeline` passes span-free inputs (the graph, the signature, the
meshes the file sees), so a comment edit re-runs nothing and an annotation edit re-runs only
the entries of that defn.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from kinac.diag.model import Diagnostic
from kinac.reader import ast
from kinac.shard.annotations import Pinned, arg_of, read_pinned
from kinac.shard.explicit import mesh_named, read_explicit, unknown_mesh, without_cascades
from kinac.shard.model import ShardPlan
from kinac.shard.propagate import propagate
from kinac.shard.result import result_hint, result_pin, result_use
from kinac.tir.graph import Graph


def named_mesh(sig: ast.Signature, meshes: Sequence[ast.Mesh]) -> ast.Mesh | None:
    """The mesh the first sharding annotation of the signature names, its parameters' then its
    result's (one mesh per entry)."""
    by_name = {m.name: m for m in meshes}
    types = [p.type for p in sig.params] + [sig.ret]  # the result's annotations too
    for ty in types:
        for an in ty.annotations if ty is not None else ():
            if an.name not in ("sharded", "partial"):
                continue
            name = arg_of(an.args, "mesh", 1)
            if isinstance(name, str) and name in by_name:
                return by_name[name]
    return None


def entry_mesh(
    sig: ast.Signature, meshes: Sequence[ast.Mesh], graph: Graph | None = None
) -> ast.Mesh | None:
    """The signature's mesh (:func:`named_mesh`), else the one the first written ``reshard``
    or collective of ``graph`` names (an unknown name: None, reported by the reshard)."""
    mesh = named_mesh(sig, meshes)
    if mesh is None and graph is not None:
        name = mesh_named(graph)
        mesh = next((m for m in meshes if m.name == name), None)
    return mesh


def plan_entry(
    graph: Graph, sig: ast.Signature, meshes: Sequence[ast.Mesh], file: str
) -> ShardPlan:
    """Propagate the parameters' annotations of ``sig`` and the layouts written with
    ``reshard`` and the collectives (:mod:`kinac.shard.explicit`) through ``graph``."""
    mesh = entry_mesh(sig, meshes, graph)
    pinned: dict[int, Pinned] = {}
    diags: list[Diagnostic] = []
    written: list[Diagnostic] = []
    if mesh is not None:
        explicit, written = read_explicit(graph, mesh)
        pinned.update(explicit)
        diags += written
        types = {p.name: p.type for p in sig.params if p.type is not None}
        for i, (name, tt) in enumerate(graph.params):
            ty = types.get(name)
            if ty is None:
                continue
            pin, ds = read_pinned(ty, len(tt.shape), mesh, file, sig.name, name)
            diags += ds
            if pin is not None:
                pinned[i] = pin
        declared, ds = result_pin(sig, graph, mesh, file)
        diags += ds
        if declared is not None:
            hint = result_hint(declared)
            hints = {graph.outputs[0]: hint} if hint is not None else {}
            plan = propagate(graph, pinned, mesh, diags, hints, (result_use(declared),))
            return replace(plan, diagnostics=without_cascades(plan.diagnostics, written))
    else:
        diags += unknown_mesh(graph, {m.name for m in meshes})
    plan = propagate(graph, pinned, mesh, diags)
    return replace(plan, diagnostics=without_cascades(plan.diagnostics, written))
