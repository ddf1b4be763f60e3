"""GPU tests of the CUDA back end (skipped without a CUDA device and PyTorch with CUDA).

Every primitive against PyTorch on random shapes (f32, bf16, ints), the MLP within 1e-5 of
PyTorch, the transformer block at both sizes against a float64 reference, zero-copy DLPack in
and out, CUDA graph replay, runtime errors, placement and ``kinac run --target cuda``.
"""

from __future__ import annotations

import functools
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from gpu_refs import (
    BIG,
    SMALL,
    block_inputs,
    block_torch,
    causal_mask,
    max_rel,
    mlp_inputs,
    mlp_torch,
    rel_l2,
)
from host_support import assert_close, randn, torch_eval

from kinac.codegen.ptx import compile_ptx
from kinac.ir.gpu.pipeline import lower_graph_gpu
from kinac.ir.testing import GraphBuilder, block_graph
from kinac.rt import cuda
from kinac.rt.cuda.entry import GpuEntry, KinaGpuError, load_gpu_entry
from kinac.tir.graph import Graph

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(
        not (cuda.available() and torch.cuda.is_available()), reason="no CUDA GPU with PyTorch"
    ),
]

ROOT = Path(__file__).resolve().parent.parent
OUT = Path(os.environ.get("OUT", ROOT / "gpu-out"))


@pytest.fixture(autouse=True, scope="module")
def _no_tf32() -> Any:
    old = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = False
    yield
    torch.backends.cuda.matmul.allow_tf32 = old


@functools.cache
def entry(graph: Graph, **opts: Any) -> GpuEntry:
    lw = lower_graph_gpu(graph)
    return load_gpu_entry(lw, compile_ptx(lw.llvm_ir), **opts)


def host(t: Any) -> np.ndarray:
    return t if isinstance(t, np.ndarray) else t.numpy()


def run_gpu(graph: Graph, *inputs: np.ndarray) -> tuple[np.ndarray, ...]:
    out = entry(graph)(*inputs)
    return tuple(host(o) for o in (out if isinstance(out, tuple) else (out,)))


def compare(graph: Graph, inputs: list[np.ndarray], rtol: float, atol: float) -> None:
    got = run_gpu(graph, *inputs)
    want = torch_eval(graph, *inputs)
    for j, (a, b) in enumerate(zip(got, want, strict=True)):
        node = graph.nodes[graph.outputs[j]]
        try:
            assert_close(a, b, node.type.dtype, rtol, atol)
        except AssertionError as e:
            raise AssertionError(f"output {j} ({node.op} {node.type}): {e}") from None


def rshape(rng: np.random.Generator, rank: int) -> tuple[int, ...]:
    dims = [int(rng.integers(1, 9)) for _ in range(rank - 1)]
    return (*dims, int(rng.choice([1, 3, 8, 37, 64, 200, 256, 700])))


@pytest.mark.parametrize(
    ("dtype", "seed"), [("f32", 0), ("f32", 1), ("bf16", 0), ("bf16", 1), ("f16", 2)]
)
def test_float_primitives_vs_torch(dtype: str, seed: int) -> None:
    rng = np.random.default_rng(seed)
    s = rshape(rng, 3)
    g = GraphBuilder(f"prims_{dtype}_{seed}")
    x = g.param("x", dtype, s)
    y = g.param("y", dtype, (s[-2], s[-1]))
    row = g.param("row", dtype, (s[-1],))
    t = g.param("t", dtype, (17, s[-1]))
    i = g.param("i", "i32", (s[0], 3))
    k = int(rng.integers(1, 40))
    a = g.param("a", dtype, (s[0], 1, 5, k))
    b = g.param("b", dtype, (3, k, 6))
    ax = g.unary("abs", x)
    outs = [g.unary(op, x) for op in ("neg", "exp", "tanh", "sigmoid", "relu", "gelu", "silu")]
    outs += [g.unary(op, ax) for op in ("log", "sqrt", "rsqrt", "recip", "square", "abs")]
    outs += [g.binary(op, x, y) for op in ("add", "sub", "mul", "div", "max", "min")]
    outs += [g.binary("pow", g.binary("add", ax, g.const(0.5, dtype)), g.const(1.5, dtype))]
    outs += [g.binary(op, x, row) for op in ("lt", "le", "gt", "ge", "eq")]
    outs += [g.where(g.binary("gt", x, y), x, row)]
    outs += [g.cast(x, "i32"), g.cast(g.cast(x, "f32" if dtype == "bf16" else "bf16"), dtype)]
    for op in ("reduce_sum", "reduce_mean", "reduce_max", "reduce_min"):
        outs += [g.reduce(op, x, 2, True), g.reduce(op, x, 1, False), g.reduce(op, x, 0, False)]
    outs += [g.softmax(x, 2), g.softmax(x, 0)]
    outs += [g.binary("add", g.transpose(x, (2, 0, 1)), g.const(1.0, dtype))]
    outs += [g.repeat_interleave(g.slice(x, 1, 0, 1), 2, 0), g.concat([x, ax], 2)]
    outs += [g.concat([x, x], 0), g.gather(t, i), g.broadcast_to(row, (2, *s))]
    outs += [g.binary("add", g.iota(dtype, s, 1), g.full(dtype, s, 0.25))]
    outs += [
        g.matmul(a, b),
        g.matmul(x, g.transpose(y, (1, 0))),
        g.matmul(g.transpose(x, (0, 2, 1)), y),
    ]
    graph = g.build(*outs)
    ins = [randn(rng, p.shape, p.dtype) for _, p in graph.params]
    ins[4] = rng.integers(0, 17, size=(s[0], 3)).astype(np.int32)
    tol = {"bf16": (1.6e-2, 2e-2), "f16": (4e-3, 4e-3)}.get(dtype, (2e-5, 2e-5))
    compare(graph, ins, *tol)


