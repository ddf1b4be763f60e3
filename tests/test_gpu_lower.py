"""The GPU lowering on the CPU: plans, fusion, PTX generation, and the kernels' semantics.

Kernels run under the host emulation of ``tests/gpu_support.py`` (one thread per GPU thread,
real warp shuffles and barriers) and are compared with the reference interpreter; the PTX of
every kernel kind is checked by llvmlite's NVPTX back end and, where installed, by ``ptxas``.
"""

from __future__ import annotations

import math
import re

import numpy as np
import pytest
from gpu_support import emulated, run_emulated

from kinac.codegen.ptx import compile_ptx, ptx_resources
from kinac.ir.gpu.pipeline import lower_graph_gpu, lower_stages_gpu
from kinac.ir.gpu.plan import map_unroll, row_config, vector_width
from kinac.ir.testing import GraphBuilder, attention_graph, block_graph, mlp_graph
from kinac.tir.graph import Graph
from kinac.tir.interp import bf16_to_f32, evaluate, f32_to_bf16


def rand(rng: np.random.Generator, shape: tuple[int, ...], dt: str) -> np.ndarray:
    x = rng.standard_normal(shape).astype(np.float32)
    if dt == "bf16":
        return f32_to_bf16(x)
    if dt == "f16":
        return x.astype(np.float16)
    if dt in ("i32", "i64"):
        return rng.integers(-9, 10, size=shape).astype(np.int32 if dt == "i32" else np.int64)
    if dt == "bool":
        return rng.random(shape) < 0.5
    return x.astype(np.float64 if dt == "f64" else np.float32)


def inputs_for(g: Graph, seed: int = 0) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    out = []
    for name, t in g.params:
        x = rand(rng, t.shape, t.dtype)
        if name == "i":  # gather indices: in range
            x = rng.integers(0, 10, size=t.shape).astype(np.int32)
        if name.startswith("w") and len(t.shape) == 2 and t.dtype in ("f32", "bf16"):
            x = as_f64(x, t.dtype) / math.sqrt(t.shape[0])
            x = f32_to_bf16(x.astype(np.float32)) if t.dtype == "bf16" else x.astype(np.float32)
        out.append(x)
    return out


def as_f64(a: np.ndarray, dt: str) -> np.ndarray:
    return bf16_to_f32(a).astype(np.float64) if dt == "bf16" else np.asarray(a, np.float64)


def check(g: Graph, rtol: float = 2e-6, atol: float = 1e-6, seed: int = 0) -> None:
    ins = inputs_for(g, seed)
    got = run_emulated(g, *ins)
    ref = evaluate(g, *ins)
    for j, (a, b) in enumerate(zip(got, ref, strict=True)):
        dt = g.nodes[g.outputs[j]].type.dtype
        assert a.shape == b.shape
        if dt in ("bool", "i32", "i64"):
            np.testing.assert_array_equal(a, b)
            continue
        fa, fb = as_f64(a, dt), as_f64(b, dt)
        assert not np.isnan(fa).any() or np.isnan(fb).any(), "unwritten (NaN-poisoned) outputs"
        np.testing.assert_allclose(fa, fb, rtol=rtol, atol=atol, equal_nan=True)


# ---- plans ---------------------------------------------------------------------------------


def test_vector_width() -> None:
    assert vector_width(256, 4) == 4
    assert vector_width(256, 2) == 8
    assert vector_width(6, 4) == 2
    assert vector_width(7, 2) == 1
    assert vector_width(64, 8) == 2


def test_row_config_keeps_rows_in_registers() -> None:
    small = row_config(256, 4, 512)
    assert small is not None and small.threads * small.chunks * 4 >= 256 and small.chunks <= 16
    big = row_config(2048, 8, 4096)
    assert big is not None and big.threads in (32, 64, 128) and big.chunks <= 16
    assert big.block >= 32 and big.block % 32 == 0
    assert row_config(10**7, 4, 1) is None
    assert map_unroll(10**7) == 4 and map_unroll(10**6) == 1 and map_unroll(100) == 1


