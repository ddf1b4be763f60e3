"""``propagate``: shardings for every tensor of an entry, and the collectives they imply.

One algorithm over the factor tables of :mod:`kinac.shard.factors`, never over op names:

1. Pinned layouts: the parameters' annotations (user annotations win: never changed).
2. Fixpoint: forward then backward over the ops, each op reads the known dims of its
   operands and result, gives each factor the axes of the dims whose major factor it is,
   and writes them into open dims. A dim is written once, so it terminates. Two different
   candidates for one factor are decided by the cost model (the larger tensor keeps its
   layout: moving it costs more bytes); two *pinned* tensors disagreeing at one op is K0704.
3. Open dims left are replicated.
4. Planning: in program order, each operand's layout is compared with what its op's
   factors ask; partial operands are all-reduced (or reduce-scattered when the op wants
   them split on that axis), dims split where the factor is not are all-gathered, dims
   whole where the factor is split are sliced locally (no traffic).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from kinac.diag.model import Diagnostic, Label
from kinac.dtypes import ITEMSIZE
from kinac.reader import ast
from kinac.shard.annotations import Pinned
from kinac.shard.codes import shard_diagnostic
from kinac.shard.factors import OpFactors, factors_of
from kinac.shard.model import Collective, ShardPlan
from kinac.shard.plan import plan
from kinac.shard.result import Result
from kinac.tir.graph import Graph


@dataclass
class _Dim:
    """A known dim layout: its axes and the annotation it came from."""

    axes: tuple[str, ...]
    cause: Label | None
    pinned: bool


class PropagationState:
    """Per node, per dim: a known layout or None (open)."""

    def __init__(self, graph: Graph, sizes: Mapping[str, int]) -> None:
        self.graph = graph
        self.sizes = dict(sizes)
        self.dims: list[list[_Dim | None]] = [[None] * len(n.type.shape) for n in graph.nodes]
        self.explicit: set[int] = set()
        """``reshard`` nodes whose written layout is pinned (:mod:`kinac.shard.explicit`)."""
        self.facts: list[OpFactors] = [
            factors_of(n, [graph.nodes[a].type.shape for a in n.args]) for n in graph.nodes
        ]

    def nbytes(self, i: int) -> int:
        t = self.graph.nodes[i].type
        return t.numel * ITEMSIZE[t.dtype]

    def used(self, i: int) -> set[str]:
        return {a for d in self.dims[i] if d is not None for a in d.axes}

    def fits(self, axes: tuple[str, ...], size: int) -> bool:
        n = 1
        for a in axes:
            n *= self.sizes[a]
        return size % n == 0


def _step(st: PropagationState, i: int, diags: list[Diagnostic]) -> bool:
    """One op: derive factor axes from known dims, write them into open dims."""
    node, of = st.graph.nodes[i], st.facts[i]
    members = [(a, dims) for a, dims in zip(node.args, of.operands, strict=True)]
    members.append((i, of.result))
    choice: dict[int, tuple[_Dim, int]] = {}
    for t, dims in members:
        for d, fs in enumerate(dims):
            known = st.dims[t][d]
            if not fs or known is None or not known.axes or fs[0] in of.need_replication:
                continue
            f = fs[0]
            prev = choice.get(f)
            if prev is None:
                choice[f] = (known, t)
                continue
            old, ot = prev
            if old.axes == known.axes:
                continue
            if old.pinned and known.pinned and ot != t and old.cause and known.cause:
                diags.append(_conflict(st, old, known, ot, t, node.op))
                continue
            keep, lose = (known, t), prev
            if (st.nbytes(t), -t) <= (st.nbytes(ot), -ot):
                keep, lose = prev, (known, t)
            choice[f] = keep
            if keep[0].cause is not None:
                diags.append(_redistribution(st, keep, lose, node.op))
    changed = False
    for t, dims in members:
        for d, fs in enumerate(dims):
            if st.dims[t][d] is not None or not fs or fs[0] not in choice:
                continue
            src, _ = choice[fs[0]]
            size = st.graph.nodes[t].type.shape[d]
            if st.used(t) & set(src.axes) or not st.fits(src.axes, of.sizes[fs[0]]):
                continue
            if not st.fits(src.axes, size):
                continue
            st.dims[t][d] = _Dim(src.axes, src.cause, False)
            changed = True
    return changed


def _conflict(st: PropagationState, a: _Dim, b: _Dim, ta: int, tb: int, op: str) -> Diagnostic:
    """K0704: two pinned layouts give one factor of ``op`` different mesh axes."""
    na, nb = _describe(st.graph, ta), _describe(st.graph, tb)
    xa, xb = _axes(a.axes), _axes(b.axes)
    assert a.cause is not None and b.cause is not None
    return shard_diagnostic(
        "K0704",
        "error",
        f"the shardings of {na} and {nb} disagree where they meet in `{op}`: the same dim is "
        f"split over {xa} in one and over {xb} in the other",
        Label(b.cause.loc, f"{nb} split over {xb}"),
        (Label(a.cause.loc, f"{na} split over {xa}"),),
        help="both layouts are pinned by annotations: make them agree, or `reshard` one",
    )


def _axes(axes: tuple[str, ...]) -> str:
    return " x ".join(f"`{a}`" for a in axes)


def _redistribution(
    st: PropagationState, keep: tuple[_Dim, int], lose: tuple[_Dim, int], op: str
) -> Diagnostic:
    """A note (K0705): two layouts meet at ``op``, one of them inferred; the cost model keeps
    the layout of the larger tensor and the other is redistributed (planned in plan.py)."""
    (kd, kt), (ld, lt) = keep, lose
    assert kd.cause is not None
    kn, ln = _describe(st.graph, kt), _describe(st.graph, lt)
    sec = (Label(ld.cause.loc, "this annotation's layout is redistributed"),) if ld.cause else ()
    return shard_diagnostic(
        "K0705",
        "note",
        f"`{op}` meets {kn} split over {_axes(kd.axes)} and {ln} split over "
        f"{_axes(ld.axes)} on the same dim: {kn} keeps its layout ({st.nbytes(kt)} bytes, "
        f"the larger or the first), {ln} is all-gathered over {_axes(ld.axes)}",
        Label(kd.cause.loc, "this annotation's layout is kept"),
        sec,
        help="annotate one side to choose the other layout, or `reshard` explicitly",
    )


def _describe(graph: Graph, i: int) -> str:
    """A parameter by name, an intermediate by its op."""
    if i < len(graph.params):
        return f"`{graph.params[i][0]}`"
    return f"the result of `{graph.nodes[i].op}`"


def propagate(
    graph: Graph,
    pinned: Mapping[int, Pinned],
    mesh: ast.Mesh | None,
    diagnostics: Sequence[Diagnostic] = (),
    hints: Mapping[int, Pinned] | None = None,
    results: Sequence[Result | None] = (),
) -> ShardPlan:
    """The plan for ``graph`` given the parameters' ``pinned`` layouts over ``mesh``.

    ``hints`` are soft pins (the gradient of a parameter, which should come out in its
    parameter's layout): their dims are set before the fixpoint and never overwritten, so
    propagation plans toward them, but unlike ``pinned`` they never conflict (K0704) with
    anything: where they meet another layout, the cost model decides. A hint on a dim already
    pinned is ignored (a node hinted twice keeps the first); partial axes are not hinted.
    ``results[k]``: the layout output ``k`` is declared in (:mod:`kinac.shard.result`), reached
    by collectives planned at the end (the caller hints the output node toward it)."""
    diags = list(diagnostics)
    if mesh is None:  # nothing is sharded: the compact plan (ShardPlan.layout_of derives)
        return ShardPlan(None, (), (), (), tuple(diags))
    st = PropagationState(graph, dict(zip(mesh.axes, mesh.shape, strict=True)))
    st.explicit = {p for p in pinned if p >= len(graph.params)}  # written reshards
    partial: dict[int, tuple[str, ...]] = {}
    for p, pin in pinned.items():
        for d, axes in enumerate(pin.dims):
            cause = next((pin.where[a] for a in axes if a in pin.where), None)
            cause = cause or next(iter(pin.where.values()), None)
            st.dims[p][d] = _Dim(axes, cause, True)
        if pin.partial:
            partial[p] = pin.partial
    for h, pin in (hints or {}).items():
        for d, axes in enumerate(pin.dims):
            if st.dims[h][d] is not None or st.used(h) & set(axes):
                continue
            if not st.fits(axes, graph.nodes[h].type.shape[d]):
                continue
            cause = next((pin.where[a] for a in axes if a in pin.where), None)
            st.dims[h][d] = _Dim(tuple(axes), cause or next(iter(pin.where.values()), None), False)
    order = range(len(graph.params), len(graph.nodes))
    while True:
        changed = False
        for i in order:
            changed |= _step(st, i, diags)
        for i in reversed(order):
            changed |= _step(st, i, diags)
        if not changed or any(d.is_error for d in diags):
            break
    layouts, collectives, reads, computed = plan(st, partial, diags, results)
    return ShardPlan(
        mesh.name,
        tuple(zip(mesh.axes, mesh.shape, strict=True)),
        layouts,
        collectives,
        tuple(dict.fromkeys(diags)),
        reads,
        computed,
        tuple(r[0] if r is not None else None for r in results) if any(results) else (),
    )


__all__ = ["Collective", "propagate"]
