"""The generated small tensor-core GEMM against cuBLAS, in ONE process on one GPU (issue 14).

    PYTHONPATH=. python3 benches/small_gemm_probe.py --out DIR      (a GPU; about a minute)

1. The small bf16 transformer block (B4 S128 D256 H4 KV2) through the public API,
   ``kinac.compile(workspaces/transformer, "block", target="cuda")`` called ``f(H, KV,
   *arrays)`` with torch CUDA tensors, as ``benches/latency_probe.py`` measures it (its method,
   copied): variants ``cublas`` (``KINAC_SMALL_GEMM=0`` while it compiles: today's lowering),
   ``tc`` (``gpu-small-gemm``: 5 kernels, round 1's), ``tc+pdl-nopf`` (the same,
   ``pdl=True``), round 2's: ``tc+pdl+pf`` (the weights prefetched into L2 before the PDL
   wait), ``+early`` (the residual loaded with the tile copies: round 2's
   defaults), then on top of those ``+fold`` (the norm folded into the products), ``+m16``
   (16-row blocks for the 512 x 256 products), ``+fold+m16``,
   ``tc-norm-only`` (``KINAC_SMALL_GEMM=norm``: the norm-prologue kernels, the other products
   cuBLAS), ``tc-alone-only`` (``=alone``: the residual products only), each compiled
   without a disk cache; per call with a sync, pipelined, GPU per call (events, 20 back to
   back), host time; rounds interleaved. Each output against a float64 reference.
2. The crossover: ``[M, K] x [K, K]`` bf16 products with the residual epilogue, a chain of
   16 in one entry (``y <- y @ w + x``: one call's host time is far below its GPU time), its
   entry called directly, cuBLASLt against the generated kernel (the size rule lifted for the
   measurement): GPU time per product (events over 20 back-to-back calls, / 16).

Writes ``small_gemm_probe.md`` and ``small_gemm_probe.json`` to ``--out``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests"), str(ROOT / "benches")]

from latency_probe import sunk_emit  # noqa: E402

LINES: list[str] = []
RES: dict[str, Any] = {}
# round 2 (the kernels' own cost): every variant names each of its switches, so a changed
# default cannot change what a row measures. "tc+pdl-nopf" is round 1's kernels exactly.
_R1 = {"KINAC_SMALL_GEMM_PREFETCH": "0", "KINAC_SMALL_GEMM_EARLY": "0",
       "KINAC_SMALL_GEMM_FOLD": "0", "KINAC_SMALL_GEMM_M16": "0"}  # fmt: skip
_PF0 = {**_R1, "KINAC_SMALL_GEMM_PREFETCH": "1"}
_PF = {**_PF0, "KINAC_SMALL_GEMM_EARLY": "1"}  # round 2's defaults
VARIANTS: dict[str, dict[str, Any]] = {
    "cublas": {"pdl": False, "env": "0"},
    "tc": {"pdl": False, "env": "1", "more": _R1},
    "tc+pdl-nopf": {"pdl": True, "env": "1", "more": _R1},
    "tc+pdl+pf": {"pdl": True, "env": "1", "more": _PF0},
    "tc+pdl+pf+early": {"pdl": True, "env": "1", "more": _PF},
    "tc+pdl+pf+early+fold": {"pdl": True, "env": "1", "more": {**_PF, "KINAC_SMALL_GEMM_FOLD": "1"}},
    "tc+pdl+pf+early+m16": {"pdl": True, "env": "1", "more": {**_PF, "KINAC_SMALL_GEMM_M16": "1"}},
    "tc+pdl+pf+early+fold+m16": {"pdl": True, "env": "1",
                           "more": {**_PF, "KINAC_SMALL_GEMM_FOLD": "1", "KINAC_SMALL_GEMM_M16": "1"}},
    "tc-norm-only": {"pdl": False, "env": "norm", "more": _R1},
    "tc-alone-only": {"pdl": False, "env": "alone", "more": _R1},
}  # fmt: skip
SIZES = [(256, 256), (512, 256), (1024, 256), (512, 512), (1024, 512), (2048, 512),
         (4096, 512), (2048, 768), (4096, 768)]  # (M, N = K)  # fmt: skip
CHAIN = 16  # products per entry call: y <- y @ w + x, so the GPU, not the host, sets the pace


SINK: list[Callable[[str], None]] = []  # benches/gpu.py's own emit (small_gemm_ab)
emit = sunk_emit(LINES, SINK)


def small_gemm_ab(emit_to: Any, results: dict[str, Any]) -> None:
    """``benches/gpu.py``'s section: the block's round-1 kernels (``tc+pdl-nopf``) against
    round 2's variants (prefetch, fold, m16), fewer rounds, and two crossover sizes."""
    import torch

    SINK[:] = [emit_to]
    RES.clear()
    results["small_gemm_ab"] = RES
    saved_v, saved_s = dict(VARIANTS), list(SIZES)
    try:
        emit("\n## Small products: the generated tensor-core GEMM, round 1 against round 2's variants (benches/small_gemm_probe.py, short)\n")  # fmt: skip
        # round 2's variants against round 1's kernels (cuBLAS and the crossover: round 1's
        # runs, docs/measurements/small_gemm_2026-12-02d.md), the section kept short: gpu.py
        # runs under a time cap and this section is its last
        for k in ("cublas", "tc", "tc-norm-only", "tc-alone-only"):
            VARIANTS.pop(k, None)
        SIZES[:] = [(512, 256), (512, 512)]
        block_part(torch, 5, 100)
        crossover(torch)
    finally:
        VARIANTS.clear()
        VARIANTS.update(saved_v)
        SIZES[:] = saved_s
        SINK.clear()


