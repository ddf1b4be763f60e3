"""Sharding: propagation + collective insertion time, and the simulated mesh's run time.

    PYTHONPATH=. python3 benches/sharding.py [--layers 32] [--repeat 20]

1. **Propagation + insertion** for the transformer block (``block_small``: B4 S128 D256 H4
   KV2 F704, f32) with Megatron weight annotations on ``(mesh tp [2])``, and for a stack of
   ``--layers`` such blocks (``benches/scaling.py``'s model, B2 S32 D64 H4 KV2 F176, every
   layer's weights annotated): the pure functions the queries run, timed in-process on an
   already specialised graph (median of ``--repeat``): ``plan_entry`` (propagation to a
   fixpoint, choices, planned collectives: ``shard_propagate``'s body) and
   ``device_program`` (local segments cut at each inserted collective: the
   ``device_program`` query's body). Issue 11's goals: 20 ms for one block, 0.5 s for 32
   layers (the design's abandonment trigger: 10 s for one layer).
2. **The simulator**: one call of the block through ``kinac.compile(..., mesh=4)`` (4 threads:
   shard the global inputs, run every rank's segments and collectives, assemble) against the
   single-device ``kinac.compile`` call on the same inputs, after a warm-up call (median).

Prints a markdown table.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benches"))

COL, ROW = "@sharded(axis=1, mesh=tp)", "@sharded(axis=0, mesh=tp)"
MEGATRON = {"wq": COL, "wk": COL, "wv": COL, "wo": ROW, "wg": COL, "wu": COL, "wd": ROW}
BLOCK_DIMS = {"H": 4, "KV": 2, "B": 4, "S": 128, "D": 256, "F": 704}


def median_ms(fn: Callable[[], Any], repeat: int) -> tuple[float, float]:
    """Median wall-clock and CPU (this process, every thread) milliseconds of ``fn()``: on a
    shared machine the CPU time is the steadier of the two."""
    wall, cpu = [], []
    for _ in range(repeat):
        t0, c0 = time.perf_counter(), time.process_time()
        fn()
        wall.append(time.perf_counter() - t0)
        cpu.append(time.process_time() - c0)
    return statistics.median(wall) * 1000, statistics.median(cpu) * 1000


def block_workspace(where: Path, devices: int) -> Path:
    """The transformer workspace with the block's weights annotated (Megatron)."""
    ws = where / f"block{devices}"
    shutil.copytree(
        ROOT / "workspaces" / "transformer", ws, ignore=shutil.ignore_patterns(".kinac-cache")
    )
    src = ws / "block.kina"
    text = src.read_text().replace(
        '(import "ffn.kina")', f'(import "ffn.kina")\n(mesh tp [{devices}])'
    )
    from scaling import WEIGHTS

    for name, shape in WEIGHTS:
        if name in MEGATRON:
            text = text.replace(
                f"({name} : (tensor T {shape}))", f"({name} : (tensor T {shape} {MEGATRON[name]}))"
            )
    src.write_text(text)
    return ws


def stack_workspace(where: Path, layers: int) -> Path:
    """``benches/scaling.py``'s model of ``layers`` blocks, each layer's weights annotated."""
    from scaling import WEIGHTS, make_workspace, model_source

    ws = make_workspace(where, layers)
    text = model_source(layers, edited=False).replace(
        '(import "block.kina")', '(import "block.kina")\n(mesh tp [2])'
    )
    for i in range(layers):
        for name, shape in WEIGHTS:
            if name in MEGATRON:
                old = f"({name}-{i} : (tensor T {shape}))"
                text = text.replace(old, f"({name}-{i} : (tensor T {shape} {MEGATRON[name]}))")
    (ws / "model.kina").write_text(text)
    return ws


