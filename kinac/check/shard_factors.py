"""Factor rules: each primitive described as factors, Shardy style (``addFactor``).

Why here, in the checker's registry: a primitive's sharding behaviour is part of its one
definition (docs/architecture.md, "Adding a primitive"): every :class:`Prim` names its rule in
its ``shard_rule`` slot, and :mod:`kinac.shard` reads only these tables, never op names.

A factor is an iteration dimension of the op. Every operand and result dim maps to a list
of factors (major first; ``()`` for a broadcast size-1 dim); a dim split by a reshape maps to
several. A factor absent from the result is a *reduction* factor: sharding it leaves the
result ``@partial(sum)`` (matmul's contraction, ``reduce_sum``'s axis). A factor in
``need_replication`` may not be sharded (softmax's axis, a slice's or concat's axis, a
gather's table rows, max/min reductions): an operand sharded along it is all-gathered.
A rule is ``(node, operand shapes) -> OpFactors``, called on the concrete graph.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from kinac.tir.graph import Node

Dims = tuple[tuple[int, ...], ...]


@dataclass(frozen=True)
class OpFactors:
    """The factor table of one op instance (sizes, operand/result dim maps)."""

    sizes: tuple[int, ...]
    operands: tuple[Dims, ...]
    result: Dims
    need_replication: frozenset[int] = field(default_factory=frozenset)

    @property
    def reduction(self) -> frozenset[int]:
        """Factors of some operand that the result does not have."""
        in_result = {f for fs in self.result for f in fs}
        return frozenset(f for op in self.operands for fs in op for f in fs) - in_result


class _Builder:
    """Accumulates factor sizes (``add``) for one rule."""

    def __init__(self) -> None:
        self.sizes: list[int] = []

    def add(self, size: int) -> int:
        self.sizes.append(size)
        return len(self.sizes) - 1


def _aligned(shapes: Sequence[tuple[int, ...]], out: tuple[int, ...]) -> OpFactors:
    """Pointwise with numpy broadcasting from the right: one factor per result dim."""
    b = _Builder()
    fs = [b.add(d) for d in out]
    ops = []
    for s in shapes:
        off = len(out) - len(s)
        ops.append(
            tuple(() if d == 1 and out[off + i] != 1 else (fs[off + i],) for i, d in enumerate(s))
        )
    return OpFactors(tuple(b.sizes), tuple(ops), tuple((f,) for f in fs))


def _pointwise(node: Node, ins: Sequence[tuple[int, ...]]) -> OpFactors:
    return _aligned(ins, node.type.shape)


def _reduce(node: Node, ins: Sequence[tuple[int, ...]], replicate: bool) -> OpFactors:
    b = _Builder()
    s, axis = ins[0], int(node.attr("axis"))
    fs = [b.add(d) for d in s]
    keep = bool(node.attr("keepdims", False))
    res: Dims = tuple(() if i == axis else (f,) for i, f in enumerate(fs) if i != axis or keep)
    need = frozenset({fs[axis]}) if replicate else frozenset()
    return OpFactors(tuple(b.sizes), (tuple((f,) for f in fs),), res, need)


def _on_axis_replicated(node: Node, ins: Sequence[tuple[int, ...]]) -> OpFactors:
    """Pointwise except along ``axis``, which must be whole (softmax, slice, concat)."""
    of = _aligned(ins, node.type.shape)
    axis = int(node.attr("axis"))
    b = _Builder()
    b.sizes = list(of.sizes)
    ops = list(of.operands)
    cut = set()
    for k, s in enumerate(ins):  # the axis of each operand is its own factor (sizes differ)
        f = b.add(s[axis])
        cut.add(f)
        ops[k] = tuple((f,) if i == axis else d for i, d in enumerate(ops[k]))
    cut.add(of.result[axis][0])
    return OpFactors(tuple(b.sizes), tuple(ops), of.result, frozenset(cut))


def _matmul(node: Node, ins: Sequence[tuple[int, ...]]) -> OpFactors:
    a, c = ins
    out = node.type.shape
    b = _Builder()
    batch = [b.add(d) for d in out[:-2]]
    m, n, k = b.add(a[-2]), b.add(c[-1]), b.add(a[-1])

    def bat(s: tuple[int, ...]) -> Dims:
        off = len(batch) - (len(s) - 2)
        return tuple(
            () if d == 1 and out[off + i] != 1 else (batch[off + i],) for i, d in enumerate(s[:-2])
        )

    return OpFactors(
        tuple(b.sizes),
        (bat(a) + ((m,), (k,)), bat(c) + ((k,), (n,))),
        tuple((f,) for f in batch) + ((m,), (n,)),
    )


def _transpose(node: Node, ins: Sequence[tuple[int, ...]]) -> OpFactors:
    b = _Builder()
    fs = [b.add(d) for d in ins[0]]
    perm = node.attr("perm")
    return OpFactors(tuple(b.sizes), (tuple((f,) for f in fs),), tuple((fs[p],) for p in perm))


def reshape_factors(
    src: tuple[int, ...], dst: tuple[int, ...]
) -> tuple[list[int], Dims, Dims] | None:
    """Split/merge factors mapping ``src`` dims to ``dst`` dims (major first), or None when
    the two shapes share no common refinement by exact division (e.g. ``[6 4] -> [4 6]``)."""
    sizes: list[int] = []
    a: list[list[int]] = [[] for _ in src]
    c: list[list[int]] = [[] for _ in dst]
    i = j = 0
    ra = src[0] if src else 1
    rb = dst[0] if dst else 1
    while i < len(src) and j < len(dst):
        if ra == 1:
            i += 1
            ra = src[i] if i < len(src) else 1
            continue
        if rb == 1:
            j += 1
            rb = dst[j] if j < len(dst) else 1
            continue
        if ra % rb and rb % ra:
            return None
        f = min(ra, rb)
        sizes.append(f)
        a[i].append(len(sizes) - 1)
        c[j].append(len(sizes) - 1)
        ra //= f
        rb //= f
    return sizes, tuple(tuple(x) for x in a), tuple(tuple(x) for x in c)


def _reshape(node: Node, ins: Sequence[tuple[int, ...]]) -> OpFactors:
    got = reshape_factors(ins[0], node.type.shape)
    if got is None:
        return _opaque(node, ins)
    sizes, a, c = got
    return OpFactors(tuple(sizes), (a,), c)


def _repeat_interleave(node: Node, ins: Sequence[tuple[int, ...]]) -> OpFactors:
    """``axis`` of size n becomes n*r with index ``i*r + j``: the input's factor is the
    result dim's major factor, the repeat a minor one (so a sharded axis stays sharded)."""
    b = _Builder()
    axis, reps = int(node.attr("axis")), int(node.attr("repeats"))
    fs = [b.add(d) for d in ins[0]]
    rep = b.add(reps)
    res = tuple((f, rep) if i == axis else (f,) for i, f in enumerate(fs))
    return OpFactors(tuple(b.sizes), (tuple((f,) for f in fs),), res)


