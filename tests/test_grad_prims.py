"""Every differentiable primitive's VJP: against central finite differences in f64 and against
``torch.autograd`` in f32, on random data.

Each case is a small Graph ``y = op(params...)``, sealed as the scalar loss ``sum(y * r)`` with
a random cotangent ``r`` (tests/grad_support.py), differentiated by :func:`kinac.grad.
value_and_grad` and evaluated by the numpy interpreter. Broadcasting, batched and broadcast
matmul, views, gather (scatter-add), softmax, repeat-interleave, reductions, select and casts
are all cases; the compiled host code of the structural ones is checked in one graph at the end.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import pytest
from grad_support import central_differences, torch_eval, with_loss
from hypothesis import given, settings
from hypothesis import strategies as st

from kinac.grad import value_and_grad
from kinac.ir.testing import BINARY, UNARY, GraphBuilder
from kinac.prims import ELEMENTWISE
from kinac.tir.graph import Graph
from kinac.tir.interp import evaluate

Build = Callable[[GraphBuilder, str], int]


@dataclass
class Case:
    """``build(g, dtype)`` adds params and returns the output node; ``domain`` is where float
    inputs are drawn; ``ints`` bounds integer params (exclusive)."""

    build: Build
    wrt: tuple[str, ...]
    domain: tuple[float, float] = (-2.0, 2.0)
    ints: dict[str, int] = field(default_factory=dict)


POSITIVE = {"log", "sqrt", "rsqrt", "recip", "log1p", "pow"}
CASES: dict[str, Case] = {}


def _unary(op: str) -> Build:
    def build(g: GraphBuilder, dt: str) -> int:
        return g.unary(op, g.param("x", dt, (3, 4)))

    return build


for _op in UNARY:
    CASES[f"unary-{_op}"] = Case(_unary(_op), ("x",), (0.3, 2.0) if _op in POSITIVE else (-2, 2))


def _binary(op: str, sa: tuple[int, ...], sb: tuple[int, ...]) -> Build:
    def build(g: GraphBuilder, dt: str) -> int:
        return g.binary(op, g.param("a", dt, sa), g.param("b", dt, sb))

    return build


for _op in BINARY:
    dom = (0.3, 2.0) if _op in POSITIVE or _op == "div" else (-2.0, 2.0)
    CASES[f"binary-{_op}"] = Case(_binary(_op, (3, 4), (3, 4)), ("a", "b"), dom)
    # broadcasting: the VJP of the smaller operand is a reduction back to its shape
    CASES[f"broadcast-{_op}"] = Case(_binary(_op, (2, 3, 4), (3, 1)), ("a", "b"), dom)


def _case(wrt: tuple[str, ...], **kw: object) -> Callable[[Build], Build]:
    def deco(f: Build) -> Build:
        CASES[f.__name__.removeprefix("c_").replace("_", "-")] = Case(f, wrt, **kw)  # type: ignore[arg-type]
        return f

    return deco


@_case(("a", "b"))
def c_where(g: GraphBuilder, dt: str) -> int:
    p, a, b = g.param("c", dt, (3, 1)), g.param("a", dt, (2, 3, 4)), g.param("b", dt, (4,))
    return g.where(g.binary("gt", p, g.const(0.0, dt)), a, b)


@_case(("x",))
def c_cast_roundtrip(g: GraphBuilder, dt: str) -> int:
    # f32 -> f64 -> f32 (f64 through itself: finite differences through f32 are noise)
    other = "f64"
    x = g.param("x", dt, (3, 4))
    return g.cast(g.unary("exp", g.cast(x, other)), dt)


@_case(("x",))
def c_cast_to_int_stops(g: GraphBuilder, dt: str) -> int:
    x = g.param("x", dt, (3, 4))
    return g.binary("add", g.cast(g.cast(x, "i32"), dt), g.unary("sin", x))


for _red in ("reduce_sum", "reduce_mean", "reduce_max", "reduce_min"):
    for _keep in (False, True):

        def _r(g: GraphBuilder, dt: str, red: str = _red, keep: bool = _keep) -> int:
            return g.reduce(red, g.param("x", dt, (2, 3, 4)), 1, keep)

        CASES[f"{_red}-keep{int(_keep)}"] = Case(_r, ("x",))


def _mm(sa: tuple[int, ...], sb: tuple[int, ...]) -> Build:
    def build(g: GraphBuilder, dt: str) -> int:
        return g.matmul(g.param("a", dt, sa), g.param("b", dt, sb))

    return build


CASES["matmul-2d"] = Case(_mm((3, 4), (4, 5)), ("a", "b"))
CASES["matmul-batched"] = Case(_mm((2, 3, 4), (2, 4, 5)), ("a", "b"))
CASES["matmul-batch-rank2-right"] = Case(_mm((2, 3, 3, 4), (4, 5)), ("a", "b"))
CASES["matmul-batch-rank2-left"] = Case(_mm((3, 4), (2, 4, 5)), ("a", "b"))
CASES["matmul-batch-broadcast"] = Case(_mm((2, 1, 3, 4), (3, 4, 5)), ("a", "b"))


@_case(("x",))
def c_transpose(g: GraphBuilder, dt: str) -> int:
    return g.transpose(g.param("x", dt, (2, 3, 4)), (2, 0, 1))


@_case(("x",))
def c_reshape(g: GraphBuilder, dt: str) -> int:
    return g.reshape(g.param("x", dt, (2, 3, 4)), (6, 2, 2))


@_case(("x",))
def c_broadcast_to(g: GraphBuilder, dt: str) -> int:
    return g.broadcast_to(g.param("x", dt, (3, 1)), (2, 3, 4))


@_case(("a", "b", "c"))
def c_concat(g: GraphBuilder, dt: str) -> int:
    a, b, c = (g.param(n, dt, (2, k, 3)) for n, k in (("a", 1), ("b", 2), ("c", 3)))
    return g.concat([a, b, c], 1)


@_case(("x",))
def c_slice_middle(g: GraphBuilder, dt: str) -> int:
    return g.slice(g.param("x", dt, (3, 6)), 1, 2, 5)


@_case(("x",))
def c_slice_ends(g: GraphBuilder, dt: str) -> int:
    x = g.param("x", dt, (3, 6))
    return g.binary("mul", g.slice(x, 1, 0, 3), g.slice(x, 1, 3, 6))


@_case(("table",), ints={"idx": 5})
def c_gather(g: GraphBuilder, dt: str) -> int:
    # repeated indices accumulate: the VJP is a scatter-add, not a scatter
    return g.gather(g.param("table", dt, (5, 3)), g.param("idx", "i32", (2, 4)))


@_case(("x",))
def c_softmax(g: GraphBuilder, dt: str) -> int:
    return g.softmax(g.param("x", dt, (2, 3, 4)), 1)


@_case(("x",))
def c_repeat_interleave(g: GraphBuilder, dt: str) -> int:
    return g.repeat_interleave(g.param("x", dt, (2, 3, 4)), 3, 1)


@_case(("x",))
def c_views_chain(g: GraphBuilder, dt: str) -> int:
    x = g.param("x", dt, (2, 3, 4))
    h = g.transpose(g.reshape(x, (2, 3, 2, 2)), (0, 2, 1, 3))
    return g.unary("tanh", g.reshape(h, (4, 6)))


@_case(("x",))
def c_placement(g: GraphBuilder, dt: str) -> int:
    x = g.param("x", dt, (3, 4))
    return g.to_device(g.unary("exp", g.to_device(x, "cuda:0")), "cpu")


@_case(("x", "unused"))
def c_unused_parameter(g: GraphBuilder, dt: str) -> int:
    g.param("unused", dt, (2,))
    return g.unary("exp", g.param("x", dt, (3,)))


def inputs(graph: Graph, case: Case, rng: np.random.Generator, dt: str) -> list[np.ndarray]:
    out = []
    for name, t in graph.params:
        if t.dtype in ("i32", "i64"):
            out.append(rng.integers(0, case.ints[name], size=t.shape).astype(np.int32))
        elif name == "r":
            out.append(rng.standard_normal(t.shape).astype(dt))
        else:
            out.append(rng.uniform(*case.domain, size=t.shape).astype(dt))
    return out


def build(case: Case, dt: str) -> Graph:
    g = GraphBuilder("f")
    return with_loss(g, case.build(g, dt))


def test_every_elementwise_definition_has_a_case() -> None:
    for name, d in ELEMENTWISE.items():
        if d.kind != "compare":
            assert f"unary-{name}" in CASES or f"binary-{name}" in CASES, name


@pytest.mark.parametrize("name", sorted(CASES))
def test_vjp_matches_central_differences_f64(name: str) -> None:
    case = CASES[name]
    graph = build(case, "f64")
    rng = np.random.default_rng(zlib.crc32(name.encode()))
    xs = inputs(graph, case, rng, "float64")
    grad_graph = value_and_grad(graph, case.wrt)
    value, *grads = evaluate(grad_graph, *xs)
    assert float(value) == pytest.approx(float(evaluate(graph, *xs)[0]), rel=1e-12)
    names = [n for n, _ in graph.params]
    for w, got in zip(case.wrt, grads, strict=True):
        i = names.index(w)
        assert got.shape == xs[i].shape and got.dtype == np.float64
        want = central_differences(graph, xs, i)
        scale = max(1.0, float(np.max(np.abs(want))))
        assert float(np.max(np.abs(got - want))) <= 1e-6 * scale, (w, got, want)


@pytest.mark.parametrize("name", sorted(CASES))
def test_vjp_matches_torch_autograd_f32(name: str) -> None:
    import torch

    case = CASES[name]
    graph = build(case, "f32")
    rng = np.random.default_rng(zlib.crc32(name.encode()) + 1)
    xs = inputs(graph, case, rng, "float32")
    value, *grads = evaluate(value_and_grad(graph, case.wrt), *xs)
    names = [n for n, _ in graph.params]
    ts = [torch.tensor(x, requires_grad=n in case.wrt) for n, x in zip(names, xs, strict=True)]
    (ref,) = torch_eval(graph, ts)
    ref.backward()
    assert float(value) == pytest.approx(ref.item(), rel=1e-5, abs=1e-6)
    for w, got in zip(case.wrt, grads, strict=True):
        t = ts[names.index(w)]
        want = t.grad.numpy() if t.grad is not None else np.zeros(t.shape, np.float32)
        assert got.dtype == np.float32 and got.shape == want.shape
        scale = max(1e-3, float(np.max(np.abs(want))))
        assert float(np.max(np.abs(got - want))) <= 2e-6 * scale, (w, got, want)


def zoo(dt: str) -> tuple[GraphBuilder, int]:
    """One graph using every structural VJP (scatter-add, slice padding, concat, softmax,
    grouped sums, max reductions, broadcast matmul, select, casts)."""
    g = GraphBuilder("zoo")
    table = g.param("table", dt, (7, 4))
    idx = g.param("idx", "i32", (2, 3))
    w = g.param("w", dt, (4, 4))
    e = g.gather(table, idx)  # [2, 3, 4]
    h = g.matmul(e, w)
    h = g.concat([g.slice(h, 2, 0, 2), g.unary("tanh", g.slice(h, 2, 2, 4))], 2)
    s = g.softmax(g.repeat_interleave(h, 2, 1), 2)  # [2, 6, 4]
    m = g.reduce("reduce_max", s, 1, True)
    c = g.where(g.binary("gt", s, m), s, g.binary("mul", s, m))
    y = g.binary("add", g.cast(g.cast(c, "f32"), dt), g.reduce("reduce_min", h, 1, True))
    return g, y


def test_compiled_host_gradients_equal_the_interpreter() -> None:
    """The lowered gradient graph (scatter-add kernel included) agrees with the reference
    interpreter, and repeats bitwise."""
    from kinac.graph_build import compile_graph

    g, y = zoo("f32")
    graph = with_loss(g, y)
    grad = value_and_grad(graph, ("table", "w"))
    assert "scatter_add" in {n.op for n in grad.nodes}
    rng = np.random.default_rng(7)
    xs = [
        rng.standard_normal((2, 6, 4)).astype(np.float32),
        rng.standard_normal((7, 4)).astype(np.float32),
        rng.integers(0, 7, size=(2, 3)).astype(np.int32),
        rng.standard_normal((4, 4)).astype(np.float32),
    ]
    want = evaluate(grad, *xs)
    fn = compile_graph(grad)
    got = fn(*xs)
    for a, b in zip(got, want, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    again = fn(*xs)
    assert all(a.tobytes() == b.tobytes() for a, b in zip(got, again, strict=True))


def test_gpu_lowering_of_gradients_runs_emulated() -> None:
    """The GPU back end's kernels for the gradient graph (the scatter-add kernel included),
    run on the CPU by the emulator, equal the interpreter; the PTX assembles for sm_90."""

    from gpu_support import assert_ptxas_accepts, run_emulated

    g, y = zoo("f32")
    grad = value_and_grad(with_loss(g, y), ("table", "w"))
    rng = np.random.default_rng(7)
    xs = [
        rng.standard_normal((2, 6, 4)).astype(np.float32),
        rng.standard_normal((7, 4)).astype(np.float32),
        rng.integers(-1, 8, size=(2, 3)).astype(np.int32) % 7,
        rng.standard_normal((4, 4)).astype(np.float32),
    ]
    for a, b in zip(run_emulated(grad, *xs), evaluate(grad, *xs), strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    assert_ptxas_accepts(grad)


SMOOTH = ("exp", "tanh", "sigmoid", "gelu", "silu", "sin", "cos", "erf", "softplus", "square")


@st.composite
def programs(draw: st.DrawFn) -> tuple[Graph, tuple[str, ...]]:
    """A random chain over params of broadcastable shapes: smooth unary ops, arithmetic with
    a broadcast operand, reductions with keepdims, softmax, views."""
    g = GraphBuilder("p")
    a = g.param("a", "f32", (2, 3, 4))
    b = g.param("b", "f32", draw(st.sampled_from([(4,), (3, 1), (1, 4), (2, 3, 4)])))
    c = g.param("c", "f32", draw(st.sampled_from([(1,), (2, 1, 4), (3, 4)])))
    x = a
    for _ in range(draw(st.integers(2, 6))):
        kind = draw(st.sampled_from(["unary", "binary", "reduce", "softmax", "view"]))
        if kind == "unary":
            x = g.unary(draw(st.sampled_from(SMOOTH)), x)
        elif kind == "binary":
            other = draw(st.sampled_from([b, c]))
            full = g.t(a).shape
            if any(d not in (1, n) for d, n in zip(g.t(x).shape, full, strict=True)):
                x = g.transpose(x, (2, 1, 0))  # the view step reversed it
            if g.t(x).shape != full:
                x = g.broadcast_to(x, full)
            x = g.binary(draw(st.sampled_from(["add", "sub", "mul", "max", "min"])), x, other)
        elif kind == "reduce":
            op = draw(st.sampled_from(["reduce_sum", "reduce_mean", "reduce_max"]))
            x = g.reduce(op, x, draw(st.integers(0, g.t(x).rank - 1)), True)
        elif kind == "softmax":
            x = g.softmax(x, draw(st.integers(0, g.t(x).rank - 1)))
        else:
            x = g.transpose(x, tuple(reversed(range(g.t(x).rank))))
    return with_loss(g, x), ("a", "b", "c")


@settings(max_examples=40, deadline=None)
@given(programs())
def test_random_programs_match_torch_autograd(prog: tuple[Graph, tuple[str, ...]]) -> None:
    import torch

    graph, wrt = prog
    rng = np.random.default_rng(0)
    xs = [rng.uniform(-1.5, 1.5, size=t.shape).astype(np.float32) for _, t in graph.params]
    value, *grads = evaluate(value_and_grad(graph, wrt), *xs)
    names = [n for n, _ in graph.params]
    ts = [torch.tensor(x, requires_grad=n in wrt) for n, x in zip(names, xs, strict=True)]
    (ref,) = torch_eval(graph, ts)
    ref.backward()
    assert float(value) == pytest.approx(ref.item(), rel=1e-5, abs=1e-5)
    for w, got in zip(wrt, grads, strict=True):
        t = ts[names.index(w)]
        want = t.grad.numpy() if t.grad is not None else np.zeros(t.shape, np.float32)
        # inputs are O(1): a gradient summed over a broadcast cancels to small values whose
        # f32 rounding is that of its O(0.1) terms
        scale = max(0.1, float(np.max(np.abs(want))))
        assert float(np.max(np.abs(got - want))) <= 1e-5 * scale, (w, got, want)
