"""Golden IR text after every lowering pass, for a few small graphs.

Each graph has a directory under ``tests/golden/lower/``, one file per stage (``00-graph.mlir``
... ``07-llvm-ir.ll``). A change in what a pass emits shows up as a readable diff here. To
accept intended changes: ``python3 -m pytest --update-goldens tests/test_lower_golden.py`` (a
missing or stale stage file fails otherwise).
"""

from __future__ import annotations

from pathlib import Path

import goldens
import pytest

from kinac.ir import lower_stages
from kinac.ir.testing import GraphBuilder, attention_graph, mlp_graph
from kinac.tir.graph import Graph

GOLDEN = Path(__file__).parent / "golden" / "lower"


def embed_graph() -> Graph:
    """bf16 embedding lookup, concat, mean and a cast: legalisation, gather checks, reduce."""
    g = GraphBuilder("embed")
    table = g.param("table", "bf16", (10, 4))
    ids = g.param("ids", "i32", (2, 3))
    e = g.gather(table, ids)
    both = g.concat([e, g.unary("neg", e)], 2)
    m = g.reduce("reduce_mean", g.unary("exp", both), -1, keepdims=False)
    return g.build(g.cast(m, "f32"))


GRAPHS = {
    "mlp": lambda: mlp_graph(2, 8, 16, 32),
    "attention": lambda: attention_graph(1, 16, 32, 2, 1),
    "embed": embed_graph,
}


def _stage_file(i: int, stage: str) -> str:
    return f"{i:02d}-{stage}.{'ll' if stage == 'llvm-ir' else 'mlir'}"


@pytest.mark.parametrize("name", sorted(GRAPHS))
def test_golden_ir_per_pass(name: str) -> None:
    stages = lower_stages(GRAPHS[name]())
    d = GOLDEN / name
    files = [_stage_file(i, stage) for i, stage in enumerate(stages)]
    if goldens.updating() and d.is_dir():
        for stale in set(p.name for p in d.iterdir()) - set(files):
            (d / stale).unlink()
    for file, (stage, text) in zip(files, stages.items(), strict=True):
        goldens.compare(d / file, text, f"{name}: IR after {stage}")
    on_disk = sorted(p.name for p in d.iterdir())
    assert on_disk == sorted(files), f"{name}: stages changed ({goldens.HOW})"


def test_choices_are_visible_in_the_ir() -> None:
    """Library vs in-house per matmul, fused kernels, and BLAS calls on views."""
    s = lower_stages(GRAPHS["attention"]())
    assert "kina.matmul" in s["select-impl"] and 'impl = "blas"' in s["select-impl"]
    fused = s["fuse-kernels"]
    # q/k/v proj, qk^T, softmax, pv (writing [B, S, H*Dh]: the head merge folded in by
    # kinac/ir/host/gemm_out.py), out
    assert fused.count('"kina.kernel"') == 7
    assert 'kind = "softmax"' in fused and "kina.iota" in fused  # the mask is fused
    loops = s["kina-to-loops"]
    assert loops.count("kbuf.gemm") >= 5 and "trans_b = 1" in loops  # k^T read in place
    assert 'call ccc void @"kinac_sgemm"' in s["llvm-ir"]
    tiny = lower_stages(mlp_graph(1, 2, 4, 8))["select-impl"]
    assert 'impl = "loops"' in tiny and 'impl = "blas"' not in tiny


def test_large_kernels_are_launched_in_chunks() -> None:
    """Map, softmax and row-reduction kernels split their outer loop over the thread pool."""
    from kinac.ir.testing import block_graph

    stages = lower_stages(block_graph(4, 128, 256, 4, 2, 704))
    loops = stages["kina-to-loops"]
    launched = {
        line.split("kbuf.launch ")[1].split("(")[0]
        for line in loops.splitlines()
        if "kbuf.launch" in line
    }
    # k1_map: the RMSNorm's row reduction fused in (kinac/ir/host/row_fuse.py)
    assert {'"k1_map"', '"k6_softmax"', '"k15_map"'} <= launched
    assert "func.call @k2_matmul" in loops  # BLAS kernels are called once (BLAS splits itself)
    assert "kinac_parallel" in stages["llvm-ir"]