def build(torch: Any, ins: list[Any], h: int, kv: int) -> dict[str, dict[str, Any]]:
    import kinac

    out: dict[str, dict[str, Any]] = {}
    for name, opts in VARIANTS.items():
        try:
            os.environ["KINAC_SMALL_GEMM"] = opts["env"]
            for ek in _R1:
                os.environ.pop(ek, None)
            os.environ.update(opts.get("more", {}))
            t0 = time.perf_counter()
            f = kinac.compile(ROOT / "workspaces/transformer", "block", target="cuda",
                              pdl=opts["pdl"], no_cache=True)  # fmt: skip
            y = torch.from_dlpack(f(h, kv, *ins)).clone()
            torch.cuda.synchronize()
            first = time.perf_counter() - t0
            steps = []
            try:
                entry = next(iter(f._entries.values()))
                for s in entry.lowered.steps:  # what runs: a line per step
                    notes = "; ".join(x.note for x in s.launches)
                    steps.append(f"{s.sym} {s.impl} {notes}".rstrip())
            except Exception as ex:  # noqa: BLE001 - a diagnostic only
                steps.append(f"(steps not read: {ex!r})")
            out[name] = {"f": f, "y": y, "first_call_s": first, "steps": steps}
        except Exception:  # noqa: BLE001 - report and go on
            emit(f"variant {name} failed:\n```\n{traceback.format_exc()}```")
    for ek in ("KINAC_SMALL_GEMM", *_R1):
        os.environ.pop(ek, None)
    return out


