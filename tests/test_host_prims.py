"""Differential tests: every primitive, compiled for the host, against PyTorch on the CPU.

Random shapes and data come from hypothesis (few examples each: every example is a compile).
To keep the number of compiles down, one graph applies a whole family of ops to the same
inputs (one output per op). Floats are compared elementwise (NaN and infinities must match);
ints and bools exactly.
"""

from __future__ import annotations

import numpy as np
import pytest
from host_support import assert_close, f64_unary, randn, round_to, run, torch_eval
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kinac.ir.testing import BINARY, COMPARE, UNARY, GraphBuilder

FAST = settings(max_examples=4, deadline=None, suppress_health_check=list(HealthCheck))
ONE = settings(max_examples=1, deadline=None, suppress_health_check=list(HealthCheck))
TOL = {"f32": (2e-6, 1e-6), "f64": (1e-12, 1e-12), "f16": (2e-3, 1e-3), "bf16": (1.6e-2, 1e-2)}

shapes = st.lists(st.integers(1, 6), min_size=0, max_size=4).map(tuple)
seeds = st.integers(0, 2**32 - 1)


@st.composite
def broadcast_pair(draw: st.DrawFn) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """Two shapes that broadcast (numpy rules: aligned from the right, 1s stretch)."""
    full = draw(st.lists(st.integers(1, 5), min_size=1, max_size=4))
    other = [1 if draw(st.booleans()) else d for d in full]
    other = other[draw(st.integers(0, len(other) - 1)) :]
    return (tuple(full), tuple(other)) if draw(st.booleans()) else (tuple(other), tuple(full))


def check(
    g: object,
    inputs: list[np.ndarray],
    dtypes: list[str],
    ops: tuple[str, ...] = (),
    scaled: bool = False,
) -> None:
    got, want = run(g, *inputs), torch_eval(g, *inputs)  # type: ignore[arg-type]
    for i, (a, b, dt) in enumerate(zip(got, want, dtypes, strict=True)):
        rtol, atol = TOL.get(dt, (0, 0))
        if i < len(ops) and ops[i] == "gelu" and dt in ("f32", "f16", "bf16"):
            # both erfs are approximations (ours |err| < 4e-7, like XLA's); gelu scales by |x|/2
            atol = max(atol, 3e-6)
        assert_close(a, b, dt, rtol, atol, scaled)


@pytest.mark.parametrize("dtype", ["f32", "f64"])
@FAST
@given(shape=shapes, seed=seeds)
def test_unary_float(dtype: str, shape: tuple[int, ...], seed: int) -> None:
    g = GraphBuilder(f"unary_{dtype}")
    x = g.param("x", dtype, shape)
    outs = [g.unary(op, x) for op in UNARY]
    x_in = randn(np.random.default_rng(seed), shape, dtype, 2.0)
    check(g.build(*outs), [x_in], [dtype] * len(outs), UNARY)


@pytest.mark.parametrize("dtype", ["f16", "bf16"])
@ONE
@given(shape=shapes, seed=seeds)
def test_unary_low_precision(dtype: str, shape: tuple[int, ...], seed: int) -> None:
    g = GraphBuilder(f"unary_{dtype}")
    x = g.param("x", dtype, shape)
    outs = [g.unary(op, x) for op in UNARY]
    x_in = randn(np.random.default_rng(seed), shape, dtype)
    check(g.build(*outs), [x_in], [dtype] * len(outs), UNARY)


SPECIAL = [0.0, -0.0, np.inf, -np.inf, np.nan, 1e-30, -1e-30, 88.0, -88.0, 100.0, -100.0, 1e-40]
SPECIAL += [-1.0, 1.0, 1e4, -1e4]


@pytest.mark.parametrize("dtype", ["f32", "f64", "f16", "bf16"])
def test_unary_special_values(dtype: str) -> None:
    """Infinities, NaN, signed zeros, subnormals and overflow, against each op's formula.

    Compiled for the host and in the reference interpreter. The reference is float64
    arithmetic (``f64_unary``), not PyTorch: torch 2.13 CPU gives gelu(+inf) = nan for f32
    tensors of two or more elements, which is wrong.
    """
    g = GraphBuilder(f"unary_special_{dtype}")
    x = g.param("x", dtype, (len(SPECIAL),))
    outs = [g.unary(op, x) for op in UNARY]
    from kinac.tir.interp import evaluate

    x_in = round_to(SPECIAL, dtype)
    graph = g.build(*outs)
    for where, got in (("host", run(graph, x_in)), ("interp", evaluate(graph, x_in))):
        for op, y in zip(UNARY, got, strict=True):
            rtol, atol = TOL[dtype]
            if op == "gelu" and dtype != "f64":
                atol = max(atol, 3e-6)  # our erf is an approximation (|err| < 4e-7, like XLA's)
            want = f64_unary(op, x_in, dtype)
            assert_close(y, want, dtype, rtol, atol, what=f"{where}: {op} {dtype}")


