"""Recompute attention probabilities in the backward pass instead of keeping them (GPU).

Why: reverse mode keeps every forward value a VJP reads alive from the forward pass to its
use in the backward pass. For attention that is the softmax output ``P`` of shape
``[B, H, S, S]``: 256 MiB in f32 at the 45M block (B=4 H=16 S=1024), live through the whole
FFN backward, where the gradient's memory peaks. Recomputing ``P`` where the backward needs it
(one batched ``Q K^T`` on cuBLAS and a softmax row kernel) frees it in between, and leaves the
forward's ``softmax -> matmul`` with a single user: ``gpu-fuse-attention`` then fuses the
forward into the flash kernel (bf16/f16), which never materialises the ``S x S`` scores at
all. PyTorch's ``scaled_dot_product_attention`` backward makes the same trade. By default only
for :data:`DTYPES` (see there why not f32).

:func:`rematerialize_softmax` copies, for each softmax of the forward pass that the backward
reads, its *cone*: the softmax and the elementwise ops, masks and the one matmul (the scores)
it is computed from; the cone stops at views, params and any other op, which are shared (the
matmul's operands are views of Q and K, kept anyway for their own gradients). The copies go
just before the first backward node that reads any value of the cone, and every backward read
of the cone is redirected to them. Nothing is done to a softmax the backward does not read, or
below :data:`MIN_BYTES` (a small attention costs more to recompute than it saves). The
values are bit-identical: the copies are the same ops on the same inputs.
"""

from __future__ import annotations

from kinac.dtypes import ITEMSIZE
from kinac.tir.graph import Graph, Node

MIN_BYTES = 1 << 20
"""A softmax output smaller than this is kept, not recomputed."""

DTYPES = ("bf16", "f16")
"""The dtypes whose attention probabilities are recomputed by default: those whose forward
attention then fuses into the flash kernel (``gpu-fuse-attention``), where the recompute is
paid for by the forward's saved ``S x S`` traffic (45M bf16: estimate 2.236 -> 2.208 ms, arena
500 -> 372 MiB). In f32 the forward cannot fuse and the recompute costs ~2% of the step
(25.22 -> 25.70 ms estimated) for 256 MiB (arena 1000 -> 744 MiB): f32 keeps ``P``; with the
backward ordered for memory (:mod:`kinac.grad.schedule`) its plan is 1104 MiB, under
``torch.compile``'s measured 1184 (docs/gradients-gpu.md)."""


def _cheap(op: str) -> bool:
    """Whether an op of a softmax's cone is copied with it: elementwise maps, casts, selects and
    constants, which fuse into its row kernel. Asked of the primitive registry's traits rather
    than listed, so a new elementwise primitive is covered (tests/test_prims_registry.py)."""
    if op == "const":
        return True
    from kinac.check.prims import PRIMS

    prims = PRIMS.get(op)
    return prims is not None and bool({"elementwise", "creation"} & prims[0].traits)


def _nbytes(n: Node) -> int:
    size = ITEMSIZE[n.type.dtype]
    for d in n.type.shape:
        size *= d
    return size


def _cone(graph: Graph, root: int) -> list[int]:
    """The nodes recomputed with softmax ``root``, ascending: ``root``, the cheap elementwise
    ops it is computed from, and at most one matmul of ``root``'s shape (the scores)."""
    shape = graph.nodes[root].type.shape
    seen: set[int] = set()
    stack = [root]
    matmuls = 0
    while stack:
        i = stack.pop()
        if i in seen:
            continue
        n = graph.nodes[i]
        if i != root:
            if n.op == "matmul" and n.type.shape == shape and matmuls == 0:
                matmuls += 1
                seen.add(i)
                continue  # its operands (views of Q and K) are shared
            if not _cheap(n.op):
                continue
        seen.add(i)
        stack.extend(n.args)
    return sorted(seen)