def _gather(node: Node, ins: Sequence[tuple[int, ...]]) -> OpFactors:
    table, idx = ins
    b = _Builder()
    rows, width = b.add(table[0]), b.add(table[1])
    batch = [b.add(d) for d in idx]
    res = tuple((f,) for f in batch) + ((width,),)
    return OpFactors(
        tuple(b.sizes), (((rows,), (width,)), tuple((f,) for f in batch)), res, frozenset({rows})
    )


def _opaque(node: Node, ins: Sequence[tuple[int, ...]]) -> OpFactors:
    """No rule: every dim its own factor, all replicated (correct, never fast)."""
    b = _Builder()
    ops = tuple(tuple((b.add(d),) for d in s) for s in ins)
    res = tuple((b.add(d),) for d in node.type.shape)
    return OpFactors(tuple(b.sizes), ops, res, frozenset(range(len(b.sizes))))


FactorRule = Callable[[Node, Sequence[tuple[int, ...]]], OpFactors]

pointwise: FactorRule = _pointwise
"""Elementwise primitives (every definition of :mod:`kinac.prims.defs` whose
``shard_factors`` slot is empty), ``cast``, ``where``, placement and creation."""
matmul: FactorRule = _matmul
transpose: FactorRule = _transpose
reshape: FactorRule = _reshape
repeat_interleave: FactorRule = _repeat_interleave
gather: FactorRule = _gather
whole_axis: FactorRule = _on_axis_replicated
"""softmax, slice, concat: pointwise except along ``axis``."""
opaque: FactorRule = _opaque


def reduction(op: str) -> FactorRule:
    """``sum``/``mean`` make the reduced factor a reduction factor (``@partial(sum)``);
    ``max``/``min`` need it whole (there is no ``@partial(max)`` in the spec)."""
    replicate = op in ("max", "min")
    return lambda node, shapes: _reduce(node, shapes, replicate)
