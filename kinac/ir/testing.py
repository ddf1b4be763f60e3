"""Hand-built :class:`~kinac.tir.graph.Graph` values for tests and benchmarks.

The checker produces Graphs from Kina source; until then (and for tests that must not depend on
it) this builder writes them directly, inferring each node's type from the op's rule in the spec
(section 5), so a test reads like the Kina it stands for. The sample models (MLP, spec section
8's attention, a transformer block) live here so tests and ``benches/cpu.py`` share them.
"""

from __future__ import annotations

import math
from typing import Any

from kinac.prims.elementwise import names
from kinac.tir.graph import Graph, Node, TType, make_node

UNARY: tuple[str, ...] = names("float") + names("numeric")
BINARY = names("arith")
COMPARE = names("compare")
REDUCE = ("reduce_sum", "reduce_mean", "reduce_max", "reduce_min")


def broadcast_shapes(*shapes: tuple[int, ...]) -> tuple[int, ...]:
    """Numpy broadcasting from the right; raises ``ValueError`` on a mismatch."""
    rank = max((len(s) for s in shapes), default=0)
    out: list[int] = []
    for i in range(rank):
        dims = {s[len(s) - rank + i] for s in shapes if len(s) - rank + i >= 0} - {1}
        if len(dims) > 1:
            raise ValueError(f"shapes {shapes} do not broadcast")
        out.append(dims.pop() if dims else 1)
    return tuple(out)