def block_part(torch: Any, rounds: int, n: int) -> None:
    from gpu_refs import SMALL, block_inputs, block_torch, causal_mask, rel_l2
    from latency_probe import events_us, host_us, pipelined_us, sync_each_us

    h, kv = SMALL["h"], SMALL["kv"]
    ins = block_inputs(SMALL, torch.bfloat16)
    vs = build(torch, ins, h, kv)
    ref = block_torch(*(t.double() for t in ins), h, kv, causal_mask(SMALL["s"], torch.float64, "cuda"))  # type: ignore[call-arg]  # fmt: skip
    emit("## The small bf16 block through kinac.compile\n")
    emit("| variant | first call (s) | rel L2 vs f64 | bit-identical to cublas | to tc+pdl-nopf (round 1) | steps |")  # fmt: skip
    emit("|---|---|---|---|---|---|")
    r1 = vs.get("tc+pdl-nopf")
    for name, v in vs.items():
        same = "-" if "cublas" not in vs else bool(torch.equal(v["y"], vs["cublas"]["y"]))
        same1 = "-" if r1 is None else bool(torch.equal(v["y"], r1["y"]))
        v["err"] = rel_l2(v["y"], ref)
        emit(f"| {name} | {v['first_call_s']:.2f} | {v['err']:.2e} | {same} | {same1} | {len(v['steps'])}: {'; '.join(v['steps'])} |")  # fmt: skip
    RES["variants"] = {k: {"err": v["err"], "first_call_s": v["first_call_s"], "steps": v["steps"]} for k, v in vs.items()}  # fmt: skip
    sync = torch.cuda.synchronize
    cols = ("sync_us", "pipe_us", "events_us", "host_us")
    samples: dict[str, dict[str, list[float]]] = {k: {c: [] for c in cols} for k in vs}
    calls = {k: (lambda f=v["f"]: f(h, kv, *ins)) for k, v in vs.items()}
    for c in calls.values():
        sync_each_us(c, sync, 50)
    for _ in range(rounds):
        for name, call in calls.items():
            s = samples[name]
            s["sync_us"].append(sync_each_us(call, sync, n))
            s["pipe_us"].append(pipelined_us(call, sync, n))
            s["events_us"].append(events_us(torch, call))
            s["host_us"].append(statistics.median(host_us(call, sync) for _ in range(5)))
    emit("\n## Per call (us; median of rounds, variants interleaved)\n")
    emit("| variant | per call with torch.cuda.synchronize() | pipelined | GPU per call (events, 20 back to back) | host time of the call (burst) | sync min..max |")  # fmt: skip
    emit("|---|---|---|---|---|---|")
    med = {}
    for name, s in samples.items():
        m = med[name] = {c: statistics.median(x) for c, x in s.items()}
        emit(f"| {name} | {m['sync_us']:.1f} | {m['pipe_us']:.1f} | {m['events_us']:.1f} | {m['host_us']:.2f} | {min(s['sync_us']):.1f}..{max(s['sync_us']):.1f} |")  # fmt: skip
    RES["per_call"] = med
    RES["samples"] = samples
    per_kernel(vs, ins)


def per_kernel(vs: dict[str, dict[str, Any]], ins: list[Any]) -> None:
    """Each variant's steps, each replayed alone (``GpuEntry.profile``: 20 runs in a CUDA
    graph, no neighbour to overlap): which kernel a variant made cheaper."""
    emit("\n## Per kernel (us; each step replayed alone, 20 times in a CUDA graph; median of 3)\n")
    rows: dict[str, list[float]] = {}
    for name, v in vs.items():
        try:
            entry = next(iter(v["f"]._entries.values()))
            runs = [[t * 1000 for _, t in entry.profile(*ins)] for _ in range(3)]
            rows[name] = [statistics.median(x) for x in zip(*runs, strict=True)]
        except Exception as ex:  # noqa: BLE001 - a diagnostic only
            emit(f"{name}: not profiled ({type(ex).__name__}: {ex})")
    if not rows:
        return
    width = max(len(r) for r in rows.values())
    emit("| variant | " + " | ".join(f"step {i}" for i in range(width)) + " | sum |")
    emit("|---|" + "---|" * (width + 1))
    for name, r in rows.items():
        emit(f"| {name} | " + " | ".join(f"{x:.2f}" for x in r) + f" | {sum(r):.1f} |")
    RES["per_kernel_us"] = rows


