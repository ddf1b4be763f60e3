"""Appending nodes to a concrete Graph while differentiating it.

Why: every VJP rule (``kinac.check.vjp_rules``) emits graph nodes through one small interface,
:class:`GraphBuilder`: it types each new node (numpy broadcasting, the op's dtype), reuses an
identical existing node instead of emitting a copy (so a derivative's ``exp(x)`` *is* the
forward pass's ``exp(x)``: the derived elementwise VJPs recompute their primal values), and
reduces a broadcast cotangent back to its operand's shape (:meth:`GraphBuilder.sum_to`).
:class:`GraphAlgebra` is the scalar :class:`~kinac.prims.scalar.Algebra` over graph nodes, so
the elementwise VJP formulas of :mod:`kinac.prims` become graph nodes unchanged.
"""

from __future__ import annotations

from typing import Any

from kinac.dtypes import FLOAT_DTYPES
from kinac.tir.graph import Graph, Node, TType, make_node


def broadcast_shapes(*shapes: tuple[int, ...]) -> tuple[int, ...]:
    """numpy broadcasting from the right (the Graph's elementwise rule)."""
    rank = max((len(s) for s in shapes), default=0)
    out = []
    for ax in range(rank):
        ds = {s[ax - rank + len(s)] for s in shapes if ax - rank + len(s) >= 0} - {1}
        assert len(ds) <= 1, ("shapes do not broadcast", shapes)
        out.append(ds.pop() if ds else 1)
    return tuple(out)


class GraphBuilder:
    """The forward graph's nodes plus the ones a differentiation appends (hash-consed)."""

    def __init__(self, graph: Graph) -> None:
        self.graph = graph
        self.nodes: list[Node] = list(graph.nodes)
        self._seen: dict[Node, int] = {}
        for i, n in enumerate(self.nodes):
            if n.op != "param":
                self._seen.setdefault(n, i)

    def type(self, i: int) -> TType:
        return self.nodes[i].type

    def emit(self, op: str, args: tuple[int, ...], ttype: TType, **attrs: Any) -> int:
        """Append a node (or return the identical one already there)."""
        n = make_node(op, args, ttype, **attrs)
        hit = self._seen.get(n)
        if hit is not None:
            return hit
        self.nodes.append(n)
        self._seen[n] = len(self.nodes) - 1
        return len(self.nodes) - 1

    def const(self, value: float | int | bool, like: int) -> int:
        """A scalar constant of ``like``'s dtype and device (elementwise ops broadcast it)."""
        t = self.type(like)
        v: float | int | bool
        if t.dtype in FLOAT_DTYPES:
            v = float(value)
        elif t.dtype == "bool":
            v = bool(value)
        else:
            v = int(value)
        return self.emit("const", (), TType(t.dtype, (), t.device), value=v)

    def full(self, value: float, ttype: TType) -> int:
        return self.emit("full", (), ttype, value=float(value))

    def elementwise(self, op: str, *args: int, dtype: str | None = None) -> int:
        ts = [self.type(a) for a in args]
        shape = broadcast_shapes(*(t.shape for t in ts))
        return self.emit(op, tuple(args), TType(dtype or ts[-1].dtype, shape, ts[0].device))

    def add(self, a: int, b: int) -> int:
        return self.elementwise("add", a, b)

    def mul(self, a: int, b: int) -> int:
        return self.elementwise("mul", a, b)

    def reshape(self, a: int, shape: tuple[int, ...]) -> int:
        t = self.type(a)
        if t.shape == tuple(shape):
            return a
        return self.emit("reshape", (a,), TType(t.dtype, tuple(shape), t.device))

    def broadcast_to(self, a: int, shape: tuple[int, ...]) -> int:
        t = self.type(a)
        if t.shape == tuple(shape):
            return a
        return self.emit("broadcast_to", (a,), TType(t.dtype, tuple(shape), t.device))

    def transpose(self, a: int, perm: tuple[int, ...]) -> int:
        t = self.type(a)
        if tuple(perm) == tuple(range(t.rank)):
            return a
        shape = tuple(t.shape[p] for p in perm)
        return self.emit("transpose", (a,), TType(t.dtype, shape, t.device), perm=tuple(perm))

    def reduce_sum(self, a: int, axis: int, keepdims: bool) -> int:
        t = self.type(a)
        shape = list(t.shape)
        if keepdims:
            shape[axis] = 1
        else:
            del shape[axis]
        return self.emit(
            "reduce_sum",
            (a,),
            TType(t.dtype, tuple(shape), t.device),
            axis=axis,
            keepdims=keepdims,
        )

    def sum_to(self, a: int, shape: tuple[int, ...]) -> int:
        """Reduce ``a`` (a cotangent at a broadcast shape) to ``shape``: broadcasting's VJP."""
        t = self.type(a)
        if t.shape == tuple(shape):
            return a
        if t.rank < len(shape) or any(
            d == 1 and w != 1 for d, w in zip(t.shape[t.rank - len(shape) :], shape, strict=True)
        ):  # smaller than its operand somewhere (a scalar cotangent): broadcast it out first
            a = self.broadcast_to(a, broadcast_shapes(t.shape, shape))
            t = self.type(a)
        for _ in range(t.rank - len(shape)):
            a = self.reduce_sum(a, 0, False)
        for ax, want in enumerate(shape):
            if want == 1 and self.type(a).shape[ax] != 1:
                a = self.reduce_sum(a, ax, True)
        return a

    def algebra(self) -> GraphAlgebra:
        return GraphAlgebra(self)


