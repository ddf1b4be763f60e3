"""The per-device program (``device_program``): the transformer block's collective steps
(Megatron, data parallel, 2x2), its segments run on every rank (reference evaluator and
compiled host code) against the unsharded block, the GPU segments' PTX, and the queries'
incrementality (docs/sharding.md, "The per-device program")."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
from shard_support import assemble, run_lockstep, run_simulated, shard
from test_shard_propagate import COL, GRID, MEGATRON, ROW, annotated_block

from kinac import pipeline, pipeline_shard
from kinac.artifacts.sharded import Collective, RunSegment
from kinac.pipeline_support import DefnKey, EntryKey
from kinac.session import Session
from kinac.tir.interp import evaluate

SMALL = {"H": 4, "KV": 2, "B": 2, "S": 8, "D": 32, "F": 64}


def program_of(ws: Path, target: str = "cpu", dims: dict[str, int] = SMALL):
    db = Session(ws, no_cache=True).db
    key = EntryKey("block.kina", "block", tuple(sorted(dims.items())), (("T", "f32"),), target)
    graph = pipeline.entry_graph(db, key).graph
    return db, key, graph, pipeline_shard.device_program(db, key)


def traffic(prog) -> list[tuple[str, str]]:
    return [(s.kind, s.axis) for s in prog.steps if isinstance(s, Collective) and s.kind != "slice"]


def run_against_single(
    graph, prog, segments, rng_seed: int = 0, runner=run_lockstep, tol: float = 1e-5
) -> None:
    """Every rank's run (lockstep), assembled, equals the unsharded graph within 1e-5."""
    rng = np.random.default_rng(rng_seed)
    glob = [rng.standard_normal(t.shape).astype(np.float32) * 0.5 for _, t in graph.params]
    want = evaluate(graph, *glob)
    per = [shard(a, lay, prog.mesh, rng) for a, (_, _, lay) in zip(glob, prog.params, strict=True)]
    local = [[p[r] for p in per] for r in range(prog.mesh.size)]
    outs = runner(prog, segments, local)
    got = assemble([o[0] for o in outs], prog.outputs[0][2], prog.mesh)
    np.testing.assert_allclose(got, want[0], rtol=tol, atol=tol)


def reference_segments(prog):
    return [lambda *a, s=s: evaluate(s, *a) for s in prog.segments]


def test_megatron_program_has_two_all_reduces_and_matches(tmp_path: Path) -> None:
    _, _, graph, prog = program_of(annotated_block(tmp_path, MEGATRON))
    assert traffic(prog) == [("all-reduce", "tp")] * 2  # Megatron's count, nothing else moves
    assert [type(s).__name__ for s in prog.steps] == [
        "RunSegment",
        "Collective",
        "RunSegment",
        "Collective",
        "RunSegment",
    ]
    # local shapes: the column-parallel weights hold half their columns
    assert dict((n, t.shape) for n, t, _ in prog.params)["wq"] == (32, 16)
    assert all(t.shape[-1] == 32 for s in prog.segments[:1] for _, t in s.params if t.rank == 3)
    run_against_single(graph, prog, reference_segments(prog))


def test_data_parallel_program_has_no_collective(tmp_path: Path) -> None:
    ws = annotated_block(tmp_path, {"x": "@sharded(axis=0, mesh=tp)"})
    _, _, graph, prog = program_of(ws)
    assert traffic(prog) == [] and len(prog.segments) == 1
    assert prog.outputs[0][2].dims == (("tp",), (), ())
    run_against_single(graph, prog, reference_segments(prog))


def test_two_d_program_reduces_over_tp_only(tmp_path: Path) -> None:
    over = {k: v.replace("mesh=tp", "mesh=grid, over=tp") for k, v in MEGATRON.items()}
    over["x"] = "@sharded(axis=0, mesh=grid, over=dp)"
    _, _, graph, prog = program_of(annotated_block(tmp_path, over, GRID))
    assert traffic(prog) == [("all-reduce", "tp")] * 2
    assert prog.count("all-reduce", "dp") == 0 and prog.mesh.shape == (2, 2)
    run_against_single(graph, prog, reference_segments(prog))


def test_four_devices_two_kv_heads_gather_then_slice(tmp_path: Path) -> None:
    _, _, graph, prog = program_of(annotated_block(tmp_path, MEGATRON, "(mesh tp [4])"))
    assert sorted(traffic(prog)) == [("all-gather", "tp")] * 2 + [("all-reduce", "tp")] * 2
    assert prog.count("slice") == 2
    run_against_single(graph, prog, reference_segments(prog))


def test_segments_compile_for_the_host_and_match(tmp_path: Path) -> None:
    """The same program with its segments compiled by the host path (LLVM)."""
    db, _, graph, prog = program_of(annotated_block(tmp_path, MEGATRON))
    run_against_single(graph, prog, pipeline_shard.host_segments(db, prog), rng_seed=1)
    ran = {n for n, _ in db.events.executed_names(None)}
    assert {"segment_lowered", "segment_object", "host_kernel_object"} <= ran


def test_program_runs_on_the_threaded_simulator(tmp_path: Path) -> None:
    """Every rank in its own thread, collectives through the runtime's communicator."""
    _, _, graph, prog = program_of(annotated_block(tmp_path, MEGATRON, "(mesh tp [4])"))
    run_against_single(graph, prog, reference_segments(prog), rng_seed=2, runner=run_simulated)