class GraphBuilder:
    """Appends nodes in SSA order and returns their indices; ``build`` seals the Graph."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.nodes: list[Node] = []
        self.params: list[tuple[str, TType]] = []

    def _add(self, op: str, args: tuple[int, ...], t: TType, **attrs: Any) -> int:
        self.nodes.append(make_node(op, args, t, **attrs))
        return len(self.nodes) - 1

    def t(self, i: int) -> TType:
        return self.nodes[i].type

    def param(self, name: str, dtype: str, shape: tuple[int, ...], device: str = "cpu") -> int:
        assert len(self.params) == len(self.nodes), "params come first"
        t = TType(dtype, tuple(shape), device)
        self.params.append((name, t))
        return self._add("param", (), t, index=len(self.params) - 1)

    def const(self, value: float | int | bool, dtype: str = "f32") -> int:
        return self._add("const", (), TType(dtype, ()), value=value)

    def unary(self, op: str, a: int) -> int:
        assert op in UNARY, op
        return self._add(op, (a,), self.t(a))

    def cast(self, a: int, dtype: str) -> int:
        return self._add("cast", (a,), TType(dtype, self.t(a).shape))

    def binary(self, op: str, a: int, b: int) -> int:
        ta, tb = self.t(a), self.t(b)
        assert ta.dtype == tb.dtype, (ta, tb)
        shape = broadcast_shapes(ta.shape, tb.shape)
        dtype = "bool" if op in COMPARE else ta.dtype
        assert op in BINARY or op in COMPARE, op
        return self._add(op, (a, b), TType(dtype, shape))

    def where(self, c: int, a: int, b: int) -> int:
        shape = broadcast_shapes(self.t(c).shape, self.t(a).shape, self.t(b).shape)
        return self._add("where", (c, a, b), TType(self.t(a).dtype, shape))

    def reduce(self, op: str, a: int, axis: int, keepdims: bool = False) -> int:
        ta = self.t(a)
        axis %= ta.rank
        shape = list(ta.shape)
        if keepdims:
            shape[axis] = 1
        else:
            del shape[axis]
        return self._add(op, (a,), TType(ta.dtype, tuple(shape)), axis=axis, keepdims=keepdims)

    def matmul(self, a: int, b: int) -> int:
        ta, tb = self.t(a), self.t(b)
        assert ta.rank >= 2 and tb.rank >= 2 and ta.shape[-1] == tb.shape[-2], (ta, tb)
        batch = broadcast_shapes(ta.shape[:-2], tb.shape[:-2])
        return self._add("matmul", (a, b), TType(ta.dtype, batch + (ta.shape[-2], tb.shape[-1])))

    def transpose(self, a: int, perm: tuple[int, ...]) -> int:
        ta = self.t(a)
        return self._add(
            "transpose", (a,), TType(ta.dtype, tuple(ta.shape[p] for p in perm)), perm=tuple(perm)
        )

    def reshape(self, a: int, shape: tuple[int, ...]) -> int:
        ta = self.t(a)
        assert math.prod(shape) == ta.numel, (ta.shape, shape)
        return self._add("reshape", (a,), TType(ta.dtype, tuple(shape)))

    def broadcast_to(self, a: int, shape: tuple[int, ...]) -> int:
        ta = self.t(a)
        assert broadcast_shapes(ta.shape, tuple(shape)) == tuple(shape)
        return self._add("broadcast_to", (a,), TType(ta.dtype, tuple(shape)))

    def concat(self, xs: list[int], axis: int) -> int:
        t0 = self.t(xs[0])
        axis %= t0.rank
        shape = list(t0.shape)
        shape[axis] = sum(self.t(x).shape[axis] for x in xs)
        return self._add("concat", tuple(xs), TType(t0.dtype, tuple(shape)), axis=axis)

    def slice(self, a: int, axis: int, start: int, stop: int) -> int:
        ta = self.t(a)
        axis %= ta.rank
        shape = list(ta.shape)
        shape[axis] = stop - start
        return self._add(
            "slice", (a,), TType(ta.dtype, tuple(shape)), axis=axis, start=start, stop=stop
        )

    def gather(self, table: int, idx: int) -> int:
        tt, ti = self.t(table), self.t(idx)
        return self._add("gather", (table, idx), TType(tt.dtype, ti.shape + (tt.shape[1],)))

    def softmax(self, a: int, axis: int) -> int:
        return self._add("softmax", (a,), self.t(a), axis=axis % self.t(a).rank)

    def repeat_interleave(self, a: int, repeats: int, axis: int) -> int:
        ta = self.t(a)
        axis %= ta.rank
        shape = list(ta.shape)
        shape[axis] *= repeats
        return self._add(
            "repeat_interleave", (a,), TType(ta.dtype, tuple(shape)), axis=axis, repeats=repeats
        )

    def iota(self, dtype: str, shape: tuple[int, ...], axis: int) -> int:
        return self._add("iota", (), TType(dtype, tuple(shape)), axis=axis % len(shape))

    def full(self, dtype: str, shape: tuple[int, ...], value: float | int | bool) -> int:
        return self._add("full", (), TType(dtype, tuple(shape)), value=value)

    def to_device(self, a: int, device: str) -> int:
        ta = self.t(a)
        op = "to_host" if device == "cpu" else "to_device"
        return self._add(op, (a,), TType(ta.dtype, ta.shape, device))

    def build(self, *outputs: int) -> Graph:
        return Graph(self.name, tuple(self.params), tuple(self.nodes), tuple(outputs))


def mlp_graph(b: int = 4, s: int = 128, d: int = 256, f: int = 1024, dtype: str = "f32") -> Graph:
    """Spec section 8's ``mlp``: ``(add (matmul (gelu (add (matmul x w1) b1)) w2) b2)``."""
    g = GraphBuilder("mlp")
    x = g.param("x", dtype, (b, s, d))
    w1 = g.param("w1", dtype, (d, f))
    b1 = g.param("b1", dtype, (f,))
    w2 = g.param("w2", dtype, (f, d))
    b2 = g.param("b2", dtype, (d,))
    h = g.unary("gelu", g.binary("add", g.matmul(x, w1), b1))
    return g.build(g.binary("add", g.matmul(h, w2), b2))