def test_block_plan_library_and_fusion_visible_in_ir() -> None:
    lw = lower_graph_gpu(block_graph())
    plan = [(s.kind, s.impl) for s in lw.steps]
    assert plan[0] == ("row", "kernel")  # RMSNorm: one kernel
    assert plan.count(("matmul", "cublas")) == 5  # k/v and gate/up grouped (gemm_group.py)
    assert plan.count(("matmul", "cublasLt")) == 2  # the residual adds fused
    batched = [(s.gemm.mode, s.gemm.batch) for s in lw.steps if s.gemm and s.gemm.batch > 1]
    assert batched == [("pointers", 2), ("pointers", 16), ("pointers", 16), ("pointers", 2)]
    assert sum(1 for k, _ in plan if k == "row") == 2 and ("softmax", "kernel") in plan
    assert len(lw.steps) == 12
    ir = lower_stages_gpu(block_graph())["gpu-kernels-to-nvvm"]
    assert 'impl = "blas"' in ir and 'epilogue = "residual"' in ir and "cublas pointers" in ir


def test_mlp_plan_bias_epilogue() -> None:
    lw = lower_graph_gpu(mlp_graph())
    assert [(s.kind, s.impl) for s in lw.steps] == [
        ("matmul", "cublas"),
        ("map", "kernel"),
        ("matmul", "cublasLt"),
    ]
    g = lw.steps[2].gemm
    assert g is not None and g.epilogue == "bias" and g.m == 512 and g.batch == 1


# ---- PTX -----------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", ["f32", "bf16"])
def test_ptx_of_block_vectorised_and_shuffled(dtype: str, monkeypatch: pytest.MonkeyPatch) -> None:
    # the row kernel itself (in bf16 gpu-small-gemm fuses the norm into the q/k/v product:
    # tests/test_small_gemm.py)
    monkeypatch.setenv("KINAC_SMALL_GEMM", "0")
    lw = lower_graph_gpu(block_graph(dtype=dtype))
    ptx = compile_ptx(lw.llvm_ir, "sm_90")
    assert ".target sm_90" in ptx
    for name in lw.functions:
        assert f".entry {name}(" in ptx
    body = {m.group(1): m.group(2) for m in re.finditer(r"\.entry (\w+)\((.*?)\n}", ptx, re.S)}
    row = body[lw.steps[0].launches[0].function]  # the first RMSNorm
    assert "ld.global.nc.v4" in row and "shfl.sync.bfly" in row and "st.global.v4" in row
    res = ptx_resources(ptx)
    for name, r in res.items():
        assert r.get("spill_stores", 0) == 0 and r.get("stack", 0) == 0, (name, r)


def test_ptx_of_every_kernel_kind() -> None:
    g = GraphBuilder("kinds")
    x = g.param("x", "f32", (6, 2000))
    t = g.param("t", "f32", (50, 8))
    i = g.param("i", "i32", (3, 5))
    a = g.param("a", "i32", (4, 6))
    long = g.reduce("reduce_sum", g.unary("exp", x), -1)  # long rows: T > 32, shared memory
    col = g.softmax(x, 0)  # column kernel
    gat = g.gather(t, i)
    cat = g.concat([g.slice(x, 1, 0, 3), g.slice(x, 1, 5, 9)], 1)
    mm = g.matmul(a, g.transpose(a, (1, 0)))
    outs = [g.reduce("reduce_max", col, 0), long, g.reduce("reduce_sum", gat, 2)]
    outs += [g.reduce("reduce_min", cat, 1), g.reduce("reduce_sum", mm, 0)]
    lw = lower_graph_gpu(g.build(*outs))
    kinds = {s.kind for s in lw.steps}
    assert {"reduce", "softmax", "gather", "concat", "matmul"} <= kinds
    ptx = compile_ptx(lw.llvm_ir, "sm_90")
    assert "bar.sync" in ptx and re.search(r"atom\.[.a-z]*global\.cas", ptx)
    ptx_resources(ptx)  # ptxas accepts it (where installed)


