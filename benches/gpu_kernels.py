"""Issue 19 on the GPU: an entry's kernels compiled once each and linked into one module,
against the whole-entry module (one function per step) that it replaces, in one run.

# kinac-bench: gpu   (scripts/gpu.sh runs every bench carrying this line, with --gpu)

    PYTHONPATH=. python3 benches/gpu_kernels.py [--gpu] [--out DIR] [--layers 1 32]

The model of ``benches/scaling.py`` (L transformer blocks, each with its own weights, B2 S32
D64, f32) for the cuda target, at each L:

* host CPU: generating and compiling the kernels to PTX the pre-issue-19 way (every step's
  functions in one LLVM module, one PTX) and the new way (each distinct kernel alone, then
  ``link_ptx``): seconds, functions, PTX bytes;
* with ``--gpu``: the CUDA driver's JIT of each module (``cuModuleLoadData``, median of 3
  fresh loads), and the median time per call of the entry (CUDA graph replay) launching the
  per-step functions or the shared ones, with the outputs compared bit for bit.

Writes ``gpu_kernels.md`` / ``gpu_kernels.json`` to ``--out`` (default: print only).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "benches")]

LINES: list[str] = []


def emit(line: str = "") -> None:
    LINES.append(line)
    print(line, flush=True)


def model_graph(layers: int, tmp: Path) -> Any:
    """The concrete graph of ``benches/scaling.py``'s model at ``layers`` layers."""
    import scaling

    from kinac import pipeline
    from kinac.session import Session

    ws = scaling.make_workspace(tmp, layers)
    sess = Session(ws, no_cache=True, target="cuda")
    assert sess.build().error_count == 0
    (key,) = [k for n, k in sess.db.events.executed_names(None) if n == "gpu_lowered"]
    graph = pipeline.entry_graph(sess.db, key).graph
    sess.close()
    return graph


def both_ways(graph: Any) -> dict[str, Any]:
    """The entry lowered and compiled the old way (functions per step, one module) and the
    new way (distinct kernels, compiled alone, linked); times in host CPU seconds."""
    from kinac.codegen.ptx import compile_ptx, link_ptx
    from kinac.ir.gpu.kernel_split import kernel_module, lower_gpu_kernel
    from kinac.ir.gpu.pipeline import assemble_entry, split_graph_gpu
    from kinac.ir.gpu.stitch import SplitEntry

    split = split_graph_gpu(graph)
    t0 = time.process_time()
    codes = {k.symbol: lower_gpu_kernel(k) for k in split.kernels}
    new = assemble_entry(graph, split, codes)
    ptx_new = link_ptx([compile_ptx(kernel_module([c])) for c in codes.values()])
    t_new = time.process_time() - t0

    per_step = SplitEntry(
        [
            dataclasses.replace(p, kernel=dataclasses.replace(p.kernel, symbol=p.step.sym))
            if p.kernel is not None and p.kernel.source == "kina"  # others name themselves
            else p
            for p in split.steps
        ],
        split.arena_bytes,
    )
    t0 = time.process_time()
    codes_old = {k.symbol: lower_gpu_kernel(k) for k in per_step.kernels}
    old = assemble_entry(graph, per_step, codes_old)
    ptx_old = compile_ptx(old.llvm_ir)
    t_old = time.process_time() - t0
    return dict(old=(old, ptx_old, t_old), new=(new, ptx_new, t_new))


def jit_ms(ptx: str, rounds: int = 3) -> float:
    """Median milliseconds of ``cuModuleLoadData`` of ``ptx`` (a fresh module each round)."""
    from kinac.rt.cuda.module import load_module

    ts = []
    for i in range(rounds):
        text = f"{ptx}\n// kinac bench load {time.time_ns()} {i}\n"
        t0 = time.perf_counter()
        load_module(text)
        ts.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(ts)


def call_ms(fn: Any, reps: int = 50, rounds: int = 7) -> float:
    """Median over ``rounds`` of the mean time of ``reps`` back-to-back calls (CUDA events)."""
    import torch

    fn()
    torch.cuda.synchronize()
    ts = []
    for _ in range(rounds):
        e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        e0.record()
        for _ in range(reps):
            fn()
        e1.record()
        e1.synchronize()
        ts.append(e0.elapsed_time(e1) / reps)
    return statistics.median(ts)


def on_gpu(ways: dict[str, Any]) -> dict[str, Any]:
    import torch

    from kinac.codegen.ptx import link_ptx
    from kinac.rt.cuda.entry import load_gpu_entry
    from kinac.rt.cuda.module import load_module

    load_module(link_ptx([]))  # the context and the driver's JIT warmed up
    out: dict[str, Any] = {}
    lw = ways["new"][0]
    gen = torch.Generator(device="cuda").manual_seed(19)
    ins = [
        torch.randn(p.shape, generator=gen, device="cuda", dtype=torch.float32) * 0.1
        for p in lw.params
    ]
    results = {}
    for way, (lo, ptx, _) in ways.items():
        jit = jit_ms(ptx)
        entry = load_gpu_entry(lo, ptx)
        ms = call_ms(lambda e=entry: e(*ins))
        results[way] = torch.from_dlpack(entry(*ins)).clone()
        out[way] = dict(jit_ms=jit, call_ms=ms)
    out["identical"] = bool(torch.equal(results["old"], results["new"]))
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--gpu", action="store_true", help="also load and run (needs a CUDA GPU)")
    ap.add_argument("--out", default=None)
    ap.add_argument("--layers", type=int, nargs="+", default=[1, 32])
    args = ap.parse_args()
    rows: dict[str, Any] = {}
    emit("## GPU kernels as content-addressed artifacts (issue 19)\n")
    emit("| L | way | functions | PTX KB | lower + PTX (CPU s) | JIT load (ms) | ms / call |")
    emit("|---|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory(prefix="kinac-gpu-kernels-") as tmp:
        for n in args.layers:
            ways = both_ways(model_graph(n, Path(tmp) / f"L{n}"))
            gpu = on_gpu(ways) if args.gpu else {}
            for way, (lo, ptx, secs) in ways.items():
                g = gpu.get(way, {})
                row = dict(functions=len(lo.functions), ptx_bytes=len(ptx), cpu_s=secs, **g)
                rows[f"L{n} {way}"] = row
                label = "per step, one module" if way == "old" else "distinct, linked"
                jit = f"{g['jit_ms']:.1f}" if g else "-"
                call = f"{g['call_ms']:.4f}" if g else "-"
                emit(
                    f"| {n} | {label} | {row['functions']} | {len(ptx) / 1024:.0f} | "
                    f"{secs:.2f} | {jit} | {call} |"
                )
            if gpu:
                rows[f"L{n} identical outputs"] = gpu["identical"]
                emit(f"| {n} | outputs bit-identical | {'yes' if gpu['identical'] else 'NO'} |||||")
    if args.out:
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        (out / "gpu_kernels.md").write_text("\n".join(LINES) + "\n")
        (out / "gpu_kernels.json").write_text(json.dumps(rows, indent=1))
    bad = [k for k, v in rows.items() if v is False]
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
