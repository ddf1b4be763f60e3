"""VJP rules: each primitive's reverse-mode derivative, as nodes of the concrete Graph.

Why here, in the checker's registry: a primitive's derivative is part of its one definition
(docs/architecture.md, "Adding a primitive"), as its typing and sharding rules are. Every
:class:`~kinac.check.prims.base.Prim` names its rule in its ``vjp_rule`` slot; the reverse-mode
transform (:mod:`kinac.grad`) reads only that slot, never op names.

A rule is ``rule(b, node, out, g) -> cotangents``: ``b`` a :class:`VjpBuilder` (emits typed,
hash-consed nodes), ``node`` the forward node (its ``args`` are node indices), ``out`` its
index, ``g`` the index of its cotangent (the node's type). It returns one node index per
argument, or ``None`` where no cotangent flows (an index, a condition, an integer operand). A
cotangent may come back at a broadcast shape: the walk reduces it to the operand's shape
(:meth:`VjpBuilder.sum_to`, broadcasting's VJP). Elementwise primitives differentiate through
their formula (:func:`from_formula`, :mod:`kinac.prims.dual`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from kinac.dtypes import FLOAT_DTYPES
from kinac.prims.scalar import Algebra, S
from kinac.tir.graph import Node, TType

Cotangents = tuple[int | None, ...]


class VjpBuilder(Protocol):
    """What a rule may do (implemented by :class:`kinac.grad.builder.GraphBuilder`)."""

    def type(self, i: int) -> TType: ...
    def emit(self, op: str, args: tuple[int, ...], ttype: TType, **attrs: Any) -> int: ...
    def const(self, value: float | int | bool, like: int) -> int: ...
    def full(self, value: float, ttype: TType) -> int: ...
    def elementwise(self, op: str, *args: int, dtype: str | None = None) -> int: ...
    def add(self, a: int, b: int) -> int: ...
    def mul(self, a: int, b: int) -> int: ...
    def reshape(self, a: int, shape: tuple[int, ...]) -> int: ...
    def broadcast_to(self, a: int, shape: tuple[int, ...]) -> int: ...
    def transpose(self, a: int, perm: tuple[int, ...]) -> int: ...
    def reduce_sum(self, a: int, axis: int, keepdims: bool) -> int: ...
    def sum_to(self, a: int, shape: tuple[int, ...]) -> int: ...
    def algebra(self) -> Algebra: ...


Rule = Callable[[VjpBuilder, Node, int, int], Cotangents]


def nondifferentiable(b: VjpBuilder, node: Node, out: int, g: int) -> Cotangents:
    """No derivative (creation, comparisons): no cotangent reaches any argument."""
    return (None,) * len(node.args)


nondifferentiable.nondifferentiable = True  # type: ignore[attr-defined]


def from_formula(d: Any) -> Rule:
    """The rule of an elementwise definition: its ``vjp`` formula (derived from its formula by
    dual numbers unless the definition gives one) evaluated over graph nodes."""
    if getattr(d.vjp, "nondifferentiable", False):
        return nondifferentiable

    def rule(b: VjpBuilder, node: Node, out: int, g: int) -> Cotangents:
        alg = b.algebra()
        xs = [S(alg, a) for a in node.args]
        cots = d.vjp(*xs, S(alg, out), S(alg, g))
        return tuple(None if c is None else c.v for c in cots)

    rule.__doc__ = f"The VJP of `{d.name}`, from its definition."
    return rule


def identity(b: VjpBuilder, node: Node, out: int, g: int) -> Cotangents:
    """Placement-only ops (``reshard``, collectives written by hand): the cotangent passes
    through the *reverse* reshard, a ``reshard`` marked ``cotangent`` carrying the forward's
    ``site``, which sharding pins to the layout of the forward's operand (the transpose of an
    all-gather is a reduce-scatter or a slice; kinac/shard/grad.py). The identity on one
    device, as every reshard is."""
    site = node.attr("site", ("", "", 0))
    return (b.emit("reshard", (g,), b.type(g), kind="reshard", layout=(), site=site, cotangent=1),)


def cast(b: VjpBuilder, node: Node, out: int, g: int) -> Cotangents:
    """Back to the source dtype; an integer or bool source gets nothing."""
    src = b.type(node.args[0])
    if src.dtype not in FLOAT_DTYPES:
        return (None,)
    t = b.type(g)
    return (b.emit("cast", (g,), TType(src.dtype, t.shape, t.device)),)


def where(b: VjpBuilder, node: Node, out: int, g: int) -> Cotangents:
    """Each branch gets the cotangent where it was chosen, zero elsewhere."""
    c = node.args[0]
    zero = b.const(0, g)
    dt = b.type(g).dtype
    return (
        None,
        b.elementwise("where", c, g, zero, dtype=dt),
        b.elementwise("where", c, zero, g, dtype=dt),
    )


def _kept(b: VjpBuilder, node: Node, g: int) -> int:
    """The cotangent of a reduction with its axis kept (size 1)."""
    if node.attr("keepdims"):
        return g
    x = b.type(node.args[0])
    shape = list(x.shape)
    shape[node.attr("axis")] = 1
    return b.reshape(g, tuple(shape))


def reduce_sum(b: VjpBuilder, node: Node, out: int, g: int) -> Cotangents:
    """Sum's VJP is a broadcast back over the reduced axis."""
    return (b.broadcast_to(_kept(b, node, g), b.type(node.args[0]).shape),)


