"""The gradient of ``max``/``min`` (the reductions and the elementwise pair) on inputs with
NaNs and ties, differentially against torch autograd.

The semantics (docs/language.md, "Gradients"): the cotangent goes to the elements that give
the result, shared evenly among them; a NaN result is given by the NaN elements, so they share
it and the others get 0. That is torch's ``Tensor.max()``/``min()`` backward, the reference
here (slice by slice). Torch's other ``max`` gradients disagree with it only where a NaN is
involved: ``amax`` makes the whole slice's gradient NaN (``eq`` finds no element equal to a
NaN, ``0 * inf``: kinac did the same), ``maximum`` gives the full cotangent to both operands
(kinac split it in half between the NaN and the number), and ``max(dim)`` gives it to one
index. Without NaNs all agree up to ties, which ``amax``/``maximum`` and kinac split evenly.
"""

from __future__ import annotations

import zlib

import numpy as np
import pytest
from grad_support import with_loss

from kinac.grad import value_and_grad
from kinac.ir.testing import GraphBuilder
from kinac.tir.graph import Graph
from kinac.tir.interp import evaluate


def _data(rng: np.random.Generator, shape: tuple[int, ...], dt: str) -> np.ndarray:
    """Small integers (many ties), a quarter NaN."""
    x = rng.integers(-2, 3, size=shape).astype(dt)
    x[rng.random(shape) < 0.25] = np.nan
    return x


def _torch_slice_grad(vals: np.ndarray, g: float, op: str) -> np.ndarray:
    """torch's ``Tensor.max()``/``min()`` backward on one slice with cotangent ``g``."""
    import torch

    t = torch.tensor(vals.astype(np.float64), requires_grad=True)
    (t.max() if op == "max" else t.min()).backward(torch.tensor(float(g), dtype=torch.float64))
    assert t.grad is not None
    return t.grad.numpy()


def _reduce_graph(op: str, shape: tuple[int, ...], axis: int, keep: bool, dt: str) -> Graph:
    g = GraphBuilder("red")
    return with_loss(g, g.reduce(f"reduce_{op}", g.param("x", dt, shape), axis, keep))


def _reduce_reference(x: np.ndarray, r: np.ndarray, op: str, axis: int) -> np.ndarray:
    xs = np.moveaxis(x, axis, -1)
    rs = r.reshape(xs.shape[:-1])
    out = np.zeros(xs.shape)
    for idx in np.ndindex(*xs.shape[:-1]):
        out[idx] = _torch_slice_grad(xs[idx], float(rs[idx]), op)
    return np.moveaxis(out, -1, axis)


def _host(graph: Graph, *xs: np.ndarray) -> list[np.ndarray]:
    from kinac.graph_build import compile_graph

    return list(compile_graph(graph)(*xs))


@pytest.mark.parametrize("op", ["max", "min"])
@pytest.mark.parametrize(("axis", "keep"), [(0, False), (1, True), (2, False)])
def test_reduction_gradient_with_nans_and_ties_matches_torch(
    op: str, axis: int, keep: bool
) -> None:
    rng = np.random.default_rng(zlib.crc32(f"{op}{axis}{keep}".encode()))
    shape = (3, 4, 5)
    graph = value_and_grad(_reduce_graph(op, shape, axis, keep, "f32"), ("x",))
    x = _data(rng, shape, "float32")
    kept = tuple(1 if i == axis else d for i, d in enumerate(shape))
    r = rng.standard_normal(kept if keep else tuple(d for i, d in enumerate(shape) if i != axis))
    r = r.astype(np.float32)
    want = _reduce_reference(x, r, op, axis)
    assert np.isnan(x).any() and np.isnan(want).sum() == 0  # NaNs in, none out
    for got in (evaluate(graph, r, x)[1], _host(graph, r, x)[1]):
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=0)


@pytest.mark.parametrize("op", ["max", "min"])
def test_elementwise_gradient_with_nans_and_ties_matches_torch(op: str) -> None:
    rng = np.random.default_rng(7 if op == "max" else 8)
    g = GraphBuilder("ew")
    y = g.binary(op, g.param("a", "f32", (6, 5)), g.param("b", "f32", (6, 5)))
    graph = value_and_grad(with_loss(g, y), ("a", "b"))
    a, b = _data(rng, (6, 5), "float32"), _data(rng, (6, 5), "float32")
    a[0, 0] = b[0, 0] = 1.0  # a tie, whatever was drawn
    r = rng.standard_normal((6, 5)).astype(np.float32)
    want_a, want_b = np.zeros((6, 5)), np.zeros((6, 5))
    for i in np.ndindex(6, 5):
        want_a[i], want_b[i] = _torch_slice_grad(np.array([a[i], b[i]]), float(r[i]), op)
    both_nan = np.isnan(a) & np.isnan(b)
    one_nan = np.isnan(a) ^ np.isnan(b)
    assert both_nan.any() and one_nan.any() and (a == b).any()  # every case is drawn
    for _, ga, gb in (evaluate(graph, r, a, b), _host(graph, r, a, b)):
        np.testing.assert_allclose(ga, want_a, rtol=1e-6, atol=0)
        np.testing.assert_allclose(gb, want_b, rtol=1e-6, atol=0)