def propagation_row(
    label: str, ws: Path, file: str, defn: str, dims: dict[str, int], repeat: int
) -> dict[str, Any]:
    from kinac import pipeline
    from kinac.diag.model import Label
    from kinac.pipeline_support import CheckEnv, DefnKey, EntryKey
    from kinac.session import Session
    from kinac.shard.device import device_program
    from kinac.shard.entry import plan_entry

    db = Session(ws, no_cache=True).db
    key = EntryKey(file, defn, tuple(sorted(dims.items())), (("T", "f32"),), "cpu")
    graph = pipeline.entry_graph(db, key).graph
    assert graph is not None
    sig = pipeline.signature(db, DefnKey(file, defn))
    meshes = CheckEnv(db).meshes(file)
    plan = plan_entry(graph, sig, meshes, file)
    assert not [d for d in plan.diagnostics if d.is_error], plan.diagnostics

    def span_of(label: Label | None) -> str:
        return ""

    prog = device_program(graph, plan, span_of)
    propagate = median_ms(lambda: plan_entry(graph, sig, meshes, file), repeat)
    insert = median_ms(lambda: device_program(graph, plan, span_of), repeat)
    kinds = [s.kind for s in prog.steps if hasattr(s, "kind")]
    return {
        "what": label,
        "nodes": len(graph.nodes),
        "propagate_ms": propagate,
        "insert_ms": insert,
        "all_reduces": kinds.count("all-reduce"),
        "segments": len(prog.segments),
    }


def simulator_row(ws: Path, repeat: int, cache: Path) -> dict[str, Any]:
    import numpy as np

    import kinac

    single = kinac.compile(ws, "block_small", cache_dir=str(cache))
    sharded = kinac.compile(ws, "block_small", mesh=4, cache_dir=str(cache))
    rng = np.random.default_rng(0)
    from kinac import pipeline
    from kinac.pipeline_support import EntryKey

    key = EntryKey("block.kina", "block", tuple(sorted(BLOCK_DIMS.items())), (("T", "f32"),), "cpu")
    graph = pipeline.entry_graph(single.sess.db, key).graph
    single.sess.db.close()
    args = [(rng.standard_normal(t.shape) * 0.1).astype(np.float32) for _, t in graph.params]
    dims = {"H": 4, "KV": 2}
    want = single(*args, **dims)
    got = sharded(*args, **dims)
    err = float(np.abs(got - want).max())
    t_single = median_ms(lambda: single(*args, **dims), repeat)
    waits = []

    def call() -> None:
        sharded(*args, **dims)
        waits.append(sharded.last_log.seconds_in_collectives())

    t_sharded = median_ms(call, repeat)
    return {
        "single_ms": t_single,
        "sim_ms": t_sharded,
        "coll_ms": statistics.median(waits) * 1000,
        "max_err": err,
        "log": sharded.last_log.summary(),
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--layers", type=int, default=32)
    ap.add_argument("--repeat", type=int, default=20)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="kinac-sharding-") as tmp:
        where = Path(tmp)
        rows = [
            propagation_row(
                "block (B4 S128 D256), tp=2",
                block_workspace(where, 2),
                "block.kina",
                "block",
                BLOCK_DIMS,
                args.repeat,
            ),
            propagation_row(
                f"{args.layers}-layer stack (B2 S32 D64), tp=2",
                stack_workspace(where / "stack", args.layers),
                "model.kina",
                "model",
                {"H": 4, "KV": 2, "B": 2, "S": 32, "D": 64, "F": 176},
                max(3, args.repeat // 4),
            ),
        ]
        sim = simulator_row(block_workspace(where, 4), args.repeat, where / "cache")
    print("Wall-clock ms (CPU ms of the process in parentheses), medians.\n")
    print(
        "| program | graph nodes | propagation (plan_entry) | insertion (device_program) "
        "| total | all-reduces | segments |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        (pw, pc), (iw, ic) = r["propagate_ms"], r["insert_ms"]
        print(
            f"| {r['what']} | {r['nodes']} | {pw:.1f} ({pc:.1f}) | {iw:.1f} ({ic:.1f}) "
            f"| {pw + iw:.1f} ({pc + ic:.1f}) | {r['all_reduces']} | {r['segments']} |"
        )
    print()
    print(
        "| block_small (f32), one call | single device | 4 simulated devices (threads) "
        "| of which in collectives (slowest rank, wall) | max abs difference |"
    )
    print("|---|---:|---:|---:|---:|")
    (sw, sc), (mw, mc) = sim["single_ms"], sim["sim_ms"]
    print(
        f"| median of {args.repeat} | {sw:.2f} ({sc:.2f}) | {mw:.2f} ({mc:.2f}) "
        f"| {sim['coll_ms']:.2f} | {sim['max_err']:.1e} |"
    )
    print(f"\nsimulated: {sim['log']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