def reduce_mean(b: VjpBuilder, node: Node, out: int, g: int) -> Cotangents:
    x = b.type(node.args[0])
    n = x.shape[node.attr("axis")]
    gk = b.mul(_kept(b, node, g), b.const(1.0 / n, g))
    return (b.broadcast_to(gk, x.shape),)


def reduce_extremum(b: VjpBuilder, node: Node, out: int, g: int) -> Cotangents:
    """Max/min: the cotangent shared evenly among the elements equal to the result (torch's
    ``amax``/``amin``); a NaN result (the reduction propagates NaN) is shared among the NaN
    elements, as torch's ``Tensor.max()``: ``eq`` alone matched none and the ``0 * inf`` of
    the share made the whole slice's gradient NaN (docs/language.md, "Gradients")."""
    x = node.args[0]
    xt = b.type(x)
    if xt.dtype not in FLOAT_DTYPES:
        return (None,)
    yk = _kept(b, node, out)
    ft = TType(xt.dtype, xt.shape, xt.device)
    hit = b.emit("cast", (b.elementwise("eq", x, yk, dtype="bool"),), ft)
    x_num = b.emit("cast", (b.elementwise("eq", x, x, dtype="bool"),), ft)  # 0 on NaN
    x_nan = b.elementwise("sub", b.const(1.0, x_num), x_num)
    mask = b.elementwise("where", b.elementwise("eq", yk, yk, dtype="bool"), hit, x_nan)
    count = b.reduce_sum(mask, node.attr("axis"), True)
    share = b.elementwise("div", _kept(b, node, g), count)
    return (b.mul(mask, share),)


def _swap_last(b: VjpBuilder, a: int) -> int:
    r = b.type(a).rank
    return b.transpose(a, (*range(r - 2), r - 1, r - 2))


def matmul(b: VjpBuilder, node: Node, out: int, g: int) -> Cotangents:
    """``ga = g b^T``, ``gb = a^T g``, batch dims reduced back (the walk's ``sum_to``); a rank-2
    right operand under a batched left one gets one flat matmul instead of a batch and a sum."""
    x, w = node.args
    xt, wt, gt = b.type(x), b.type(w), b.type(g)
    if xt.dtype not in FLOAT_DTYPES:
        return (None, None)
    gx = b.emit(
        "matmul",
        (g, _swap_last(b, w)),
        TType(gt.dtype, broadcast_batch(gt.shape, wt.shape, gt.shape[-2], wt.shape[-2]), gt.device),
    )
    if wt.rank == 2 and xt.rank > 2:
        m = 1
        for d in xt.shape[:-1]:
            m *= d
        x2 = b.reshape(x, (m, xt.shape[-1]))
        g2 = b.reshape(g, (m, gt.shape[-1]))
        gw = b.emit("matmul", (_swap_last(b, x2), g2), TType(gt.dtype, wt.shape, gt.device))
    else:
        gw = b.emit(
            "matmul",
            (_swap_last(b, x), g),
            TType(
                gt.dtype, broadcast_batch(xt.shape, gt.shape, xt.shape[-1], gt.shape[-1]), gt.device
            ),
        )
    return (gx, gw)