def causal_mask(g: GraphBuilder, s: int, dtype: str = "f32") -> int:
    """The prelude's ``causal-mask``: 0 on and below the diagonal, -inf above."""
    row = g.iota("i32", (s, s), 0)
    col = g.iota("i32", (s, s), 1)
    keep = g.binary("ge", row, col)
    return g.where(keep, g.full(dtype, (s, s), 0.0), g.full(dtype, (s, s), -math.inf))


def attention_body(
    g: GraphBuilder, x: int, wq: int, wk: int, wv: int, wo: int, h: int, kv: int
) -> int:
    """Spec section 8's ``attention`` (GQA: K/V heads repeated ``H / KV`` times)."""
    b, s, d = g.t(x).shape
    dh = d // h
    dt = g.t(x).dtype

    def heads(w: int, n: int) -> int:
        return g.transpose(g.reshape(g.matmul(x, w), (b, s, n, dh)), (0, 2, 1, 3))

    q = heads(wq, h)
    k = g.repeat_interleave(heads(wk, kv), h // kv, 1)
    v = g.repeat_interleave(heads(wv, kv), h // kv, 1)
    scale = g.unary("rsqrt", g.const(float(dh), dt))
    sc = g.binary("mul", g.matmul(q, g.transpose(k, (0, 1, 3, 2))), scale)
    sc = g.binary("add", sc, causal_mask(g, s, dt))
    o = g.matmul(g.softmax(sc, -1), v)
    return g.matmul(g.reshape(g.transpose(o, (0, 2, 1, 3)), (b, s, d)), wo)


def attention_graph(
    b: int = 4, s: int = 128, d: int = 256, h: int = 4, kv: int = 2, dtype: str = "f32"
) -> Graph:
    """Spec section 8's attention entry at concrete dims."""
    g = GraphBuilder("attention")
    dh = d // h
    x = g.param("x", dtype, (b, s, d))
    wq = g.param("wq", dtype, (d, d))
    wk = g.param("wk", dtype, (d, kv * dh))
    wv = g.param("wv", dtype, (d, kv * dh))
    wo = g.param("wo", dtype, (d, d))
    return g.build(attention_body(g, x, wq, wk, wv, wo, h, kv))


def rms_norm(g: GraphBuilder, x: int, w: int) -> int:
    """The prelude's ``rms-norm``: ``x / sqrt(mean(x^2, -1) + 1e-6) * w``."""
    dt = g.t(x).dtype
    ms = g.reduce("reduce_mean", g.unary("square", x), -1, keepdims=True)
    den = g.unary("sqrt", g.binary("add", ms, g.const(1e-6, dt)))
    return g.binary("mul", g.binary("div", x, den), w)


def block_graph(
    b: int = 4,
    s: int = 128,
    d: int = 256,
    h: int = 4,
    kv: int = 2,
    f: int = 704,
    dtype: str = "f32",
) -> Graph:
    """A pre-norm transformer block: RMSNorm, GQA causal attention, SwiGLU FFN, residuals."""
    g = GraphBuilder("block")
    dh = d // h
    x = g.param("x", dtype, (b, s, d))
    wn1 = g.param("wn1", dtype, (d,))
    wq = g.param("wq", dtype, (d, d))
    wk = g.param("wk", dtype, (d, kv * dh))
    wv = g.param("wv", dtype, (d, kv * dh))
    wo = g.param("wo", dtype, (d, d))
    wn2 = g.param("wn2", dtype, (d,))
    wg = g.param("wg", dtype, (d, f))
    wu = g.param("wu", dtype, (d, f))
    wd = g.param("wd", dtype, (f, d))
    hid = g.binary("add", x, attention_body(g, rms_norm(g, x, wn1), wq, wk, wv, wo, h, kv))
    n2 = rms_norm(g, hid, wn2)
    ff = g.binary("mul", g.unary("silu", g.matmul(n2, wg)), g.matmul(n2, wu))
    return g.build(g.binary("add", hid, g.matmul(ff, wd)))