def test_without_nans_the_gradient_is_torchs_amax_and_maximum() -> None:
    """On NaN-free inputs with ties the reference agrees with ``amax`` and ``maximum``: the
    semantics changed only where a NaN is involved."""
    import torch

    rng = np.random.default_rng(3)
    x = rng.integers(-2, 3, size=(4, 6)).astype(np.float32)
    r = rng.standard_normal(4).astype(np.float32)
    graph = value_and_grad(_reduce_graph("max", (4, 6), 1, False, "f32"), ("x",))
    t = torch.tensor(x, requires_grad=True)
    torch.amax(t, dim=1).backward(torch.tensor(r))
    assert t.grad is not None
    np.testing.assert_allclose(evaluate(graph, r, x)[1], t.grad.numpy(), rtol=1e-6)
    a, b = x[:, :3].copy(), x[:, 3:].copy()
    ta, tb = torch.tensor(a, requires_grad=True), torch.tensor(b, requires_grad=True)
    rr = rng.standard_normal(a.shape).astype(np.float32)
    torch.maximum(ta, tb).backward(torch.tensor(rr))
    g = GraphBuilder("ew")
    y = g.binary("max", g.param("a", "f32", a.shape), g.param("b", "f32", b.shape))
    _, ga, gb = evaluate(value_and_grad(with_loss(g, y), ("a", "b")), rr, a, b)
    assert ta.grad is not None and tb.grad is not None
    np.testing.assert_allclose(ga, ta.grad.numpy(), rtol=1e-6)
    np.testing.assert_allclose(gb, tb.grad.numpy(), rtol=1e-6)


def test_gpu_lowering_of_the_nan_gradients_runs_emulated() -> None:
    """The GPU kernels of both gradients (emulated on the CPU: the same LLVM IR, whose
    ``llvm.maximum`` propagates NaN as PTX's ``max.NaN``) equal the interpreter; the PTX
    assembles for sm_90."""

    from gpu_support import assert_ptxas_accepts, run_emulated

    rng = np.random.default_rng(11)
    g = GraphBuilder("both")
    x = g.param("x", "f32", (4, 8))
    other = g.param("o", "f32", (4, 1))
    y = g.binary("min", g.reduce("reduce_max", x, 1, True), other)
    graph = value_and_grad(with_loss(g, y), ("x", "o"))
    xs = [rng.standard_normal((4, 1)).astype(np.float32), _data(rng, (4, 8), "float32")]
    xs.append(np.array([[np.nan], [1.0], [np.nan], [5.0]], np.float32))
    xs[1][0] = 1.0  # a row without NaN, with a tie at the max
    for a_, b_ in zip(run_emulated(graph, *xs), evaluate(graph, *xs), strict=True):
        np.testing.assert_allclose(a_, b_, rtol=1e-6, atol=0)
    assert_ptxas_accepts(graph)


@pytest.mark.parametrize("dt", ["bf16", "f16", "f64"])
def test_other_float_dtypes_on_host_and_emulated_gpu(dt: str) -> None:
    """``max(min(x, axis 1), o)``: row 0's min is NaN (two NaNs share it, and it beats o);
    row 1's min is a tie at 0 and o is NaN (o takes it all). Exact values, bit-identical on
    the interpreter, the host and the emulated GPU."""
    from gpu_support import run_emulated

    from kinac.tir.interp import f32_to_bf16

    def cast(a: np.ndarray) -> np.ndarray:
        return f32_to_bf16(a) if dt == "bf16" else a.astype("float16" if dt == "f16" else "float64")

    g = GraphBuilder("mm")
    x, o = g.param("x", dt, (2, 4)), g.param("o", dt, (2, 1))
    y = g.binary("max", g.reduce("reduce_min", x, 1, True), o)
    graph = value_and_grad(with_loss(g, y), ("x", "o"))
    nan = np.nan
    xs = [
        cast(np.ones((2, 1), np.float32)),
        cast(np.array([[1, nan, nan, 0], [2, 0, 0, 3]], np.float32)),
        cast(np.array([[5], [nan]], np.float32)),
    ]
    _, gx, go = evaluate(graph, *xs)
    as_f32 = (
        (lambda a: (a.astype(np.uint32) << 16).view(np.float32)) if dt == "bf16" else np.float32
    )
    np.testing.assert_array_equal(as_f32(gx), [[0, 0.5, 0.5, 0], [0, 0, 0, 0]])
    np.testing.assert_array_equal(as_f32(go), [[0], [1]])
    for got in (_host(graph, *xs), run_emulated(graph, *xs)):
        for a, b in zip(got[1:], (gx, go), strict=True):
            assert np.asarray(a).tobytes() == np.asarray(b).tobytes()


def test_relu_gradient_at_nan_zero_and_ties_is_torchs() -> None:
    """relu passes the cotangent through at a NaN input (torch's ``threshold_backward``: ``x <= 0``
    is false for NaN), like the binary ``max`` above; 0 and negatives get none."""
    import torch

    x = np.array([np.nan, 0.0, -0.0, -1.5, 2.0, np.inf, -np.inf], np.float32)
    r = np.arange(1, 8, dtype=np.float32)
    g = GraphBuilder("relu")
    graph = value_and_grad(with_loss(g, g.unary("relu", g.param("x", "f32", x.shape))), ("x",))
    t = torch.tensor(x, requires_grad=True)
    torch.relu(t).backward(torch.tensor(r))
    assert t.grad is not None
    want = t.grad.numpy()
    assert want[0] == r[0]  # the NaN input's cotangent passes
    for got in (evaluate(graph, r, x)[1], _host(graph, r, x)[1]):
        np.testing.assert_array_equal(got, want)