# ---- semantics, emulated -------------------------------------------------------------------


UNARY: tuple[str, ...] = ("neg", "exp", "log", "sqrt", "rsqrt", "tanh", "sigmoid", "relu")
UNARY += ("gelu", "silu", "abs", "recip", "square")


@pytest.mark.parametrize("dtype", ["f32", "bf16", "f16"])
def test_unary(dtype: str) -> None:
    g = GraphBuilder("u")
    x = g.param("x", dtype, (3, 40))
    y = g.param("y", dtype, (2, 7))
    outs = []
    for op in UNARY:
        src = g.unary("abs", x) if op in ("log", "sqrt", "rsqrt") else x
        outs.append(g.unary(op, src))
    outs.append(g.unary("tanh", y))
    tol = {"bf16": 1e-2, "f16": 2e-3}.get(dtype, 3e-6)
    check(g.build(*outs), rtol=tol, atol=tol)


def test_binary_compare_where_broadcast() -> None:
    g = GraphBuilder("b")
    a = g.param("a", "f32", (4, 1, 12))
    b = g.param("b", "f32", (5, 12))
    ia = g.param("ia", "i32", (3, 8))
    ib = g.param("ib", "i32", (8,))
    outs = [g.binary(op, a, b) for op in ("add", "sub", "mul", "div", "max", "min")]
    outs.append(g.binary("pow", g.unary("abs", a), b))
    outs += [g.binary(op, ia, ib) for op in ("add", "sub", "mul", "div", "max", "min", "pow")]
    outs += [g.binary(op, a, b) for op in ("lt", "le", "gt", "ge", "eq")]
    outs.append(g.where(g.binary("gt", a, b), a, b))
    check(g.build(*outs), rtol=1e-5)


def test_casts_iota_full() -> None:
    g = GraphBuilder("c")
    x = g.param("x", "f32", (6, 16))
    i = g.param("i", "i32", (6, 16))
    big = g.binary("mul", x, g.const(1e10))
    outs = [g.cast(big, "i32"), g.cast(i, "f32"), g.cast(x, "bf16"), g.cast(x, "bool")]
    outs += [g.cast(g.cast(x, "bf16"), "f32"), g.cast(g.binary("gt", x, g.const(0.0)), "f32")]
    outs += [
        g.cast(i, "i64"),
        g.binary("add", g.iota("f32", (6, 16), 1), g.full("f32", (6, 16), 0.5)),
    ]
    check(g.build(*outs))


@pytest.mark.parametrize("keep", [False, True])
def test_reductions_rows_and_columns(keep: bool) -> None:
    g = GraphBuilder("r")
    x = g.param("x", "f32", (5, 6, 36))
    i = g.param("i", "i32", (4, 10))
    outs = []
    for op in ("reduce_sum", "reduce_mean", "reduce_max", "reduce_min"):
        outs += [g.reduce(op, x, 2, keep), g.reduce(op, x, 1, keep), g.reduce(op, x, 0, keep)]
    outs.append(g.reduce("reduce_sum", i, 1, keep))
    check(g.build(*outs), rtol=1e-5)