@pytest.mark.parametrize("dtype", ["i32", "i64"])
@ONE
@given(shape=shapes, seed=seeds)
def test_unary_int(dtype: str, shape: tuple[int, ...], seed: int) -> None:
    g = GraphBuilder(f"unary_{dtype}")
    x = g.param("x", dtype, shape)
    outs = [g.unary(op, x) for op in ("neg", "relu", "abs", "square")]
    check(g.build(*outs), [randn(np.random.default_rng(seed), shape, dtype)], [dtype] * 4)


@pytest.mark.parametrize("dtype", ["f32", "f64", "f16", "bf16"])
@FAST
@given(pair=broadcast_pair(), seed=seeds)
def test_binary_float(dtype: str, pair: tuple[tuple[int, ...], ...], seed: int) -> None:
    g = GraphBuilder(f"binary_{dtype}")
    a, b = g.param("a", dtype, pair[0]), g.param("b", dtype, pair[1])
    outs = [g.binary(op, a, b) for op in BINARY + COMPARE]
    outs.append(g.where(g.binary("lt", a, b), a, b))
    rng = np.random.default_rng(seed)
    ins = [randn(rng, pair[0], dtype), randn(rng, pair[1], dtype)]
    if dtype not in ("bf16", "f16") and ins[0].size > 1:
        ins[0].flat[0] = ins[1].flat[0]  # make eq / le / ge see an equal pair
    check(g.build(*outs), ins, [dtype] * len(BINARY) + ["bool"] * len(COMPARE) + [dtype])


@pytest.mark.parametrize("dtype", ["i32", "i64"])
@FAST
@given(pair=broadcast_pair(), seed=seeds)
def test_binary_int(dtype: str, pair: tuple[tuple[int, ...], ...], seed: int) -> None:
    g = GraphBuilder(f"binary_{dtype}")
    a, b = g.param("a", dtype, pair[0]), g.param("b", dtype, pair[1])
    outs = [g.binary(op, a, b) for op in BINARY + COMPARE]
    rng = np.random.default_rng(seed)
    x = randn(rng, pair[0], dtype)
    y = rng.integers(1, 6, pair[1]).astype(x.dtype)  # torch: no int division by zero
    check(g.build(*outs), [x, y], [dtype] * len(BINARY) + ["bool"] * len(COMPARE))


def test_int_division_semantics() -> None:
    """Floor division, ``x // 0 == 0``, and INT_MIN // -1 wraps (no trap)."""
    g = GraphBuilder("idiv")
    a, b = g.param("a", "i32", (6,)), g.param("b", "i32", (6,))
    g2 = g.build(g.binary("div", a, b), g.binary("pow", a, b))
    x = np.array([7, -7, 7, -(2**31), 5, -1], dtype=np.int32)
    y = np.array([2, 2, 0, -1, -1, -3], dtype=np.int32)
    div, pw = run(g2, x, y)
    np.testing.assert_array_equal(div, [3, -4, 0, -(2**31), -5, 0])
    np.testing.assert_array_equal(pw, [49, 49, 1, 0, 0, -1])


@FAST
@given(pair=broadcast_pair(), seed=seeds)
def test_bool_ops(pair: tuple[tuple[int, ...], ...], seed: int) -> None:
    g = GraphBuilder("bools")
    a, b = g.param("a", "bool", pair[0]), g.param("b", "bool", pair[1])
    outs = [g.binary(op, a, b) for op in ("add", "mul", "max", "min", "eq", "lt", "ge")]
    w = g.where(a, b, g.binary("eq", b, b))
    rng = np.random.default_rng(seed)
    check(
        g.build(*outs, w), [randn(rng, pair[0], "bool"), randn(rng, pair[1], "bool")], ["bool"] * 8
    )


DTYPES = ["f64", "f32", "f16", "bf16", "i64", "i32", "bool"]


@ONE
@given(shape=shapes, seed=seeds)
def test_casts_all_pairs(shape: tuple[int, ...], seed: int) -> None:
    g = GraphBuilder("casts")
    rng = np.random.default_rng(seed)
    params = [g.param(f"x_{src}", src, shape) for src in DTYPES]
    ins = [randn(rng, shape, src, 30.0) for src in DTYPES]
    outs = [g.cast(p, dst) for p in params for dst in DTYPES]
    dts = [dst for _ in DTYPES for dst in DTYPES]
    check(g.build(*outs), ins, dts)