def rematerialize_softmax(
    graph: Graph,
    forward_end: int | None = None,
    min_bytes: int = MIN_BYTES,
    dtypes: tuple[str, ...] = DTYPES,
) -> Graph:
    """``graph`` (a value-and-gradient graph) with each forward softmax of ``dtypes`` and at
    least ``min_bytes`` that the backward reads recomputed in the backward (see the module
    docstring). ``forward_end``: the first node of the backward pass (default: the one after
    the loss, ``outputs[0]``)."""
    end = graph.outputs[0] + 1 if forward_end is None else forward_end
    nodes = graph.nodes
    users = _users(graph)
    plans: list[tuple[int, list[int]]] = []  # (insert before node, cone)
    taken: set[int] = set()
    for i in range(end):
        n = nodes[i]
        if n.op != "softmax" or _nbytes(n) < min_bytes or n.type.dtype not in dtypes:
            continue
        cone = [c for c in _cone(graph, i) if c not in taken]
        late = [u for c in cone for u in users[c] if u >= end]
        if not late or i not in cone:
            continue
        if any(o in cone for o in graph.outputs):
            continue
        taken.update(cone)
        plans.append((min(late), cone))
    return _apply(graph, end, plans)


def _users(graph: Graph) -> list[list[int]]:
    users: list[list[int]] = [[] for _ in graph.nodes]
    for i, n in enumerate(graph.nodes):
        for a in n.args:
            users[a].append(i)
    return users


SMALL_OPERAND = 64
"""An operand at most 1/64 of a recomputed value's bytes is kept for the copy even when the
backward does not read it: the first norm's ``x / rms(x)`` (32 MiB at the 45M block, read by
the ``wn1`` gradient) is recomputed from ``x`` (a param) and ``rms(x)`` (16 KiB), which would
otherwise die in the forward: 32 MiB less through the whole backward."""

FREE = frozenset({"const", "full", "iota"})
"""Creation ops: no memory of their own (fused into their readers), always at hand."""


def rematerialize_elementwise(graph: Graph, forward_end: int | None = None) -> Graph:
    """``graph`` with each forward elementwise value the backward reads recomputed there, when
    that costs nothing: its operands are kept for the backward anyway (params, creation ops,
    values read by the backward at or after the recompute, or operands at most
    1/:data:`SMALL_OPERAND` of its size, kept for it), and no backward reader is a
    matmul (cuBLAS reads memory: the recompute would be a kernel of its own). The copy fuses
    into its backward reader and the original into its forward one, so the value is neither
    kept from the forward to the backward nor written and read once more: the 45M block's
    ``silu(g)`` (88 MiB in f32, read by the backward's ``dM * silu(g)``) and the norms'
    ``x / rms(x)`` (32 MiB each), recomputed from ``g``, ``x`` and ``rms`` which the backward
    keeps for their own VJPs. Bit-identical: the same op on the same operands."""
    from kinac.prims import ELEMENTWISE

    ops = frozenset((*ELEMENTWISE, "cast", "where"))
    end = graph.outputs[0] + 1 if forward_end is None else forward_end
    nodes = graph.nodes
    users = _users(graph)
    copied: set[int] = set()
    plans: list[tuple[int, list[int]]] = []

    def cone(i: int, at: int) -> list[int] | None:
        """The nodes to copy at ``at`` for ``i``: ``i`` and the copied values it reads (a chain
        such as ``x / rms(x) * w``), or None when an operand would not be at hand there."""
        out = [i]
        for a in nodes[i].args:
            if a in copied:
                sub = cone(a, at)
                if sub is None:
                    return None
                out += sub
            elif not (
                nodes[a].op == "param"
                or nodes[a].op in FREE
                or max(users[a]) >= at
                or _nbytes(nodes[a]) * SMALL_OPERAND <= _nbytes(nodes[i])
            ):
                return None
        return out

    for i in range(len(graph.params), end):
        n = nodes[i]
        late = [u for u in users[i] if u >= end]
        if n.op not in ops or not late or i in graph.outputs:
            continue
        if any(nodes[u].op in KEEP_FOR for u in late):
            continue
        at = min(late)
        c = cone(i, at)
        if c is not None and _feeds_matmul(nodes, users, i, end):
            # materialised again for cuBLAS: only when that reads one value of its size
            # (``x / rms(x) * w`` from ``x``; not ``silu(g) * u`` from ``g`` and ``u``)
            ins = {a for k in c for a in nodes[k].args if a not in c}
            if sum(_nbytes(nodes[a]) >= _nbytes(n) for a in ins) > 1:
                c = None
        if c is not None:
            copied.add(i)
            plans.append((at, sorted(set(c))))
    return _apply(graph, end, plans)