def crossover(torch: Any) -> None:
    from kinac.codegen.ptx import compile_ptx
    from kinac.ir.gpu import small_gemm_rule
    from kinac.ir.gpu.pipeline import lower_graph_gpu
    from kinac.ir.testing import GraphBuilder
    from kinac.rt.cuda.entry import load_gpu_entry

    emit(
        f"\n## Crossover: bf16 products with a residual, {CHAIN} chained in one entry (GPU us per product)\n"
    )
    emit(
        "| M x N x K | GFLOP | cuBLASLt | generated (tc) | tc / cuBLASLt | tc launch | max abs diff (chain output) |"
    )
    emit("|---|---|---|---|---|---|---|")
    old = small_gemm_rule.SMALL_FLOPS, small_gemm_rule.ALONE_FLOPS
    small_gemm_rule.SMALL_FLOPS = small_gemm_rule.ALONE_FLOPS = 2**40
    RES["crossover"] = []
    try:
        for m, k in SIZES:
            nn = k
            g = GraphBuilder("chain")
            x = g.param("x", "bf16", (m, k))
            w = g.param("w", "bf16", (k, k))
            y = x
            for _ in range(CHAIN):
                y = g.binary("add", x, g.matmul(y, w))
            graph = g.build(y)
            xt = torch.randn(m, k, device="cuda").bfloat16()
            wt = (torch.randn(k, nn, device="cuda") / k**0.5 / 2).bfloat16()
            row: dict[str, Any] = {"m": m, "n": nn, "k": k}
            outs = {}
            for env in ("0", "1"):
                os.environ["KINAC_SMALL_GEMM"] = env
                try:
                    lw = lower_graph_gpu(graph)
                    e = load_gpu_entry(lw, compile_ptx(lw.llvm_ir))
                    call = lambda e=e, xt=xt, wt=wt: e(xt, wt)  # noqa: E731
                    for _ in range(5):
                        call()
                    torch.cuda.synchronize()
                    e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)  # fmt: skip
                    ts = []
                    for _ in range(5):
                        e0.record()
                        for _ in range(20):
                            call()
                        e1.record()
                        e1.synchronize()
                        ts.append(e0.elapsed_time(e1) / 20 / CHAIN * 1e3)
                    row["tc" if env == "1" else "cublas"] = statistics.median(ts)
                    outs[env] = torch.from_dlpack(call()).float()
                    if env == "1":
                        row["launch"] = (
                            lw.steps[0].launches[0].note if lw.steps[0].launches else "cublas"
                        )
                except Exception as ex:  # noqa: BLE001
                    row["tc" if env == "1" else "cublas"] = float("nan")
                    row["error"] = f"{type(ex).__name__}: {ex}"
            diff = float((outs["0"] - outs["1"]).abs().max()) if len(outs) == 2 else float("nan")
            row["diff"] = diff
            RES["crossover"].append(row)
            emit(f"| {m}x{nn}x{k} | {2 * m * nn * k / 1e9:.3f} | {row.get('cublas', float('nan')):.1f} | {row.get('tc', float('nan')):.1f} | "
                 f"{row.get('tc', float('nan')) / row.get('cublas', float('nan')):.2f} | {row.get('launch', row.get('error', ''))} | {diff:.3g} |")  # fmt: skip
    finally:
        small_gemm_rule.SMALL_FLOPS, small_gemm_rule.ALONE_FLOPS = old
        os.environ.pop("KINAC_SMALL_GEMM", None)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=str(ROOT / "gpu-out"))
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--n", type=int, default=200)
    ap.add_argument("--skip-block", action="store_true")
    a = ap.parse_args()
    import torch
    from latency_probe import report_writer

    write = report_writer(a.out, "small_gemm_probe", LINES, RES)

    emit("# benches/small_gemm_probe.py: the generated small tensor-core GEMM against cuBLAS\n")
    emit(f"{torch.cuda.get_device_name()}, torch {torch.__version__}, {time.strftime('%Y-%m-%d %H:%M:%S UTC', time.gmtime())}\n")  # fmt: skip
    try:
        if not a.skip_block:
            block_part(torch, a.rounds, a.n)
        write()
        crossover(torch)
    except Exception:  # noqa: BLE001
        emit(f"```\n{traceback.format_exc()}```")
    write()
    return 0


if __name__ == "__main__":
    sys.exit(main())
