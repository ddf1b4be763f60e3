"""Huge shapes are diagnostics before anything is lowered or allocated, never a library error.

Tensors of 2^62 bytes or more (element counts past 2^63, byte sizes numpy refuses, offsets past
i64) are K0806 at specialisation, at the parameter or primitive that makes them. Below that,
lowering is exact: the GPU switches to 64-bit index arithmetic at 2^30 elements, and products
cuBLAS cannot take (32-bit sizes) become generated kernels.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from kinac import cli, pipeline
from kinac.check.limits import MAX_TENSOR_BYTES
from kinac.errors import EXIT_PROGRAM_ERRORS
from kinac.ir.gpu.pipeline import lower_graph_gpu
from kinac.ir.host.pipeline import lower_graph
from kinac.ir.testing import GraphBuilder
from kinac.pipeline_support import EntryKey
from kinac.session import Session

SRC = """\
(defn big [(x : (tensor f32 [N M]))] -> (tensor f32 [N M])
  (add x 1.0))
(defn made [(N : dim) (M : dim)] -> (tensor f32 [N])
  (sum (full f32 [N M] 1.0) :axis 1))
(defn counted [(N : dim)] -> (tensor i64 [N])
  (iota i64 [N] :axis 0))
"""


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory) -> Any:
    root = tmp_path_factory.mktemp("big")
    (root / "big.kina").write_text(SRC)
    return Session(root / "big.kina", no_cache=True).db


@pytest.mark.parametrize(
    ("defn", "dims", "what", "line"),
    [
        ("big", {"N": 2**32, "M": 2**32}, "the parameter `x`", 1),  # 2^64 elements
        ("big", {"N": 10**20, "M": 1}, "the parameter `x`", 1),  # a dim past i64
        ("made", {"N": 2**63 - 1, "M": 2}, "the result of `full`", 4),  # an intermediate
        ("counted", {"N": 2**59}, "the result of `iota`", 6),  # exactly 2^62 bytes
    ],
)
@pytest.mark.parametrize("target", ["cpu", "cuda"])
def test_too_large_is_k0806_at_its_source(
    db: Any, defn: str, dims: dict[str, int], what: str, line: int, target: str
) -> None:
    spec = pipeline.entry_graph(db, EntryKey("big.kina", defn, tuple(dims.items()), (), target))
    assert spec.graph is None
    (d,) = spec.diagnostics
    assert d.code == "K0806" and d.message.startswith(f"{what} is a tensor")
    assert "past kinac's limit of 2^62 bytes" in d.message
    assert str(pipeline.resolve_span(db, d.primary.loc).line) == str(line)  # type: ignore[union-attr]


def test_just_below_the_limit_lowers(db: Any) -> None:
    n = MAX_TENSOR_BYTES // 8 - 1  # i64 elements: the largest tensor allowed
    key = EntryKey("big.kina", "counted", (("N", n),), (), "cpu")
    assert pipeline.entry_graph(db, key).graph is not None
    assert pipeline.lowered(db, key) is not None  # no xDSL overflow on the loop bound


def test_cli_reports_k0806_without_allocating(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "big.kina").write_text(SRC)
    argv = ["run", str(tmp_path / "big.kina"), "big", "--dims", f"N={2**40},M={2**40}"]
    assert cli.main([*argv, "--no-cache"]) == EXIT_PROGRAM_ERRORS
    err = capsys.readouterr().err
    assert "error[K0806]" in err and "Traceback" not in err and "internal" not in err


def test_gpu_index_width_follows_size() -> None:
    def graph(n: int) -> Any:
        b = GraphBuilder("g")
        x = b.param("x", "f32", (n,))
        return b.build(b.binary("add", x, b.const(1.0)))

    small, huge = lower_graph_gpu(graph(1024)), lower_graph_gpu(graph(2**31 + 8))
    assert "zext i32" not in small.llvm_ir  # i32 index arithmetic
    assert "zext i32" in huge.llvm_ir and "i64" in huge.llvm_ir
    assert lower_graph(graph(2**31 + 8)).arena_bytes > 0  # host: i64 throughout


def test_products_past_cublas_sizes_use_a_generated_kernel() -> None:
    b = GraphBuilder("dot")
    a = b.param("a", "f32", (1, 2**31))
    w = b.param("w", "f32", (2**31, 1))
    (step,) = lower_graph_gpu(b.build(b.matmul(a, w))).steps
    assert step.impl == "kernel" and step.gemm is None
    b = GraphBuilder("mm")
    a = b.param("a", "f32", (64, 64))
    (step,) = lower_graph_gpu(b.build(b.matmul(a, a))).steps
    assert step.impl == "cublas"
