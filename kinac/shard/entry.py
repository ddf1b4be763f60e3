"""From an entry's signature and graph to its plan: which mesh, which layouts are pinned.

The query in :mod:`kinac.pipeline` passes span-free inputs (the graph, the signature, the
meshes the file sees), so a comment edit re-runs nothing and an annotation edit re-runs only
the entries of that defn.
"""

from __future__ import annotations

from collections.abc import Sequence

from kinac.diag.model import Diagnostic
from kinac.reader import ast
from kinac.shard.annotations import Pinned, arg_of, read_pinned
from kinac.shard.model import ShardPlan
from kinac.shard.propagate import propagate
from kinac.tir.graph import Graph


def named_mesh(sig: ast.Signature, meshes: Sequence[ast.Mesh]) -> ast.Mesh | None:
    """The mesh the first sharding annotation of the signature names (one mesh per entry)."""
    by_name = {m.name: m for m in meshes}
    for p in sig.params:
        for an in p.type.annotations if p.type is not None else ():
            if an.name not in ("sharded", "partial"):
                continue
            name = arg_of(an.args, "mesh", 1)
            if isinstance(name, str) and name in by_name:
                return by_name[name]
    return None


def plan_entry(
    graph: Graph, sig: ast.Signature, meshes: Sequence[ast.Mesh], file: str
) -> ShardPlan:
    """Propagate the parameters' annotations of ``sig`` through ``graph``."""
    mesh = named_mesh(sig, meshes)
    pinned: dict[int, Pinned] = {}
    diags: list[Diagnostic] = []
    if mesh is not None:
        types = {p.name: p.type for p in sig.params if p.type is not None}
        for i, (name, tt) in enumerate(graph.params):
            ty = types.get(name)
            if ty is None:
                continue
            pin, ds = read_pinned(ty, len(tt.shape), mesh, file, sig.name, name)
            diags += ds
            if pin is not None:
                pinned[i] = pin
    return propagate(graph, pinned, mesh, diags)