class GraphAlgebra:
    """The base scalar operations as graph nodes (values are node indices)."""

    def __init__(self, b: GraphBuilder) -> None:
        self.b = b

    def const(self, value: float | int | bool, like: int) -> int:
        return self.b.const(value, like)

    def add(self, a: int, b: int) -> int:
        return self.b.elementwise("add", a, b)

    def sub(self, a: int, b: int) -> int:
        return self.b.elementwise("sub", a, b)

    def mul(self, a: int, b: int) -> int:
        return self.b.elementwise("mul", a, b)

    def div(self, a: int, b: int) -> int:
        return self.b.elementwise("div", a, b)

    def approx_div(self, a: int, b: int) -> int:
        return self.div(a, b)

    def fma(self, a: int, b: int, c: int) -> int:
        return self.add(self.mul(a, b), c)

    def _un(self, op: str, a: int) -> int:
        return self.b.elementwise(op, a)

    def neg(self, a: int) -> int:
        return self._un("neg", a)

    def abs(self, a: int) -> int:
        return self._un("abs", a)

    def floor(self, a: int) -> int:
        raise NotImplementedError("floor is not a graph op (only kernel_f32 formulas use it)")

    def sqrt(self, a: int) -> int:
        return self._un("sqrt", a)

    def exp(self, a: int) -> int:
        return self._un("exp", a)

    def log(self, a: int) -> int:
        return self._un("log", a)

    def tanh(self, a: int) -> int:
        return self._un("tanh", a)

    def erf(self, a: int) -> int:
        return self._un("erf", a)

    def pow(self, a: int, b: int) -> int:
        return self.b.elementwise("pow", a, b)

    def maximum(self, a: int, b: int) -> int:
        return self.b.elementwise("max", a, b)

    def minimum(self, a: int, b: int) -> int:
        return self.b.elementwise("min", a, b)

    def compare(self, pred: str, a: int, b: int) -> int:
        if pred == "ne":
            e = self.b.elementwise("eq", a, b, dtype="bool")
            return self.select(e, self.b.const(False, e), self.b.const(True, e))
        return self.b.elementwise(pred, a, b, dtype="bool")

    def select(self, c: int, a: int, b: int) -> int:
        dt = self.b.type(a).dtype
        return self.b.elementwise("where", c, a, b, dtype=dt)

    def libm(self, name: str, a: int) -> int:
        return self._un(name, a)  # log1p, sin, cos: graph ops of the same name
