"""Cutting an entry's graph into pieces that lower on their own and give the same kernels.

Why: lowering an entry whole (xDSL module, fusion, the wrapper) costs time in proportion to the
entry, so an edit to one layer of a 32-layer model paid for all 32. Specialisation records
where each call of the entry's own body begins and ends (``Specialised.calls``); those
positions are the candidate *cuts*. The graph between two chosen cuts is a *piece*: a Graph of
its own whose params are the values it reads from earlier pieces (numbered by first use, so
the same call in every layer is the same piece) and whose outputs are the values later pieces
or the entry read. Pieces are lowered and fused as queries keyed by that Graph, so identical
layers lower once and an edit re-lowers only the pieces it changed; the entry then only
stitches their kernels (:mod:`kinac.ir.host.stitch`).

A cut is taken only where it cannot change fusion: every value live across it must be one
that ``fuse-kernels`` materialises in the whole graph anyway (:func:`surely_materialised`), so
the pieces' kernels, in order, are exactly the whole graph's kernels. Plain Python over the
Graph: no xDSL, so a build whose pieces are all cached never imports it.
"""

from __future__ import annotations

from kinac.prims import ELEMENTWISE
from kinac.rules.codec import encode, record
from kinac.tir.graph import Graph, Node

# Graph ops that ``fuse-kernels`` always materialises (not elementwise, not views) ...
NOT_FUSED = frozenset(
    {"reduce_sum", "reduce_mean", "reduce_max", "reduce_min", "matmul", "softmax", "gather",
     "concat"}
)  # fmt: skip
# ... and the elementwise arithmetic it recomputes in a single reader but materialises when read
# twice (cost >= 1). Any other op (views, creation, an op added later) is taken to be one the
# fuser may recompute for free: never a reason to cut. ``legalize-dtypes`` turns compute ops
# on f16/bf16 operands into f32 ones between casts: their value is then a cast.
ARITH = frozenset((*ELEMENTWISE, "cast", "where"))
LOW_COMPUTED = frozenset(
    {"reduce_sum", "reduce_mean", "reduce_max", "reduce_min", "matmul", "softmax"}
)
LOW = ("f16", "bf16")


@record
class Piece:
    """One piece of an entry: ``graph`` (params ``in0..``, in first-use order) computes the
    entry's nodes ``start..stop``; ``inputs`` are the entry nodes its params stand for and
    ``outputs`` the entry nodes its outputs are (the last piece's are the entry's outputs)."""

    graph: Graph
    start: int
    stop: int
    inputs: tuple[int, ...]
    outputs: tuple[int, ...]


# The host's fuse-kernels also folds a reduction read once (into its reader's map kernel,
# kinac/ir/host/row_fuse.py) and a product read once through a transpose or reshape (into its
# own kernel, kinac/ir/host/gemm_out.py): neither is surely materialised.
REDUCES = frozenset({"reduce_sum", "reduce_mean", "reduce_max", "reduce_min"})
VIEWS = frozenset({"transpose", "reshape"})


def _host_may_fuse(op: str, readers: int, by_view: bool) -> bool:
    return readers == 1 and (op in REDUCES or (op == "matmul" and by_view))


def surely_materialised(
    g: Graph, readers: list[int], by_matmul: list[bool], by_view: list[bool] | None = None
) -> list[bool]:
    """For each node, whether ``fuse-kernels`` gives it a buffer in the whole graph whatever
    the rest of the graph is (a sufficient condition: a False only costs a cut).

    Mirrors ``_Fuser.decide``: params and outputs; results of ops that are not elementwise
    (unless ``legalize-dtypes`` hands their value on as a cast); elementwise arithmetic read
    by two or more ops; arithmetic that a matmul reads (f32/f64/ints: no cast between)."""
    n = len(g.nodes)
    out = [False] * n
    for o in g.outputs:
        out[o] = True
    for i, node in enumerate(g.nodes):
        op = node.op
        if op == "param":
            out[i] = True
            continue
        low_cast = (
            op in LOW_COMPUTED
            and node.type.dtype in LOW
            and any(g.nodes[a].type.dtype in LOW for a in node.args)
        )
        if op in NOT_FUSED and not low_cast:
            view = by_view is not None and by_view[i]
            out[i] = out[i] or by_view is None or not _host_may_fuse(op, readers[i], view)
        elif op in ARITH or low_cast:  # elementwise arithmetic (or a cast of a result)
            if readers[i] >= 2:
                out[i] = True
            elif node.type.dtype not in LOW and by_matmul[i]:
                out[i] = True
    return out


def cut_points(g: Graph, calls: tuple[tuple[int, int], ...]) -> list[int]:
    """The candidate positions (call boundaries) at which cutting ``g`` keeps its kernels."""
    n, nparams = len(g.nodes), len(g.params)
    readers = [0] * n  # how many nodes read each value (counted, not collected: 1,800 sets)
    by_matmul = [False] * n  # whether a matmul reads it
    by_view = [False] * n  # whether a transpose or reshape reads it
    last = list(range(n))  # last node reading each value (itself if none)
    for i, node in enumerate(g.nodes):
        mm = node.op == "matmul"
        view = node.op in VIEWS
        for a in node.args:
            if last[a] != i:  # readers come in order: a repeated argument counts once
                readers[a] += 1
                last[a] = i
            if mm:
                by_matmul[a] = True
            if view:
                by_view[a] = True
    for o in g.outputs:
        last[o] = n  # read after the last node
    mat = surely_materialised(g, readers, by_matmul, by_view)
    # a cut at p is safe when no value made before p (past the params) and read at or after p
    # is one the whole graph would recompute in its reader: count those per position
    bad = [0] * (n + 2)
    for v in range(nparams, n):
        if not mat[v] and last[v] > v:
            bad[v + 1] += 1
            bad[last[v] + 1] -= 1
    live_bad, bad_at = 0, [0] * (n + 1)
    for p in range(n + 1):
        live_bad += bad[p]
        bad_at[p] = live_bad
    first_out = min((o for o in g.outputs if o >= nparams), default=n)
    if len(set(g.outputs)) != len(g.outputs):  # a repeated output is copied at the end
        return []
    cands = sorted({p for c in calls for p in c if nparams < p < n and p <= first_out})
    return [p for p in cands if bad_at[p] == 0]


