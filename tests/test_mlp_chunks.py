"""``gpu-chunk-mlp`` on the CPU (issue 14): the rule, the IR after the pass (golden), the
chunked lowering run by the GPU emulator against the unchunked one, and what is left whole."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from goldens import compare
from gpu_support import run_emulated

from kinac.ir.from_graph import graph_to_module
from kinac.ir.fuse_kernels import FuseKernels
from kinac.ir.gpu import mlp_chunks_rule as rule
from kinac.ir.gpu.fuse_epilogues import GpuFuseEpilogues
from kinac.ir.gpu.mlp_chunks import GpuChunkMlp
from kinac.ir.gpu.pipeline import one_device, print_ir
from kinac.ir.gpu.select_impl import GpuSelectImpl
from kinac.ir.gpu.split_reduce import GpuSplitReductions
from kinac.ir.testing import GraphBuilder, rms_norm
from kinac.tir.graph import Graph

GOLDEN = Path(__file__).parent / "golden" / "lower" / "mlp_chunks"


def mlp(lead: tuple[int, ...], d: int, f: int, dt: str = "bf16", residual: bool = True) -> Graph:
    """``x + (silu(n @ wg) * (n @ wu)) @ wd``, ``n = rms_norm(x, wn)`` (the block's FFN half)."""
    g = GraphBuilder("mlp")
    x = g.param("x", dt, (*lead, d))
    wn = g.param("wn", dt, (d,))
    wg, wu, wd = g.param("wg", dt, (d, f)), g.param("wu", dt, (d, f)), g.param("wd", dt, (f, d))
    n = rms_norm(g, x, wn)
    down = g.matmul(g.binary("mul", g.unary("silu", g.matmul(n, wg)), g.matmul(n, wu)), wd)
    return g.build(g.binary("add", x, down) if residual else down)


def after_pass(graph: Graph) -> str:
    """The IR after ``gpu-chunk-mlp`` (the passes before it, then it)."""
    from xdsl.context import Context

    m = graph_to_module(one_device(graph))
    for p in (GpuSelectImpl, GpuSplitReductions, FuseKernels, GpuFuseEpilogues, GpuChunkMlp):
        p().apply(Context(), m)
        m.verify()
    return print_ir(m)


def test_rule_chunks_the_45m_mlp_in_four_and_leaves_the_rest() -> None:
    assert rule.mlp_chunks(4096, 5632, 2, "bf16") == 4  # 92 MB of gate+up -> 4 x 23 MB
    assert rule.mlp_chunks(4096, 5632, 2, "f16") == 4
    assert rule.mlp_chunks(8192, 5632, 2, "bf16") == 8
    assert rule.mlp_chunks(4096, 5632, 4, "f32") == 1  # f32: not chunked
    assert rule.mlp_chunks(2048, 5632, 2, "bf16") == 1  # 46 MB: under MIN_BYTES
    assert rule.mlp_chunks(4095, 5632, 2, "bf16") == 1  # no even split
    assert rule.mlp_chunks(512, 2**16, 2, "bf16") == 1  # chunks would be under MIN_ROWS
    assert rule.slice_axis((4, 1024), 1024) == (0, 1)  # B4 S1024: one batch a chunk
    assert rule.slice_axis((1, 4096), 1024) == (1, 1024)  # B1 S4096: along S
    assert rule.slice_axis((4096,), 1024) == (0, 1024)
    assert rule.slice_axis((2, 2048), 1024) == (1, 1024) or rule.slice_axis((2, 2048), 1024) is None  # fmt: skip
    assert rule.slice_axis((3, 1000), 1024) is None


def test_ir_after_the_pass_golden() -> None:
    text = after_pass(mlp((4096,), 2048, 5632))
    compare(GOLDEN / "mlp_4096_bf16.mlir", text)
    assert text.count('kind = "matmul"') == 12 and text.count('kind = "concat"') == 1
    assert text.count("kina.slice") == 4 * 2 + 4  # gate and up per chunk, residual per chunk
    assert "epilogue" not in text  # the residual moved into the concat


def test_b1_s4096_slices_along_s_and_f32_stays_whole() -> None:
    text = after_pass(mlp((1, 4096), 2048, 5632))
    assert text.count('kind = "concat"') == 1 and "axis = 1 : i64, start = 3072" in text
    assert 'kind = "concat"' not in after_pass(mlp((1, 4096), 2048, 5632, "f32"))
    assert 'kind = "concat"' not in after_pass(mlp((1, 1024), 2048, 5632))


@pytest.fixture
def small_rule(monkeypatch: pytest.MonkeyPatch) -> None:
    """The rule at toy sizes (4 chunks of 8 rows), products on cuBLAS (emulated here)."""
    monkeypatch.setattr(rule, "MIN_BYTES", 1)
    monkeypatch.setattr(rule, "CHUNK_BYTES", 8 * 48 * 2 * 2)
    monkeypatch.setattr(rule, "MIN_ROWS", 8)
    monkeypatch.setenv("KINAC_SMALL_GEMM", "0")


def _inputs(lead: tuple[int, ...], d: int, f: int) -> list[np.ndarray]:
    from kinac.tir.interp import f32_to_bf16

    rng = np.random.default_rng(0)
    shapes = [(*lead, d), (d,), (d, f), (d, f), (f, d)]
    xs = [rng.standard_normal(s).astype(np.float32) for s in shapes]
    xs[1] = 1.0 + 0.1 * xs[1]
    xs[2:] = [w / np.sqrt(w.shape[0]) for w in xs[2:]]
    return [f32_to_bf16(x) for x in xs]


@pytest.mark.parametrize("lead", [(32,), (4, 8), (1, 32)])
@pytest.mark.parametrize("residual", [True, False])
def test_chunked_lowering_equals_the_whole_on_the_emulator(
    small_rule: None, monkeypatch: pytest.MonkeyPatch, lead: tuple[int, ...], residual: bool
) -> None:
    from kinac.ir.gpu import pipeline as gp
    from kinac.tir.interp import bf16_to_f32

    graph = mlp(lead, 16, 48, residual=residual)
    ins = _inputs(lead, 16, 48)
    assert 'kind = "concat"' in after_pass(graph)
    on = tuple(p for p in gp.GPU_PASSES if p is not GpuChunkMlp)
    at = on.index(GpuFuseEpilogues) + 1
    monkeypatch.setattr(gp, "GPU_PASSES", on)
    (whole,) = run_emulated(graph, *ins)
    monkeypatch.setattr(gp, "GPU_PASSES", (*on[:at], GpuChunkMlp, *on[at:]))
    lw = gp.lower_graph_gpu(graph)
    assert [s.kind for s in lw.steps].count("concat") == 1 and len(lw.steps) == 1 + 4 * 3 + 1
    (chunked,) = run_emulated(graph, *ins)
    a, b = bf16_to_f32(whole).astype(np.float64), bf16_to_f32(chunked).astype(np.float64)
    assert np.isfinite(a).all() and np.isfinite(b).all()
    if residual:  # the epilogue rounds once, the concat after the product's rounding: an ulp
        np.testing.assert_allclose(b, a, rtol=2**-7, atol=2**-7 * np.abs(a).max())
        assert np.mean(a == b) > 0.5
    else:  # the same products row by row: bit-identical
        np.testing.assert_array_equal(chunked, whole)


def test_left_whole_when_the_map_result_has_another_reader(small_rule: None) -> None:
    g = GraphBuilder("two_readers")
    x = g.param("x", "bf16", (32, 16))
    wg, wu, wd = g.param("wg", "bf16", (16, 48)), g.param("wu", "bf16", (16, 48)), g.param("wd", "bf16", (48, 16))  # fmt: skip
    h = g.binary("mul", g.unary("silu", g.matmul(x, wg)), g.matmul(x, wu))
    graph = g.build(g.matmul(h, wd), g.reduce("reduce_sum", h, 1))
    assert 'kind = "concat"' not in after_pass(graph)
    g2 = GraphBuilder("other_left")
    x, y = g2.param("x", "bf16", (32, 16)), g2.param("y", "bf16", (32, 16))
    wg, wu, wd = g2.param("wg", "bf16", (16, 48)), g2.param("wu", "bf16", (16, 48)), g2.param("wd", "bf16", (48, 16))  # fmt: skip
    h = g2.binary("mul", g2.unary("silu", g2.matmul(x, wg)), g2.matmul(y, wu))  # two left operands
    assert 'kind = "concat"' not in after_pass(g2.build(g2.matmul(h, wd)))