def test_integer_primitives_vs_torch() -> None:
    rng = np.random.default_rng(3)
    g = GraphBuilder("ints")
    a = g.param("a", "i32", (6, 40))
    b = g.param("b", "i32", (40,))
    m = g.param("m", "i64", (5, 7))
    outs = [g.binary(op, a, b) for op in ("add", "sub", "mul", "div", "max", "min")]
    outs += [g.unary(op, a) for op in ("neg", "abs", "relu", "square")]
    outs += [g.reduce("reduce_sum", a, 1), g.reduce("reduce_max", a, 0, True)]
    outs += [g.matmul(m, g.transpose(m, (1, 0))), g.cast(a, "f32"), g.binary("lt", a, b)]
    graph = g.build(*outs)
    ins = [randn(rng, p.shape, p.dtype) for _, p in graph.params]
    ins[1] = np.where(ins[1] == 0, 3, ins[1]).astype(np.int32)  # PyTorch raises on x // 0
    compare(graph, ins, 0, 0)


def test_mlp_within_1e5_of_pytorch() -> None:
    import kinac

    fn = kinac.compile(ROOT / "workspaces/mlp", "mlp", target="cuda")
    ins = mlp_inputs(torch.float32)
    out = torch.from_dlpack(fn(*ins))
    ref = mlp_torch(*ins)
    assert max_rel(out, ref) < 1e-5 and rel_l2(out, ref) < 1e-5


@pytest.mark.parametrize("dtype", ["f32", "bf16"])
@pytest.mark.parametrize("size", ["small", "45M"])
def test_block_against_float64(dtype: str, size: str) -> None:
    dims = SMALL if size == "small" else BIG
    tdt = torch.float32 if dtype == "f32" else torch.bfloat16
    g = block_graph(dims["b"], dims["s"], dims["d"], dims["h"], dims["kv"], dims["f"], dtype)
    ins = block_inputs(dims, tdt)
    out = torch.from_dlpack(entry(g)(*ins))
    ref = block_torch(*(t.double() for t in ins), dims["h"], dims["kv"],  # type: ignore[call-arg]
                      causal_mask(dims["s"], torch.float64, "cuda"))  # fmt: skip
    err = rel_l2(out, ref)
    assert err < (1e-2 if dtype == "bf16" else 1e-3), err


def test_zero_copy_in_and_out_and_graph_replay() -> None:
    import kinac

    fn = kinac.compile(ROOT / "workspaces/transformer", "block_small", target="cuda")
    ins = block_inputs(SMALL, torch.float32)
    outs = [fn(4, 2, *ins) for _ in range(12)]  # every output kept: staged after 3 addresses
    ent = next(iter(fn._entries.values()))
    assert isinstance(ent, GpuEntry)
    assert ent.captures == 3 and all(g.captured for _, _, g in ent._bound.values() if g)
    assert ent.volatile == {len(ins)}  # the output; the inputs stay bound in place
    t_in, _, _ = ent.prepare(*ins)
    assert [t.ptr for t in t_in] == [x.data_ptr() for x in ins]  # inputs used in place
    o = outs[-1]
    assert torch.from_dlpack(o).data_ptr() == o.ptr  # output taken without a copy
    first = torch.from_dlpack(outs[0])
    assert all(torch.equal(first, torch.from_dlpack(x)) for x in outs[1:])
    ref = block_torch(*ins, 4, 2, causal_mask(128, torch.float32, "cuda"))  # type: ignore[call-arg]
    assert rel_l2(first, ref) < 1e-4
    graphed = entry(block_graph())(*ins)
    eager = entry(block_graph(), graphs=False)(*ins)
    assert torch.equal(torch.from_dlpack(eager), torch.from_dlpack(graphed))


def test_gather_out_of_range_raises() -> None:
    g = GraphBuilder("gth")
    t = g.param("t", "f32", (10, 8))
    i = g.param("i", "i32", (5,))
    graph = g.build(g.gather(t, i))
    idx = np.array([1, 2, 10, 3, 0], dtype=np.int32)
    with pytest.raises(KinaGpuError, match="index 10 at position \\[2\\]"):
        entry(graph)(np.ones((10, 8), np.float32), idx)
    ok = entry(graph)(np.ones((10, 8), np.float32), idx % 10)
    assert host(ok).shape == (5, 8)


def test_host_placement_copies() -> None:
    g = GraphBuilder("place")
    x = g.param("x", "f32", (4, 8))
    graph = g.build(g.to_device(g.unary("exp", x), "cpu"))
    out = entry(graph)(np.zeros((4, 8), np.float32))
    assert isinstance(out, np.ndarray) and np.allclose(out, 1.0)


def test_kinac_run_target_cuda() -> None:
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
    }
    p = subprocess.run(
        [sys.executable, "-m", "kinac", "run", str(ROOT / "workspaces/transformer"), "block_small",
         "--target", "cuda", "--repeat", "3", "--no-cache"],
        capture_output=True, text=True, env=env, timeout=300,
    )  # fmt: skip
    assert p.returncode == 0, p.stdout + p.stderr
    assert "target cuda" in p.stdout and "finite True" in p.stdout