def test_softmax_and_norms_fused() -> None:
    g = GraphBuilder("n")
    x = g.param("x", "f32", (3, 7, 48))
    w = g.param("w", "f32", (48,))
    bias = g.param("bias", "f32", (48,))
    ms = g.reduce("reduce_mean", g.unary("square", x), -1, keepdims=True)
    rms = g.binary(
        "mul", g.binary("div", x, g.unary("sqrt", g.binary("add", ms, g.const(1e-6)))), w
    )
    mu = g.reduce("reduce_mean", x, -1, keepdims=True)
    xc = g.binary("sub", x, mu)
    var = g.reduce("reduce_mean", g.unary("square", xc), -1, keepdims=True)
    ln = g.binary("mul", xc, g.unary("rsqrt", g.binary("add", var, g.const(1e-5))))
    ln = g.binary("add", g.binary("mul", ln, w), bias)
    sm = g.softmax(g.binary("mul", x, g.const(3.0)), -1)
    sm0 = g.softmax(x, 1)
    graph = g.build(rms, ln, sm, g.binary("mul", sm, g.const(2.0)), sm0)
    kinds = [s.kind for s in emulated(graph).steps]
    assert kinds.count("row") >= 3
    check(graph, rtol=1e-5)


def test_views_concat_gather() -> None:
    g = GraphBuilder("v")
    x = g.param("x", "f32", (4, 6, 8))
    t = g.param("t", "f32", (10, 12))
    i = g.param("i", "i32", (2, 3))
    outs = [g.binary("add", g.transpose(x, (2, 0, 1)), g.const(1.0))]
    outs.append(g.unary("neg", g.reshape(g.transpose(x, (1, 0, 2)), (6, 32))))
    outs.append(g.repeat_interleave(g.slice(x, 2, 2, 6), 3, 1))
    outs.append(g.broadcast_to(g.slice(x, 0, 1, 2), (3, 4, 6, 8)))
    outs.append(g.concat([x, g.unary("exp", x)], 2))
    outs.append(g.concat([g.slice(x, 2, 0, 3), g.slice(x, 2, 3, 8)], 2))
    outs.append(g.concat([x, x, x], 0))
    outs.append(g.gather(t, i))
    check(g.build(*outs), rtol=1e-6)


def test_gather_out_of_range_is_reported() -> None:
    g = GraphBuilder("gth")
    t = g.param("t", "f32", (10, 8))
    i = g.param("i", "i32", (5,))
    graph = g.build(g.gather(t, i))
    idx = np.array([1, 2, 10, 3, 0], dtype=np.int32)
    with pytest.raises(IndexError, match="10"):
        run_emulated(graph, np.ones((10, 8), np.float32), idx)


def test_matmuls() -> None:
    g = GraphBuilder("m")
    a = g.param("a", "f32", (2, 1, 5, 7))
    b = g.param("b", "f32", (3, 7, 4))
    w = g.param("w", "f32", (6, 7))
    ia = g.param("ia", "i32", (3, 5))
    ib = g.param("ib", "i32", (5, 4))
    r = g.param("r", "f32", (10, 6))
    outs = [g.matmul(a, b), g.matmul(a, g.transpose(w, (1, 0))), g.matmul(ia, ib)]
    outs.append(g.binary("add", g.matmul(g.reshape(a, (10, 7)), g.transpose(w, (1, 0))), r))
    check(g.build(*outs), rtol=1e-5, atol=1e-5)


def test_attention_gqa() -> None:
    check(attention_graph(2, 8, 32, 4, 2), rtol=1e-4, atol=1e-5)


def test_mlp() -> None:
    check(mlp_graph(2, 4, 32, 64), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("dtype", ["f32", "bf16"])
def test_block(dtype: str) -> None:
    g = block_graph(2, 8, 64, 4, 2, 96, dtype=dtype)
    ins = inputs_for(g, 1)
    got = as_f64(run_emulated(g, *ins)[0], dtype)
    g64 = block_graph(2, 8, 64, 4, 2, 96, dtype="f64")
    ref = evaluate(g64, *(as_f64(x, dtype) for x in ins))[0]
    err = np.linalg.norm(got - ref) / np.linalg.norm(ref)
    assert err < (1e-2 if dtype == "bf16" else 1e-6), err
    if dtype == "bf16":  # no worse than bf16 evaluated op by op (as PyTorch eager does)
        eager = as_f64(evaluate(g, *ins)[0], dtype)
        assert err <= 1.2 * np.linalg.norm(eager - ref) / np.linalg.norm(ref)