def cut(g: Graph, calls: tuple[tuple[int, int], ...]) -> tuple[Piece, ...]:
    """``g`` cut at every safe call boundary (one piece, the whole graph, if none is)."""
    n = len(g.nodes)
    bounds = [len(g.params), *cut_points(g, calls), n]
    last = [-1] * n
    for i, node in enumerate(g.nodes):
        for a in node.args:
            last[a] = i
    return tuple(_piece(g, a, b, last) for a, b in zip(bounds, bounds[1:], strict=False))


# Pieces made in this process, by (start, stop, first node's id): an edit to one layer of a
# resident session cuts an entry graph whose other calls' nodes are the previous graph's very
# objects (``specialise`` remembers them), so their pieces are found here instead of rebuilt
# (1500 nodes at L=32). A hit needs the same node objects (``is``; the entry holds them, so
# their ids stay theirs), outputs and input types: everything a piece is made from.
_MADE: dict[
    tuple[int, int, int], tuple[tuple[Node, ...], tuple[int, ...], tuple[object, ...], Piece]
] = {}
_MADE_MAX = 4096


def _piece(g: Graph, a: int, b: int, last: list[int]) -> Piece:
    """Nodes ``a..b`` of ``g`` as a graph of their own."""
    final = b == len(g.nodes)
    outs = list(g.outputs) if final else [v for v in range(a, b) if last[v] >= b]
    order: dict[int, None] = {}  # the values read from before ``a``, in first-use order
    for i in range(a, b):
        for x in g.nodes[i].args:
            if x < a:
                order.setdefault(x)
    for o in outs:
        if o < a:  # an entry output that is a param (the fuser copies it)
            order.setdefault(o)
    body = g.nodes[a:b]
    types = tuple([g.nodes[v].type for v in order])
    key = (a, b, id(body[0]) if body else 0)
    made = _MADE.get(key)
    if (made is not None and made[1] == tuple(outs) and made[2] == types
            and all(x is y for x, y in zip(made[0], body, strict=True))):  # fmt: skip
        return made[3]
    piece = _build(g, a, b, outs, order)
    if len(_MADE) >= _MADE_MAX:
        _MADE.clear()
    _MADE[key] = (body, tuple(outs), types, piece)
    return piece


def _build(g: Graph, a: int, b: int, outs: list[int], order: dict[int, None]) -> Piece:
    """The piece of nodes ``a..b`` reading ``order`` (entry nodes before ``a``) and giving
    ``outs``: its nodes renumbered (params first)."""
    inputs = {v: j for j, v in enumerate(order)}
    k = len(inputs)
    shift = a - k  # node x >= a is the piece's node x - shift; x < a its input inputs[x]

    params = tuple((f"in{j}", g.nodes[v].type) for j, v in enumerate(inputs))
    nodes = [Node("param", (), (("index", j),), t) for j, (_, t) in enumerate(params)]
    nodes += [
        Node(nd.op, tuple([x - shift if x >= a else inputs[x] for x in nd.args]), nd.attrs,
             nd.type)
        for nd in g.nodes[a:b]
    ]  # fmt: skip
    outputs = tuple([o - shift if o >= a else inputs[o] for o in outs])
    graph = Graph("piece", params, tuple(nodes), outputs)
    if len(_GRAPHS) >= _MADE_MAX:
        _GRAPHS.clear()
    graph = _GRAPHS.setdefault(encode(graph), graph)  # equal pieces (layers): one object
    return Piece(graph, a, b, tuple(inputs), tuple(outs))


# Piece graphs made in this process, by their canonical text (not ``==``: a node attribute
# 1 equals 1.0 but is another program's): the 32 layers' equal pieces get one object, so an
# entry's distinct pieces are found by identity (``distinct_graphs``) instead of hashing
# every piece's ~60 nodes twice per build. Bounded like ``_MADE``.
_GRAPHS: dict[bytes, Graph] = {}


def distinct_graphs(pieces: tuple[Piece, ...]) -> tuple[list[Graph], list[int]]:
    """Each distinct piece graph once, in first-use order, and each piece's index into them.
    By identity first (equal pieces share their graph object, see ``_GRAPHS``), then by
    canonical text, so two equal graphs that are not one object are still one entry."""
    graphs: list[Graph] = []
    by_id: dict[int, int] = {}
    by_text: dict[bytes, int] = {}
    which: list[int] = []
    for p in pieces:
        g = p.graph
        at = by_id.get(id(g))
        if at is None:
            text = encode(g)
            at = by_text.get(text)
            if at is None:
                at = by_text[text] = len(graphs)
                graphs.append(g)
            by_id[id(g)] = at
        which.append(at)
    return graphs, which
