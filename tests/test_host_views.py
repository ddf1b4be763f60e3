"""Differential tests against PyTorch: views, data movement, softmax and creation ops.

Views are never copied by kinac: they become index arithmetic in the kernels that read them,
or leading dimensions and transpose flags of a BLAS call. These tests chain random views and
feed them to an elementwise op, to a reduction and to a matmul, so each reading path is hit.
"""

from __future__ import annotations

import math
import re
from typing import cast

import numpy as np
import pytest
from host_support import assert_close, randn, run, torch_eval
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kinac.ir.testing import GraphBuilder
from kinac.rt.host import KinaRuntimeError

FAST = settings(max_examples=5, deadline=None, suppress_health_check=list(HealthCheck))
seeds = st.integers(0, 2**32 - 1)


def check(
    g: object, ins: list[np.ndarray], dtype: str = "f32", rtol: float = 2e-6, scaled: bool = False
) -> None:
    for a, b in zip(run(g, *ins), torch_eval(g, *ins), strict=True):  # type: ignore[arg-type]
        assert_close(a, b, dtype if a.dtype != np.bool_ else "bool", rtol, 1e-6, scaled)


@st.composite
def view_chain(draw: st.DrawFn) -> tuple[tuple[int, ...], list[tuple[str, object]]]:
    """A starting shape and up to four random views applied to it."""
    shape = tuple(draw(st.lists(st.sampled_from([1, 2, 3, 4, 6]), min_size=1, max_size=4)))
    cur: tuple[int, ...] = shape
    steps: list[tuple[str, object]] = []
    for _ in range(draw(st.integers(1, 4))):
        kind = draw(st.sampled_from(["transpose", "reshape", "broadcast", "slice", "repeat"]))
        if kind == "transpose":
            perm = tuple(draw(st.permutations(range(len(cur)))))
            steps.append((kind, perm))
            cur = tuple(cur[p] for p in perm)
        elif kind == "reshape":
            n = math.prod(cur)
            divs = [d for d in range(1, n + 1) if n % d == 0]
            a = draw(st.sampled_from(divs))
            new: tuple[int, ...] = (a, n // a) if draw(st.booleans()) else (n // a, 1, a)
            steps.append((kind, new))
            cur = new
        elif kind == "broadcast":
            new = (draw(st.integers(1, 3)),) + tuple(
                d if d != 1 else draw(st.integers(1, 3)) for d in cur
            )
            steps.append((kind, new))
            cur = new
        elif kind == "slice":
            ax = draw(st.integers(0, len(cur) - 1))
            s = draw(st.integers(0, cur[ax] - 1))
            e = draw(st.integers(s + 1, cur[ax]))
            steps.append((kind, (ax, s, e)))
            cur = cur[:ax] + (e - s,) + cur[ax + 1 :]
        else:
            ax, r = draw(st.integers(0, len(cur) - 1)), draw(st.integers(2, 3))
            steps.append((kind, (ax, r)))
            cur = cur[:ax] + (cur[ax] * r,) + cur[ax + 1 :]
    return shape, steps


def apply_chain(g: GraphBuilder, x: int, steps: list[tuple[str, object]]) -> int:
    for kind, arg in steps:
        if kind == "transpose":
            x = g.transpose(x, arg)  # type: ignore[arg-type]
        elif kind == "reshape":
            x = g.reshape(x, arg)  # type: ignore[arg-type]
        elif kind == "broadcast":
            x = g.broadcast_to(x, arg)  # type: ignore[arg-type]
        elif kind == "slice":
            x = g.slice(x, *arg)  # type: ignore[misc]
        else:
            ax, r = cast(tuple[int, int], arg)
            x = g.repeat_interleave(x, r, ax)
    return x


@settings(max_examples=12, deadline=None, suppress_health_check=list(HealthCheck))
@given(chain=view_chain(), seed=seeds)
def test_view_chains(chain: tuple[tuple[int, ...], list[tuple[str, object]]], seed: int) -> None:
    shape, steps = chain
    g = GraphBuilder("views")
    x = g.param("x", "f32", shape)
    v = apply_chain(g, g.to_device(x, "cpu"), steps)  # read through layouts (a copy kernel)
    e = apply_chain(g, g.unary("exp", x), steps)  # views of a computed value: index transforms
    r = g.reduce("reduce_sum", g.binary("mul", v, e), -1, keepdims=True)
    ins = [randn(np.random.default_rng(seed), shape, "f32")]
    check(g.build(v, e, r), ins, rtol=1e-5, scaled=True)


@pytest.mark.parametrize("trans_a", [False, True])
@pytest.mark.parametrize("gqa", [False, True])
def test_blas_reads_views_in_place(trans_a: bool, gqa: bool) -> None:
    """Attention-style operands: heads split by reshape/transpose, K/V heads repeated."""
    b, s, h, kv, dh = 2, 16, 4, 2 if gqa else 4, 8
    g = GraphBuilder("bview")
    q = g.param("q", "f32", (b * s, h * dh))
    k = g.param("k", "f32", (b, s, kv * dh))
    qh = g.transpose(g.reshape(q, (b, s, h, dh)), (0, 2, 1, 3))
    if trans_a:
        qh = g.transpose(g.transpose(qh, (0, 1, 3, 2)), (0, 1, 3, 2))
    kh = g.transpose(g.reshape(k, (b, s, kv, dh)), (0, 2, 3, 1))
    kh = g.repeat_interleave(kh, h // kv, 1)
    rng = np.random.default_rng(0)
    check(
        g.build(g.matmul(qh, kh)),
        [randn(rng, (b * s, h * dh), "f32"), randn(rng, (b, s, kv * dh), "f32")],
        rtol=1e-5,
        scaled=True,
    )


@FAST
@given(
    shape=st.lists(st.integers(1, 5), min_size=1, max_size=3).map(tuple), seed=seeds, data=st.data()
)
def test_concat_and_slice(shape: tuple[int, ...], seed: int, data: st.DataObject) -> None:
    ax = data.draw(st.integers(0, len(shape) - 1))
    other = shape[:ax] + (data.draw(st.integers(1, 4)),) + shape[ax + 1 :]
    g = GraphBuilder("concat")
    a, b = g.param("a", "f32", shape), g.param("b", "f32", other)
    c = g.concat([a, g.unary("neg", b), a], ax)
    s = g.slice(c, ax, 1, g.t(c).shape[ax])
    rng = np.random.default_rng(seed)
    check(g.build(c, g.binary("add", s, s)), [randn(rng, shape, "f32"), randn(rng, other, "f32")])


@pytest.mark.parametrize("dtype", ["f32", "f64", "i32", "bf16"])
@pytest.mark.parametrize("idx_dtype", ["i32", "i64"])
def test_gather(dtype: str, idx_dtype: str) -> None:
    g = GraphBuilder("gather")
    table = g.param("table", dtype, (11, 5))
    idx = g.param("idx", idx_dtype, (3, 4))
    rng = np.random.default_rng(1)
    ids = rng.integers(0, 11, (3, 4)).astype(np.int32 if idx_dtype == "i32" else np.int64)
    check(g.build(g.gather(table, idx)), [randn(rng, (11, 5), dtype), ids], dtype)


def test_gather_out_of_range_raises() -> None:
    g = GraphBuilder("gather_oob")
    table = g.param("table", "f32", (10, 4))
    idx = g.param("idx", "i64", (2, 3))
    gr = g.build(g.gather(g.unary("neg", table), idx))
    t = np.ones((10, 4), np.float32)
    ok = np.array([[0, 9, 3], [1, 2, 3]])
    np.testing.assert_array_equal(run(gr, t, ok)[0], -t[ok])
    for bad, pos in ((10, [1, 2]), (-1, [0, 1]), (2**40, [1, 0])):
        ids = ok.copy()
        ids[tuple(pos)] = bad
        with pytest.raises(
            KinaRuntimeError, match=re.escape(f"gather index {bad} at position {pos}")
        ):
            run(gr, t, ids)


@pytest.mark.parametrize("dtype", ["f32", "f64", "bf16"])
@FAST
@given(
    shape=st.lists(st.integers(1, 9), min_size=1, max_size=3).map(tuple), seed=seeds, data=st.data()
)
def test_softmax(dtype: str, shape: tuple[int, ...], seed: int, data: st.DataObject) -> None:
    ax = data.draw(st.integers(0, len(shape) - 1))
    g = GraphBuilder("softmax")
    x = g.param("x", dtype, shape)
    y = g.softmax(g.binary("mul", x, g.const(3.0, dtype)), ax)
    tol = {"f32": 2e-6, "f64": 1e-12, "bf16": 1.6e-2}[dtype]
    check(g.build(y), [randn(np.random.default_rng(seed), shape, dtype)], dtype, tol)


def test_softmax_with_masked_rows() -> None:
    """-inf entries give exact zeros; a fully masked row gives NaN, as in PyTorch."""
    g = GraphBuilder("softmax_mask")
    x = g.param("x", "f32", (3, 4))
    gr = g.build(g.softmax(x, 1))
    v = np.array([[0, -np.inf, 1, 2], [-np.inf] * 4, [5, 5, -np.inf, 5]], np.float32)
    check(gr, [v])
    assert run(gr, v)[0][0, 1] == 0.0


@pytest.mark.parametrize("dtype", ["f32", "f64", "i32", "i64", "bf16", "bool"])
def test_creation_ops(dtype: str) -> None:
    g = GraphBuilder("create")
    x = g.param("x", dtype, (3, 4))
    io = g.iota(dtype, (3, 4), 1) if dtype != "bool" else g.full("bool", (3, 4), True)
    fu = g.full(dtype, (3, 4), 1 if dtype != "bool" else False)
    c = g.const(2 if dtype != "bool" else True, dtype)
    op = "add" if dtype != "bool" else "mul"
    outs = [g.binary(op, g.binary(op, x, io), c), fu]
    check(g.build(*outs), [randn(np.random.default_rng(2), (3, 4), dtype)], dtype, 1.6e-2)


def test_outputs_that_are_params_or_repeated() -> None:
    g = GraphBuilder("outs")
    x = g.param("x", "f32", (2, 3))
    y = g.unary("neg", x)
    gr = g.build(x, y, y, g.transpose(y, (1, 0)))
    xin = np.arange(6, dtype=np.float32).reshape(2, 3)
    a, b, c, d = run(gr, xin)
    np.testing.assert_array_equal(a, xin)
    assert a.ctypes.data != xin.ctypes.data and b.ctypes.data != c.ctypes.data
    np.testing.assert_array_equal(b, -xin)
    np.testing.assert_array_equal(c, -xin)
    np.testing.assert_array_equal(d, -xin.T)
