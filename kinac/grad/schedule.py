"""The backward pass's order, chosen for memory: what dies early is computed early (GPU).

Why: reverse mode emits each VJP's nodes in the rule's order, which is right for FLOPs but not
for the arena's peak. The 45M block's FFN backward made ``du = dM * silu(g)`` before
``dg = dM * u * silu'(g)``, so ``dM``, ``g``, ``u``, ``du`` and ``sigmoid(g)`` (a value read
twice, so not fused: its own kernel) were live at once, each ``[B, S, F]`` (88 MiB in f32),
with the stored attention probabilities (256 MiB): the gradient's peak, 194 MiB over
``torch.compile``'s. Computing ``dg`` first (``u`` dies there: ``dg`` is written over it) and
then ``du`` (``dM`` and ``g`` die: written over one of them) keeps three such values live.
No FLOP is added or removed: the same nodes in another order (and a few elementwise ops copied
into each reader, below), so the values are bit-identical.

Two steps, both on the nodes after the forward pass:

1. :func:`untangle`: a cheap elementwise backward value read by several elementwise backward
   nodes is copied into each (the copies fuse into their readers' kernels, as a single-use
   value does), so it is never written to memory: ``sigmoid(g)`` above.
2. :func:`schedule_backward`: the backward's *units* (a node that is materialised, with the
   single-use elementwise nodes and views that fuse into it) are listed greedily: of the units
   whose inputs are ready, one that frees more bytes than it allocates (the most net bytes
   first) before any other; otherwise the transform's own order (a unit that frees nothing is
   not moved: moving views and products around changes which views the GPU lowering
   materialises, for no memory). The new order is kept only when its estimated peak (live
   materialised values, an elementwise unit written over an input of its type that dies
   there, as the GPU's in-place kernels do) is not above the original's.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import cache

from kinac.dtypes import ITEMSIZE
from kinac.tir.graph import Graph, Node

VIEWS = frozenset({"reshape", "transpose", "broadcast_to", "const", "full", "iota"})
"""Nodes with no memory of their own: views of their operand, or creations fused into their
readers."""


ROWS = frozenset({"reduce_sum", "reduce_mean", "reduce_max", "reduce_min", "softmax"})
"""Row and reduction kernels, which read their elementwise operands fused."""


@cache
def _cheap_ops() -> frozenset[str]:
    from kinac.prims import ELEMENTWISE

    return frozenset((*ELEMENTWISE, "cast", "where"))


def _nbytes(n: Node) -> int:
    size = ITEMSIZE[n.type.dtype]
    for d in n.type.shape:
        size *= d
    return size


def _users(nodes: Sequence[Node]) -> list[list[int]]:
    users: list[list[int]] = [[] for _ in nodes]
    for i, n in enumerate(nodes):
        for a in dict.fromkeys(n.args):
            users[a].append(i)
    return users


MAX_COPY = 16
"""The most nodes one copy of an untangled value may hold (its chain of copied operands): a
bound on the nodes added, whatever the graph's shape (diamonds of shared values would
otherwise double at each level). ``sigmoid(g)`` is four."""


def untangle(graph: Graph, forward_end: int | None = None) -> Graph:
    """``graph`` with each backward elementwise node whose readers are all backward elementwise
    nodes, two or more of them (or one that is itself copied), copied once per reader (placed
    just before it): a chain such as ``1 / (1 + exp(-g))`` is copied whole, up to
    :data:`MAX_COPY` nodes a copy. Linear in the graph's size plus the copies."""
    end = graph.outputs[0] + 1 if forward_end is None else forward_end
    cheap = _cheap_ops()
    nodes = graph.nodes
    users = _users(nodes)
    outs = set(graph.outputs)
    barred: set[int] = set()
    while True:
        dup = [False] * len(nodes)
        for i in range(len(nodes) - 1, end - 1, -1):
            us = users[i]
            dup[i] = (
                i not in barred
                and i not in outs
                and nodes[i].op in cheap
                and bool(us)
                and all(nodes[u].op in cheap for u in us)
                and (len(us) >= 2 or dup[us[0]])
            )
        size = [0] * len(nodes)
        for i in range(end, len(nodes)):
            if dup[i]:
                size[i] = 1 + sum(size[a] for a in dict.fromkeys(nodes[i].args) if dup[a])
        big = {i for i in range(end, len(nodes)) if dup[i] and size[i] > MAX_COPY}
        if not big:
            break
        barred |= big
    if not any(dup):
        return graph
    out: list[Node] = []
    new_index: dict[int, int] = {}

    def arg(a: int, made: dict[int, int]) -> int:
        """``a``'s index for one reader: a fresh copy when ``a`` is untangled (``made``: the
        copies this reader already has, so ``add(s, s)`` copies ``s`` once)."""
        if not dup[a]:
            return new_index[a]
        if a not in made:
            m = nodes[a]
            args = tuple(arg(b, made) for b in m.args)
            out.append(Node(m.op, args, m.attrs, m.type))
            made[a] = len(out) - 1
        return made[a]

    for j, n in enumerate(nodes):
        if dup[j]:
            continue
        made: dict[int, int] = {}
        args = tuple(arg(a, made) for a in n.args)
        new_index[j] = len(out)
        out.append(Node(n.op, args, n.attrs, n.type))
    return Graph(graph.name, graph.params, tuple(out), tuple(new_index[o] for o in graph.outputs))