VIEWS = frozenset({"reshape", "transpose"})

KEEP_FOR = frozenset({"matmul", "eq", "ne"})
"""Backward readers for which a forward elementwise value is kept, not recomputed. ``matmul``:
cuBLAS reads memory (the copy would be a kernel of its own). ``eq``/``ne``: an equality needs
the very bits the forward computed (the gradient of ``max`` is ``eq(y, max y) / count``), and
on the GPU the copy is not bit-identical in f16/bf16: a kernel rounds its intermediates only
where it stores them, so the copy (``x / rms * w`` recomputed from ``x`` in one kernel) and the
forward's value (``x / rms`` stored, then ``* w`` in the max's kernel) can differ by an ulp; the
gradient was NaN at about 1 of 100 f16 inputs (tests/test_adversary_grad_findings.py,
docs/gpu-precision.md). In f32, a vectorised kernel's division by a row value is a reciprocal
multiply, a scalar one's is not: the same hazard, rarer."""


def _feeds_matmul(nodes: tuple[Node, ...], users: list[list[int]], i: int, end: int) -> bool:
    """Whether a backward reader of ``i``, through views, is a matmul (cuBLAS reads memory:
    a recomputed copy is then a kernel of its own)."""
    stack = [u for u in users[i] if u >= end]
    while stack:
        u = stack.pop()
        if nodes[u].op == "matmul":
            return True
        if nodes[u].op in VIEWS:
            stack.extend(users[u])
    return False


def rematerialize(graph: Graph, softmax_dtypes: tuple[str, ...] = DTYPES) -> Graph:
    """The GPU gradient's recomputations: large attention probabilities of
    ``softmax_dtypes`` (:func:`rematerialize_softmax`; bf16/f16 by default), then free
    elementwise values (:func:`rematerialize_elementwise`); then the backward ordered for
    memory (:func:`kinac.grad.schedule.order_for_memory`)."""
    from kinac.grad.schedule import order_for_memory

    graph = rematerialize_softmax(graph, dtypes=softmax_dtypes)
    return order_for_memory(rematerialize_elementwise(graph))


def _apply(graph: Graph, end: int, plans: list[tuple[int, list[int]]]) -> Graph:
    """``graph`` with each plan's nodes (ascending) copied just before its node ``at``, and
    every node from ``end`` on reading the copies instead of the originals."""
    if not plans:
        return graph
    nodes = graph.nodes
    before: dict[int, list[list[int]]] = {}
    for at, cone in plans:
        before.setdefault(at, []).append(cone)
    new_index: dict[int, int] = {}  # old node -> new position
    copy_of: dict[int, int] = {}  # cone node -> its copy's new position
    out: list[Node] = []

    def remap(a: int, late: bool) -> int:
        return copy_of[a] if late and a in copy_of else new_index[a]

    for i, n in enumerate(nodes):
        for cone in before.get(i, ()):
            for c in cone:
                m = nodes[c]
                copy_of[c] = len(out)
                out.append(Node(m.op, tuple(remap(a, True) for a in m.args), m.attrs, m.type))
        new_index[i] = len(out)
        out.append(Node(n.op, tuple(remap(a, i >= end) for a in n.args), n.attrs, n.type))
    outputs = tuple(remap(o, True) if k else new_index[o] for k, o in enumerate(graph.outputs))
    return Graph(graph.name, graph.params, tuple(out), outputs)
