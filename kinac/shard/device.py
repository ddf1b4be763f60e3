"""The per-device (SPMD) program of an entry: local-shape segments and collective steps.

Why this shape: every rank runs the same program on its own shards (NCCL's model). From the
entry's Graph and its :class:`ShardPlan`, each op is computed at its LOCAL shape (dims divided
by the mesh axes splitting them) on operands redistributed to the layout the plan says it
reads them in (``ShardPlan.reads``); its local result has the layout the plan says it computes
(``ShardPlan.computed``) and is then brought to its final layout (a local slice, a
reduce-scatter). Redistributions are the steps of :func:`kinac.shard.redistribute.moves`.
The ops between two collectives form a *segment*: an ordinary Graph at local shapes whose
params are the slots it reads, compiled by the existing host or GPU path, unchanged.

Local rewrites (the only ops whose meaning depends on the split):
- ``reduce_mean`` over a split axis: a local ``reduce_sum`` divided by the GLOBAL count, so
  the ranks' shares sum to the mean (the result is partial over that axis);
- ``iota`` split along its own axis: computed whole, then sliced (a local iota would count
  from 0 on every rank).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from kinac.artifacts.sharded import (
    Collective,
    DeviceProgram,
    MeshSpec,
    ParamLayout,
    RunSegment,
)
from kinac.diag.model import Label
from kinac.dtypes import ITEMSIZE
from kinac.shard.model import ShardPlan, Use
from kinac.shard.redistribute import Dims, local_shape, moves
from kinac.tir.graph import Graph, Node, TType, make_node

Layout = tuple[Dims, tuple[str, ...]]


class ShardLoweringError(Exception):
    """A redistribution the plan asks for has no collective (an internal error: the plan
    never makes a replicated value partial)."""


@dataclass
class _Coll:
    kind: str
    axis: str
    src: int
    dst: int
    dim: int
    concat_dim: int
    nbytes: int
    span: str
    reason: str


@dataclass
class _Builder:
    """Local values (``vid``s) and the ops that make them, in program order: a local node
    (``Node`` whose args are vids) or a collective."""

    graph: Graph
    plan: ShardPlan
    mesh: MeshSpec
    span_of: Callable[[Label | None], str]
    ops: list[tuple[int, Node | _Coll]] = field(default_factory=list)
    types: dict[int, TType] = field(default_factory=dict)
    variants: dict[int, dict[Layout, int]] = field(default_factory=dict)
    causes: dict[tuple[str, str, int], Label | None] = field(default_factory=dict)
    n: int = 0

    @property
    def sizes(self) -> dict[str, int]:
        return dict(zip(self.mesh.axes, self.mesh.shape, strict=True))

    def new(self, ttype: TType) -> int:
        v = self.n
        self.n += 1
        self.types[v] = ttype
        return v

    def local_type(self, t: TType, dims: Dims) -> TType:
        return TType(t.dtype, local_shape(t.shape, dims, self.sizes), t.device)

    def node(self, op: str, args: tuple[int, ...], ttype: TType, attrs: tuple) -> int:
        v = self.new(ttype)
        self.ops.append((v, Node(op, args, attrs, ttype)))
        return v

    def get(self, node: int, want: Layout) -> int:
        """A local value of global ``node`` in layout ``want``: an existing copy, or the
        canonical one redistributed (each intermediate copy is kept for later uses)."""
        have = self.variants[node]
        if want in have:
            return have[want]
        (src_layout, v) = next(iter(have.items()))  # the canonical (first) copy
        steps = moves(src_layout, want)
        if steps is None:
            raise ShardLoweringError(f"node {node}: no collective from {src_layout} to {want}")
        t = self.graph.nodes[node].type
        for m in steps:
            after: Layout = (m.dims, m.partial)
            if after in have:
                v = have[after]
                continue
            before_t = self.types[v]
            out_t = self.local_type(t, m.dims)
            dst = self.new(out_t)
            sent = before_t.numel * ITEMSIZE[t.dtype]
            cause = self.causes.get((m.kind, m.axis, node))
            if cause is None:
                cause = next((c for (k, a, i), c in self.causes.items() if i == node), None)
            what = self.tensor(node)
            reason = {
                "all-reduce": f"{what} is a partial sum over `{m.axis}`",
                "reduce-scatter": f"{what} is a partial sum, split on dim {m.dim} after",
                "all-gather": f"{what} is needed whole on dim {m.dim} along `{m.axis}`",
                "all-to-all": f"{what} moves its `{m.axis}` split from dim {m.concat_dim} "
                f"to dim {m.dim}",
                "slice": f"{what} is split on dim {m.dim} along `{m.axis}` (local)",
            }[m.kind]
            coll = _Coll(
                m.kind,
                m.axis,
                v,
                dst,
                m.dim,
                m.concat_dim,
                0 if m.kind == "slice" else sent,
                self.span_of(cause),
                reason,
            )
            self.ops.append((dst, coll))
            have[after] = dst
            v = dst
        return v

    def tensor(self, i: int) -> str:
        g = self.graph
        return f"`{g.params[i][0]}`" if i < len(g.params) else f"%{i} ({g.nodes[i].op})"


def _layout(u: Use) -> Layout:
    return (tuple(u.dims), tuple(u.partial))


def device_program(
    graph: Graph,
    plan: ShardPlan,
    span_of: Callable[[Label | None], str],
    output_dims: Sequence[Dims | None] | None = None,
) -> DeviceProgram:
    """The SPMD program of ``graph`` under ``plan`` (whose mesh is not None).

    ``output_dims[k]``, when given and not None, is the layout output ``k`` is returned in
    (instead of its node's): a graph returning one node twice, or a node whose own layout
    differs from the one its caller asked for (a gradient in its parameter's layout), gets
    each output redistributed to its own layout."""
    assert plan.mesh is not None
    mesh = MeshSpec(plan.mesh, tuple(n for _, n in plan.axes), tuple(a for a, _ in plan.axes))
    b = _Builder(graph, plan, mesh, span_of)
    for c in plan.collectives:
        b.causes.setdefault((c.kind, c.axis, c.node), c.cause)
    params = []
    for i, (name, t) in enumerate(graph.params):
        u = plan.computed[i]
        lt = b.local_type(t, u.dims)
        v = b.new(lt)
        b.variants[i] = {_layout(u): v}
        params.append((name, lt, ParamLayout(u.dims, u.partial)))
    for i in range(len(graph.params), len(graph.nodes)):
        _lower_node(b, i)
    outputs = []
    for k, o in enumerate(graph.outputs):
        asked = output_dims[k] if output_dims is not None else None
        declared = plan.results[k] if asked is None and k < len(plan.results) else None
        final = plan.layouts[o].dims if asked is None else tuple(tuple(d) for d in asked)
        keep: tuple[str, ...] = ()
        if declared is not None:  # the result type's layout (kinac.shard.result)
            final, keep = tuple(tuple(d) for d in declared.dims), tuple(declared.partial)
        v = b.get(o, (final, keep))
        outputs.append((v, b.types[v], ParamLayout(final, keep)))
    return _segment(b, tuple(params), outputs)


def _lower_node(b: _Builder, i: int) -> None:
    """Op ``i`` at its local shape on its operands in the layouts it reads them in."""
    g, plan = b.graph, b.plan
    node = g.nodes[i]
    args = tuple(b.get(a, _layout(u)) for a, u in zip(node.args, plan.reads[i], strict=True))
    comp = plan.computed[i]
    dims = tuple(comp.dims)
    if node.op == "iota" and dims[int(node.attr("axis"))]:  # counts from 0 on every rank
        ax = int(node.attr("axis"))
        dims = tuple(() if d == ax else x for d, x in enumerate(dims))
    lt = b.local_type(node.type, dims)
    if node.op == "reshard":  # a written layout: its operand redistributed into it
        v = b.get(node.args[0], (dims, tuple(comp.partial)))
    elif node.op == "reduce_mean" and plan.reads[i][0].dims[int(node.attr("axis"))]:
        ax = int(node.attr("axis"))
        count = node.type.dtype, g.nodes[node.args[0]].type.shape[ax]
        s = b.node("reduce_sum", args, lt, node.attrs)
        c = b.node("const", (), TType(count[0], (), lt.device), (("value", float(count[1])),))
        v = b.node("div", (s, c), lt, ())
    else:
        v = b.node(node.op, args, lt, node.attrs)
    b.variants[i] = {(dims, tuple(comp.partial)): v}
    final: Layout = (plan.layouts[i].dims, tuple(plan_partial(plan, i)))
    if final != (dims, tuple(comp.partial)):
        fv = b.get(i, final)
        b.variants[i] = {final: fv, **b.variants[i]}  # the final layout is the canonical copy


def plan_partial(plan: ShardPlan, i: int) -> tuple[str, ...]:
    """The partial axes of node ``i`` after its op (and any reduce-scatter)."""
    return tuple(plan.layouts[i].partial)


def _segment(
    b: _Builder,
    params: tuple[tuple[str, TType, ParamLayout], ...],
    outputs: list[tuple[int, TType, ParamLayout]],
) -> DeviceProgram:
    """Cut the ops at each collective into segments; give every value crossing a cut a slot."""
    nparams = len(params)
    defined_at: dict[int, int] = {}
    for k, (v, _) in enumerate(b.ops):
        defined_at[v] = k
    consts = {v for v, op in b.ops if isinstance(op, Node) and op.op == "const"}
    # where each vid is read from outside its own run of nodes
    runs: list[list[int]] = []  # op indices of each run of nodes
    run_of: dict[int, int] = {}
    for k, (_, op) in enumerate(b.ops):
        if isinstance(op, Node):
            if not runs or k - 1 not in run_of:
                runs.append([])
            runs[-1].append(k)
            run_of[k] = len(runs) - 1
    needed: set[int] = {v for v, _, _ in outputs}
    for k, (_, op) in enumerate(b.ops):
        if isinstance(op, _Coll):
            needed.add(op.src)
        else:
            for a in op.args:
                ka = defined_at.get(a)
                if a in consts:
                    continue  # re-made in every segment that reads it
                if ka is None or run_of.get(ka) != run_of[k]:
                    needed.add(a)
    slot: dict[int, int] = {v: v for v in range(nparams)}  # params are vids 0..n-1

    def slot_of(v: int) -> int:
        if v not in slot:
            slot[v] = len(slot)
        return slot[v]

    segments: list[Graph] = []
    steps: list[RunSegment | Collective] = []
    k = 0
    while k < len(b.ops):
        v, op = b.ops[k]
        if isinstance(op, _Coll):
            steps.append(
                Collective(
                    op.kind,
                    op.axis,
                    slot_of(op.src),
                    slot_of(op.dst),
                    op.dim,
                    "sum",
                    op.nbytes,
                    op.span,
                    op.reason,
                    op.concat_dim,
                )
            )
            k += 1
            continue
        run = runs[run_of[k]]
        seg = _segment_graph(b, run, needed, consts, len(segments))
        k = run[-1] + 1
        if seg is None:
            continue
        graph, ins, made = seg
        steps.append(
            RunSegment(
                len(segments), tuple(slot_of(x) for x in ins), tuple(slot_of(x) for x in made)
            )
        )
        segments.append(graph)
    outs = tuple((slot_of(v), t, lay) for v, t, lay in outputs)
    return DeviceProgram(b.mesh, params, outs, tuple(steps), tuple(segments))


def _segment_graph(
    b: _Builder, run: list[int], needed: set[int], consts: set[int], index: int
) -> tuple[Graph, list[int], list[int]] | None:
    """One run of local nodes as a Graph: params are the vids it reads from outside (consts
    are copied in), outputs the vids it defines that are needed outside. None when nothing it
    computes is needed (never for a checked program: every node feeds the output)."""
    inside = {b.ops[k][0] for k in run}
    ins: list[int] = []
    for k in run:
        op = b.ops[k][1]
        assert isinstance(op, Node)
        for a in op.args:
            if a not in inside and a not in consts and a not in ins:
                ins.append(a)
    outs = [b.ops[k][0] for k in run if b.ops[k][0] in needed]
    if not outs:
        return None
    nodes: list[Node] = []
    at: dict[int, int] = {}
    gparams = []
    for j, a in enumerate(ins):
        t = b.types[a]
        at[a] = len(nodes)
        nodes.append(make_node("param", (), t, index=j))
        gparams.append((f"s{a}", t))
    for k in run:
        v, op = b.ops[k]
        assert isinstance(op, Node)
        for a in op.args:
            if a in consts and a not in at:
                cop = next(o for w, o in b.ops if w == a)
                assert isinstance(cop, Node)
                at[a] = len(nodes)
                nodes.append(cop)
        at[v] = len(nodes)
        nodes.append(Node(op.op, tuple(at[a] for a in op.args), op.attrs, op.type))
    name = f"{b.graph.name}.seg{index}"
    return Graph(name, tuple(gparams), tuple(nodes), tuple(at[v] for v in outs)), ins, outs