@pytest.mark.parametrize("dtype", ["f32", "f64", "i32", "i64", "bool"])
@FAST
@given(
    shape=st.lists(st.integers(1, 7), min_size=1, max_size=4).map(tuple), seed=seeds, data=st.data()
)
def test_reductions(dtype: str, shape: tuple[int, ...], seed: int, data: st.DataObject) -> None:
    axis = data.draw(st.integers(0, len(shape) - 1))
    keep = data.draw(st.booleans())
    ops = ["reduce_max", "reduce_min"]
    ops += [] if dtype == "bool" else ["reduce_sum"]
    ops += ["reduce_mean"] if dtype in ("f32", "f64") else []
    g = GraphBuilder(f"reduce_{dtype}")
    x = g.param("x", dtype, shape)
    outs = [g.reduce(op, x, axis, keep) for op in ops]
    outs.append(g.reduce(ops[0], g.unary("abs", x) if dtype != "bool" else x, axis, keep))
    ins = [randn(np.random.default_rng(seed), shape, dtype)]
    check(g.build(*outs), ins, [dtype] * len(outs), scaled=True)


@st.composite
def matmul_shapes(draw: st.DrawFn) -> tuple[tuple[int, ...], tuple[int, ...]]:
    m, k, n = (draw(st.sampled_from([1, 3, 8, 17, 40])) for _ in range(3))
    batch = tuple(draw(st.lists(st.integers(1, 3), max_size=2)))
    ba = tuple(1 if draw(st.booleans()) else d for d in batch)
    bb = batch[draw(st.integers(0, len(batch))) :]
    return ba + (m, k), bb + (k, n)


@pytest.mark.parametrize("dtype", ["f32", "f64", "i32", "i64"])
@FAST
@given(shapes2=matmul_shapes(), seed=seeds, transpose_b=st.booleans())
def test_matmul(
    dtype: str, shapes2: tuple[tuple[int, ...], ...], seed: int, transpose_b: bool
) -> None:
    sa, sb = shapes2
    g = GraphBuilder(f"matmul_{dtype}")
    a = g.param("a", dtype, sa)
    if transpose_b:  # B given transposed: BLAS reads it in place with a transpose flag
        perm = tuple(range(len(sb) - 2)) + (len(sb) - 1, len(sb) - 2)
        b = g.transpose(g.param("bt", dtype, tuple(sb[p] for p in perm)), perm)
        sb = tuple(sb[p] for p in perm)
    else:
        b = g.param("b", dtype, sb)
    rng = np.random.default_rng(seed)
    ins = [randn(rng, sa, dtype), randn(rng, sb, dtype)]
    gr = g.build(g.matmul(a, b))
    got, want = run(gr, *ins)[0], torch_eval(gr, *ins)[0]
    if dtype in ("i32", "i64"):
        np.testing.assert_array_equal(got, want)
    else:
        assert_close(got, want, dtype, 1e-5 if dtype == "f32" else 1e-12, 1e-5, scaled=True)


@pytest.mark.parametrize("dtype", ["f32", "f64", "bf16", "i32", "bool"])
@settings(max_examples=10, deadline=None, suppress_health_check=list(HealthCheck))
@given(pair=broadcast_pair(), seed=seeds, data=st.data())
def test_reference_evaluator_matches_pytorch(
    dtype: str, pair: tuple[tuple[int, ...], ...], seed: int, data: st.DataObject
) -> None:
    """``kinac.tir.interp`` (no compilation) against PyTorch, op family by op family."""
    from kinac.tir.interp import evaluate

    g = GraphBuilder("interp")
    a, b = g.param("a", dtype, pair[0]), g.param("b", dtype, pair[1])
    if dtype == "bool":
        outs = [g.binary(op, a, b) for op in ("add", "mul", "eq", "lt")]
    else:
        outs = [g.binary(op, a, b) for op in BINARY + COMPARE if op != "pow" or dtype != "i32"]
        if dtype != "i32":
            outs += [g.unary(op, a) for op in UNARY]
        ax = data.draw(st.integers(0, len(pair[0]) - 1))
        outs += [g.reduce(r, a, ax, data.draw(st.booleans())) for r in ("reduce_sum", "reduce_max")]
        outs += [
            g.softmax(g.cast(a, "f32"), ax),
            g.cast(a, "i64"),
            g.where(g.binary("lt", a, b), a, b),
        ]
    gr = g.build(*outs)
    rng = np.random.default_rng(seed)
    x = randn(rng, pair[0], dtype)
    y = (
        rng.integers(1, 5, pair[1]).astype(x.dtype)
        if dtype == "i32"
        else randn(rng, pair[1], dtype)
    )
    for o, got, want in zip(outs, evaluate(gr, x, y), torch_eval(gr, x, y), strict=True):
        dt = g.t(o).dtype
        tol = TOL.get(dt, (0, 0))
        assert_close(got, want, dt, tol[0], max(tol[1], 3e-6 if dt != "f64" else 0), scaled=True)
