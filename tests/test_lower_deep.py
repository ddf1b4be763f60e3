"""Programs as deep as they are long lower without recursion, in time linear in their length.

1,500 chained ``let``\\ s, a chain of 1,500 calls and nested expressions (as deep as the reader
takes) are built from source through the pipeline's queries, run on the host, lowered for the
GPU (PTX, and the host emulation of the GPU kernels) and compared with numpy. Graph-level cases
cover shapes the sources cannot reach: a 1,500-deep nest of shared values, chains of views, and
the two guards that keep LLVM's time linear (fused bodies are split past a cost, entries of
many kernels keep them out of line).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from gpu_support import run_emulated

from kinac import pipeline
from kinac.codegen.ptx import compile_ptx
from kinac.graph_build import compile_graph
from kinac.ir.fuse_kernels import MAX_FUSED_COST
from kinac.ir.gpu.pipeline import lower_graph_gpu
from kinac.ir.host.pipeline import MANY_KERNELS, lower_graph
from kinac.ir.testing import GraphBuilder
from kinac.pipeline_support import EntryKey
from kinac.reader.sexpr import MAX_DEPTH
from kinac.rt.host import load_entry
from kinac.rules import Database
from kinac.session import Session

DEPTH = 1500
VEC = "(tensor f32 [N])"
NEST = min(DEPTH, MAX_DEPTH - 3)  # the reader refuses deeper lists (K0111)


def _sources() -> dict[str, str]:
    lets = " ".join(f"(v{i} (add v{i - 1} 1.0))" for i in range(1, DEPTH + 1))
    calls = [f"(defn f0 [(x : {VEC})] -> {VEC} (add x 1.0))"]
    calls += [f"(defn f{i} [(x : {VEC})] -> {VEC} (add (f{i - 1} x) 0.5))" for i in range(1, DEPTH)]
    nest = "x"
    for i in range(NEST):
        nest = f"(add {nest} 1.0)" if i % 2 else f"(mul {nest} 1.0)"
    return {
        "lets.kina": f"(defn lets [(x : {VEC})] -> {VEC}\n  (let [(v0 x) {lets}] v{DEPTH}))\n",
        "calls.kina": "\n".join(calls) + "\n",
        "nest.kina": f"(defn nest [(x : {VEC})] -> {VEC}\n  {nest})\n",
    }


# entry -> (defn, file, what it adds to x)
ENTRIES = {
    "lets": ("lets", "lets.kina", float(DEPTH)),
    "calls": (f"f{DEPTH - 1}", "calls.kina", 1.0 + 0.5 * (DEPTH - 1)),
    "nest": ("nest", "nest.kina", float(NEST // 2)),
}


@pytest.fixture(scope="module")
def deep_ws(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("deep")
    for name, text in _sources().items():
        (root / name).write_text(text)
    toml = ['[workspace]\nname = "deep"\n']
    for entry, (defn, file, _) in ENTRIES.items():
        toml.append(f'[[entry]]\nname = "{entry}"\ndefn = "{defn}"\nfile = "{file}"\n')
        toml.append("dims = { N = 5 }\n")
    (root / "kina.toml").write_text("".join(toml))
    return root


X = np.linspace(-2.0, 2.0, 5, dtype=np.float32)


@pytest.fixture(scope="module")
def deep_db(deep_ws: Path) -> Database:
    """One session for both targets: the 1,500 defns are checked once."""
    return Session(deep_ws, no_cache=True).db


def _key(entry: str, target: str) -> EntryKey:
    defn, file, _ = ENTRIES[entry]
    return EntryKey(file, defn, (("N", 5),), (), target)


def test_deep_programs_build_and_run_on_the_host(deep_db: Database) -> None:
    report = pipeline.build(deep_db, ())  # what `kinac build` runs
    assert not [d for r in report.files for d in r.diagnostics]
    assert {(e, k) for e, k, _ in report.artifacts} >= {(e, "object") for e in ENTRIES}
    for entry, (_, _, added) in ENTRIES.items():
        key = _key(entry, "cpu")
        run = load_entry(pipeline.lowered(deep_db, key), pipeline.object_code(deep_db, key))  # type: ignore[arg-type]
        np.testing.assert_allclose(np.asarray(run(X)), X + added, rtol=1e-5, err_msg=entry)


def test_deep_programs_lower_for_the_gpu(deep_db: Database) -> None:
    for entry, (_, _, added) in ENTRIES.items():
        key = _key(entry, "cuda")
        ptx = pipeline.ptx(deep_db, key)
        assert ptx is not None and ".entry" in ptx
        (got,) = run_emulated(pipeline.entry_graph(deep_db, key).graph, X)
        np.testing.assert_allclose(got, X + added, rtol=1e-5, err_msg=entry)


def _deep_graph(kind: str, n: int = DEPTH) -> tuple[Any, np.ndarray]:
    """A graph ``n`` ops deep and its expected output on ``X4`` (computed with numpy)."""
    b = GraphBuilder(kind)
    x = b.param("x", "f32", (4, 4))
    v, ref = x, X4.astype(np.float64)
    for i in range(n):
        if kind == "shared":  # every value read twice: no fusion decision may recurse
            f = 0.0 if i % 2 else 2.0  # v * f - v: v, then -v (exact, bounded)
            v = b.binary("add", b.binary("mul", v, b.const(f)), b.unary("neg", v))
            ref = ref * f - ref
        elif kind == "views":  # transposes and reshapes that are no layout: index arithmetic
            v = b.reshape(b.transpose(b.reshape(v, (2, 8)), (1, 0)), (4, 4))
            ref = ref.reshape(2, 8).T.reshape(4, 4)
    v = b.binary("mul", b.unary("neg", v), b.unary("neg", v))  # the chain's end read twice
    return b.build(v), (ref * ref).astype(np.float32)


X4 = np.arange(16, dtype=np.float32).reshape(4, 4) / 8 - 1


@pytest.mark.parametrize("kind", ["shared", "views"])
def test_deep_graphs_run_on_host_and_gpu_emulation(kind: str) -> None:
    graph, want = _deep_graph(kind, 24 if kind == "shared" else DEPTH)
    assert ".entry" in compile_ptx(lower_graph_gpu(graph).llvm_ir, "sm_90")
    got = compile_graph(graph)(X4)
    np.testing.assert_allclose(np.asarray(got), want, rtol=1e-5, atol=1e-6)
    (emu,) = run_emulated(graph, X4)
    np.testing.assert_allclose(emu, want, rtol=1e-5, atol=1e-6)


def test_long_fused_chains_are_split() -> None:
    """A 1,500-op elementwise chain is cut into kernels of bounded cost (LLVM's time on one
    huge loop body grows faster than its size: 46 s for 1,500 tanhs in one kernel)."""
    b = GraphBuilder("tanhs")
    v = b.param("x", "f32", (8,))
    for _ in range(DEPTH):
        v = b.unary("tanh", v)
    lowered = lower_graph(b.build(v))
    per_tanh = 4  # an expensive op's recompute cost
    assert len(lowered.steps) >= DEPTH * per_tanh // MAX_FUSED_COST
    assert len(lowered.steps) <= 2 * DEPTH * per_tanh // MAX_FUSED_COST + 1


def test_many_kernels_stay_out_of_line() -> None:
    """Past MANY_KERNELS kernels, each is ``noinline``: inlined into one function, LLVM's -O3
    time grew quadratically (800 chained matmuls: 39 s, 7 s out of line)."""
    b = GraphBuilder("mm")
    v = b.param("x", "f32", (4, 4))
    w = b.param("w", "f32", (4, 4))
    for _ in range(MANY_KERNELS + 1):
        v = b.matmul(v, w)
    ir = lower_graph(b.build(v)).llvm_ir
    kernels = [ln for ln in ir.splitlines() if ln.startswith('define internal void @"k')]
    assert len(kernels) == MANY_KERNELS + 1
    assert all("noinline" in ln for ln in kernels)
    few = lower_graph(_deep_graph("views", 3)[0]).llvm_ir
    assert "noinline" not in few  # small entries keep LLVM's inlining