class _Units:
    """The backward's units: ``roots`` (materialised backward nodes, ascending), each with the
    materialised values it reads (``deps``: forward values and other roots, through fused
    nodes and views) and its size in the arena (``alloc``: 0 for an entry output)."""

    def __init__(self, graph: Graph, end: int) -> None:
        nodes = graph.nodes
        self.graph, self.end = graph, end
        users = _users(nodes)
        cheap = _cheap_ops()
        outs = set(graph.outputs)
        into = cheap | ROWS  # kernels an elementwise operand fuses into (not cuBLAS, a view)
        self.fused = [
            i >= end
            and i not in outs
            and (
                nodes[i].op in VIEWS
                or (
                    nodes[i].op in cheap
                    and len(users[i]) == 1
                    and users[i][0] >= end
                    and nodes[users[i][0]].op in into
                )
            )
            for i in range(len(nodes))
        ]
        self.roots = [i for i in range(end, len(nodes)) if not self.fused[i]]
        self.deps = {r: self._reads(r) for r in self.roots}
        self.alloc = {r: 0 if r in outs else _nbytes(nodes[r]) for r in self.roots}
        self.size = {
            v: 0 if nodes[v].op == "param" or v in outs else _nbytes(nodes[v])
            for r in self.roots
            for v in (r, *self.deps[r])
        }
        self.readers: dict[int, set[int]] = {}
        for r in self.roots:
            for v in self.deps[r]:
                self.readers.setdefault(v, set()).add(r)
        self.elementwise = {r for r in self.roots if nodes[r].op in cheap}

    def _reads(self, root: int) -> tuple[int, ...]:
        nodes, seen, out = self.graph.nodes, set(), []
        stack = list(nodes[root].args)
        while stack:
            a = stack.pop()
            if a in seen:
                continue
            seen.add(a)
            n = nodes[a]
            if (a >= self.end and self.fused[a]) or (a < self.end and n.op in VIEWS):
                stack.extend(n.args)
            else:
                out.append(a)
        return tuple(sorted(out))

    def inplace(self, r: int, dying: set[int]) -> bool:
        """Whether elementwise unit ``r`` may be written over an input that dies at it."""
        t = self.graph.nodes[r].type
        return r in self.elementwise and any(
            self.size[v] and self.graph.nodes[v].type == t for v in dying
        )

    def peak(self, order: Sequence[int]) -> int:
        """The estimated most bytes live at once over the backward ``order`` of roots."""
        left = {v: len(rs) for v, rs in self.readers.items()}
        live = {v for v in left if v < self.end and self.size[v]}
        cur = sum(self.size[v] for v in live)
        top = cur
        for r in order:
            dying = {v for v in self.deps[r] if left[v] == 1}
            alloc = 0 if self.inplace(r, dying) else self.alloc[r]
            top = max(top, cur + alloc)
            cur += self.alloc[r]
            for v in self.deps[r]:
                left[v] -= 1
                if left[v] == 0 and v in live:
                    live.discard(v)
                    cur -= self.size[v]
            if left.get(r, 0) and self.alloc[r]:
                live.add(r)
            else:
                cur -= self.alloc[r]
        return top

    def greedy(self) -> list[int]:
        """Ready units freeing more than they allocate first (most net bytes), else the
        first ready one in the transform's order."""
        left = {v: len(rs) for v, rs in self.readers.items()}
        pending = {r: {d for d in self.deps[r] if d >= self.end} for r in self.roots}
        waiting = {v: sorted(self.readers.get(v, ())) for v in self.roots}
        ready = sorted(r for r in self.roots if not pending[r])
        order: list[int] = []
        while ready:
            best, best_net = ready[0], 0
            for r in ready:
                dying = {v for v in self.deps[r] if left[v] == 1}
                freed = sum(self.size[v] for v in dying)
                net = freed - (0 if self.inplace(r, dying) else self.alloc[r])
                if net > 0 and net > best_net:
                    best, best_net = r, net
            ready.remove(best)
            order.append(best)
            for v in self.deps[best]:
                left[v] -= 1
            for u in waiting[best]:
                pending[u].discard(best)
                if not pending[u]:
                    ready.append(u)
            ready.sort()
        return order


def schedule_backward(graph: Graph, forward_end: int | None = None) -> Graph:
    """``graph`` with its backward nodes reordered for memory (the module docstring); the
    forward part unchanged. Returned unchanged when the estimate is higher."""
    end = graph.outputs[0] + 1 if forward_end is None else forward_end
    units = _Units(graph, end)
    order = units.greedy()
    if len(order) != len(units.roots) or order == units.roots:
        return graph
    if units.peak(order) > units.peak(units.roots):
        return graph
    nodes = graph.nodes
    placed: list[int] = list(range(end))
    done = set(placed)

    def emit(i: int) -> None:
        stack = [(i, False)]
        while stack:
            j, expanded = stack.pop()
            if j in done:
                continue
            if expanded:
                done.add(j)
                placed.append(j)
                continue
            stack.append((j, True))
            stack.extend((a, False) for a in reversed(nodes[j].args) if a not in done)

    for r in order:
        emit(r)
    for i in range(end, len(nodes)):  # anything no unit reads (dead nodes): keep them
        emit(i)
    new_index = {old: k for k, old in enumerate(placed)}
    out = tuple(
        Node(nodes[o].op, tuple(new_index[a] for a in nodes[o].args), nodes[o].attrs, nodes[o].type)
        for o in placed
    )
    return Graph(graph.name, graph.params, out, tuple(new_index[o] for o in graph.outputs))


def order_for_memory(graph: Graph) -> Graph:
    """:func:`untangle`, then :func:`schedule_backward`."""
    return schedule_backward(untangle(graph))