def broadcast_batch(a: tuple[int, ...], b: tuple[int, ...], m: int, n: int) -> tuple[int, ...]:
    """The shape of ``matmul`` of ``a`` and ``b``: broadcast batch dims, then ``[m, n]``."""
    from itertools import zip_longest

    batch = []
    for x, y in zip_longest(reversed(a[:-2]), reversed(b[:-2]), fillvalue=1):
        batch.append(x if y == 1 else y)
    return (*reversed(batch), m, n)


def transpose(b: VjpBuilder, node: Node, out: int, g: int) -> Cotangents:
    """A view's VJP is the inverse view."""
    perm = node.attr("perm")
    inv = [0] * len(perm)
    for i, p in enumerate(perm):
        inv[p] = i
    return (b.transpose(g, tuple(inv)),)


def reshape(b: VjpBuilder, node: Node, out: int, g: int) -> Cotangents:
    return (b.reshape(g, b.type(node.args[0]).shape),)


def broadcast_to(b: VjpBuilder, node: Node, out: int, g: int) -> Cotangents:
    """Broadcasting's VJP is a sum back to the operand's shape."""
    return (b.sum_to(g, b.type(node.args[0]).shape),)


def _slice(b: VjpBuilder, a: int, axis: int, start: int, stop: int) -> int:
    t = b.type(a)
    shape = list(t.shape)
    shape[axis] = stop - start
    return b.emit(
        "slice", (a,), TType(t.dtype, tuple(shape), t.device), axis=axis, start=start, stop=stop
    )


def concat(b: VjpBuilder, node: Node, out: int, g: int) -> Cotangents:
    """Each operand gets its slice of the cotangent."""
    axis = node.attr("axis")
    outs: list[int | None] = []
    at = 0
    for a in node.args:
        n = b.type(a).shape[axis]
        outs.append(_slice(b, g, axis, at, at + n) if b.type(a).dtype in FLOAT_DTYPES else None)
        at += n
    return tuple(outs)


def slice_(b: VjpBuilder, node: Node, out: int, g: int) -> Cotangents:
    """The cotangent padded with zeros back to the operand's extent (a concat)."""
    axis, start, stop = node.attr("axis"), node.attr("start"), node.attr("stop")
    xt, gt = b.type(node.args[0]), b.type(g)
    parts = []
    for lo, hi in ((0, start), (stop, xt.shape[axis])):
        if hi > lo:
            shape = list(gt.shape)
            shape[axis] = hi - lo
            parts.append(b.full(0.0, TType(gt.dtype, tuple(shape), gt.device)))
    if not parts:
        return (g,)
    parts.insert(1 if start > 0 else 0, g)
    return (b.emit("concat", tuple(parts), xt, axis=axis),)


def gather(b: VjpBuilder, node: Node, out: int, g: int) -> Cotangents:
    """Gather's VJP is a scatter-add of the cotangent rows into a zero table (``scatter_add``:
    deterministic, rows accumulated in index order)."""
    table, idx = node.args
    return (b.emit("scatter_add", (idx, g), b.type(table)), None)


def softmax(b: VjpBuilder, node: Node, out: int, g: int) -> Cotangents:
    """``y (g - sum(g y))`` over the axis."""
    axis = node.attr("axis")
    s = b.reduce_sum(b.mul(g, out), axis, True)
    return (b.mul(out, b.elementwise("sub", g, s)),)


def repeat_interleave(b: VjpBuilder, node: Node, out: int, g: int) -> Cotangents:
    """A grouped sum: the cotangent split as ``[.., n, r, ..]`` and summed over ``r``."""
    axis, r = node.attr("axis"), node.attr("repeats")
    xt = b.type(node.args[0])
    if xt.dtype not in FLOAT_DTYPES:
        return (None,)
    split = (*xt.shape[: axis + 1], r, *xt.shape[axis + 1 :])
    return (b.reduce_sum(b.reshape(g, split), axis + 1, False),)


def placement(b: VjpBuilder, node: Node, out: int, g: int) -> Cotangents:
    """``to-device``/``to-host``: the cotangent copied back to where the operand lives."""
    src = b.type(node.args[0])
    t = b.type(g)
    back = TType(t.dtype, t.shape, src.device)
    if src.device == t.device:
        return (g,)
    if src.device == "cpu":
        return (b.emit("to_host", (g,), back),)
    return (b.emit("to_device", (g,), back),)