@pytest.mark.skipif(shutil.which("ptxas") is None, reason="ptxas not installed")
def test_gpu_segments_are_valid_ptx(tmp_path: Path) -> None:
    """The GPU per-device program: each segment lowered for the GPU, its PTX accepted by
    ptxas for sm_90 (running it on GPUs is the NCCL issue)."""
    db, _, _, prog = program_of(annotated_block(tmp_path, MEGATRON), target="cuda")
    assert prog is not None and traffic(prog) == [("all-reduce", "tp")] * 2
    assert all(t.device.startswith("cuda") for _, t, _ in prog.params)
    for k, (_, ptx) in enumerate(pipeline_shard.gpu_segments(db, prog)):
        f = tmp_path / f"seg{k}.ptx"
        f.write_text(ptx)
        r = subprocess.run(
            ["ptxas", "-arch=sm_90", str(f), "-o", str(tmp_path / f"seg{k}.cubin")],
            capture_output=True,
            text=True,
        )
        assert r.returncode == 0, r.stderr


@pytest.mark.gpu
def test_gpu_per_device_program_runs_and_matches(tmp_path: Path) -> None:
    """The GPU per-device program of the Megatron block, every rank's segments run on the
    one GPU in turn (collectives in lockstep on the host), against the unsharded block."""
    from kinac.rt import cuda

    if not cuda.available():
        pytest.skip("no CUDA GPU")
    from kinac.rt.cuda.entry import load_gpu_entry

    db, _, graph, prog = program_of(annotated_block(tmp_path, MEGATRON), target="cuda")
    loaded = [load_gpu_entry(lo, ptx) for lo, ptx in pipeline_shard.gpu_segments(db, prog)]

    def on_host(fn):
        def call(*arrays):
            got = fn(*arrays)
            outs = got if isinstance(got, tuple) else (got,)
            res = tuple(o if isinstance(o, np.ndarray) else o.numpy() for o in outs)
            return res[0] if len(res) == 1 else res

        return call

    cpu_graph = pipeline.entry_graph(
        db, EntryKey("block.kina", "block", tuple(sorted(SMALL.items())), (("T", "f32"),), "cpu")
    ).graph
    run_against_single(cpu_graph, prog, [on_host(f) for f in loaded], rng_seed=3, tol=1e-4)


def test_annotation_edit_reruns_only_that_entry(tmp_path: Path) -> None:
    """Two entries of two defns; one's annotation changes (split dim 0 -> dim 1): only its
    shard_propagate and device_program re-run, and only the segments that changed are
    lowered again; the other entry's queries are all reused."""
    ws = tmp_path / "w"
    ws.mkdir()
    src = ws / "m.kina"

    def write(axis: int) -> None:
        src.write_text(
            "(mesh tp [2])\n"
            f"(defn f [(x : (tensor f32 [N D] @sharded(axis={axis}, mesh=tp)))] -> "
            "(tensor f32 [N D]) (exp x))\n"
            "(defn g [(x : (tensor f32 [N D] @sharded(axis=0, mesh=tp)))\n"
            "         (w : (tensor f32 [D D]))] -> (tensor f32 [N D]) (matmul x w))\n"
        )

    keys = {n: EntryKey("m.kina", n, (("D", 4), ("N", 4)), (), "cpu") for n in "fg"}

    def build():
        sess = Session(ws)
        progs = {n: pipeline_shard.device_program(sess.db, k) for n, k in keys.items()}
        for p in progs.values():
            pipeline_shard.host_segments(sess.db, p)  # type: ignore[arg-type]
        sess.db.commit()
        return sess, progs

    write(0)
    _, before = build()
    write(1)
    sess, after = build()
    ran = sess.db.events.executed_names(None)
    assert {k for n, k in ran if n == "shard_propagate"} == {keys["f"]}
    assert {k for n, k in ran if n == "device_program"} == {keys["f"]}
    assert {n for n, _ in ran} == {
        *("parse", "file_index", "defn_ast", "signature", "callees", "check_defn"),  # f's edit
        *("entry_graph", "shard_propagate", "device_program"),  # f's entry only
        *("segment_lowered", "segment_object", "host_kernel_llvm", "host_kernel_object"),
    }  # f's new local shapes: its segment and kernel, nothing of g
    assert {k for n, k in ran if n == "check_defn"} == {DefnKey("m.kina", "f")}
    assert {k for n, k in ran if n == "entry_graph"} == {keys["f"]}
    assert {n for n, _ in ran if n.startswith("segment_")} == {"segment_lowered", "segment_object"}
    assert {k for n, k in ran if n == "segment_lowered"} == set(after["f"].segments)
    assert before["g"] == after["g"]
    assert after["f"].params[0][2].dims == ((), ("tp",))


def test_row_parallel_only_gives_one_all_reduce(tmp_path: Path) -> None:
    """Only wo row-parallel: its input (the attention output) is sliced locally, the product
    is all-reduced: one collective with traffic, the annotation's span attached."""
    _, _, graph, prog = program_of(annotated_block(tmp_path, {"wo": ROW, "wq": COL}))
    colls = [s for s in prog.steps if isinstance(s, Collective) and s.kind == "all-reduce"]
    assert len(colls) == 1 and colls[0].span.startswith("block.kina:")
    assert all(isinstance(s, RunSegment | Collective) for s in prog.steps)
    run_against_single(graph, prog, reference_segments(prog))
