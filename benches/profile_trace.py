"""``kinac profile`` on the 45M transformer block with ``--trace``, and the trace validated.

# kinac-bench: gpu   (scripts/gpu.sh runs every bench carrying this line, with --gpu)

Issue 17, "must show": ``kinac profile`` run as a user runs it (the CLI, in a subprocess) on
the 45M block (B4 S1024 D2048 H16 KV4 F5632, bf16, ``--target cuda``), its table printed (for
``docs/gpu.md``), and the trace file it writes checked:

* schema: ``{"traceEvents": [...], "displayTimeUnit": ...}``; every event ``ph`` ``X`` (with
  name, cat, numeric ts/dur >= 0, int pid/tid) or ``M`` ``thread_name``; every track named;
* every kernel present: the ``kernel`` events of each call are the entry's steps, in order
  (the steps read from the same entry loaded in this process);
* kernels inside their call's ``entry`` event;
* the kernels' durations sum to the graph's time within 5%: the whole entry replayed as its
  CUDA graph, timed with CUDA events in this process (a measurement the profile did not make).

Without ``--gpu`` it checks the same on the host target with the small block (the validator's
own check; no GPU needed). Writes ``profile_trace.md``/``.json`` and the trace to ``--out``.

    PYTHONPATH=. python3 benches/profile_trace.py [--gpu] [--out DIR]
"""

from __future__ import annotations

import argparse
import datetime
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

BIG = {"H": 16, "KV": 4, "B": 4, "S": 1024, "D": 2048, "F": 5632}
SMALL = {"H": 4, "KV": 2, "B": 4, "S": 128, "D": 256, "F": 704}
TOLERANCE = 0.05


def validate(
    doc: Any, steps: list[str], graph_ms: float | None
) -> tuple[list[str], dict[str, Any]]:
    """Problems with trace ``doc`` (empty: valid) and what was measured from it."""
    problems: list[str] = []
    if not isinstance(doc, dict) or not isinstance(doc.get("traceEvents"), list):
        return ["not a trace: no traceEvents list"], {}
    if doc.get("displayTimeUnit") not in ("ms", "ns"):
        problems.append(f"displayTimeUnit {doc.get('displayTimeUnit')!r}")
    named: set[tuple[Any, Any]] = set()
    xs = []
    for i, e in enumerate(doc["traceEvents"]):
        ph = e.get("ph") if isinstance(e, dict) else None
        if ph == "M":
            kind = e.get("name")
            if kind not in ("thread_name", "process_name") or not isinstance(
                e.get("args", {}).get("name"), str
            ):
                problems.append(f"event {i}: a metadata event that names no thread or process")
            if kind == "thread_name":
                named.add((e.get("pid"), e.get("tid")))
            continue
        if ph != "X":
            problems.append(f"event {i}: ph {ph!r} (X or M expected)")
            continue
        ok = isinstance(e.get("name"), str) and isinstance(e.get("cat"), str)
        ok &= all(isinstance(e.get(k), int | float) and e[k] >= 0 for k in ("ts", "dur"))
        ok &= all(isinstance(e.get(k), int) for k in ("pid", "tid"))
        if not ok:
            problems.append(f"event {i}: missing or bad name/cat/ts/dur/pid/tid: {e}")
            continue
        xs.append(e)
    for e in xs:
        if (e["pid"], e["tid"]) not in named:
            problems.append(f"track pid {e['pid']} tid {e['tid']} has no thread_name")
            break
    entries = [e for e in xs if e["cat"] == "entry"]
    kernels = [e for e in xs if e["cat"] == "kernel"]
    if not entries:
        problems.append("no entry event")
    calls: list[list[dict[str, Any]]] = []
    for ent in entries:
        lo, hi = ent["ts"], ent["ts"] + ent["dur"]
        inside = [k for k in kernels if k["tid"] == ent["tid"] and lo - 1e-3 <= k["ts"] and k["ts"] + k["dur"] <= hi + 1e-3]  # fmt: skip
        calls.append(sorted(inside, key=lambda k: k["ts"]))
    for n, call in enumerate(calls):
        names = [k["name"] for k in call]
        if names != steps:
            missing = [s for s in steps if s not in names]
            problems.append(f"call {n}: kernels {len(names)} of {len(steps)} steps, in order: "
                            f"{names == steps}; missing {missing[:5]}")  # fmt: skip
    if sum(len(c) for c in calls) != len(kernels):
        problems.append("kernel events outside every entry event")
    per_call = [sum(k["dur"] for k in c) / 1e3 for c in calls]  # us -> ms
    stats: dict[str, Any] = {"events": len(doc["traceEvents"]), "calls": len(calls),
                             "kernels_per_call": len(steps)}  # fmt: skip
    if per_call:
        stats["kernel_ms_sum"] = statistics.median(per_call)
    if graph_ms is not None and per_call:
        dev = abs(stats["kernel_ms_sum"] - graph_ms) / graph_ms
        stats.update(graph_ms=graph_ms, deviation=dev)
        if dev > TOLERANCE:
            problems.append(f"kernel durations sum to {stats['kernel_ms_sum']:.4f} ms, the graph "
                            f"takes {graph_ms:.4f} ms: {100 * dev:.1f}% apart (> 5%)")  # fmt: skip
    return problems, stats


def markdown(doc: dict[str, Any], steps: list[str]) -> str:
    """The first call's kernels as a markdown table (for docs/gpu.md)."""
    kernels = [e for e in doc["traceEvents"] if e.get("cat") == "kernel"][: len(steps)]
    total = sum(k["dur"] for k in kernels) or 1.0
    lines = ["| # | kernel | kind | launch | ms | share |", "|---|---|---|---|---|---|"]
    for i, k in enumerate(kernels):
        a = k.get("args", {})
        lines.append(f"| {i} | {k['name']} | {a.get('kind', '')} | {a.get('launch', '')} | "
                     f"{k['dur'] / 1e3:.4f} | {100 * k['dur'] / total:.1f}% |")  # fmt: skip
    return "\n".join(lines) + "\n"


def graph_time(target: str, dims: dict[str, int], cache: Path) -> tuple[list[str], float]:
    """The entry's steps and its whole-call time in this process: the CUDA graph replayed
    (events) on the GPU, the native call on the host."""
    import numpy as np

    import kinac

    fn = kinac.compile(
        ROOT / "workspaces/transformer", "block", target=target, cache_dir=str(cache)
    )
    dt = "bfloat16" if target == "cuda" else "float32"
    import torch
    from gpu_refs import block_inputs

    low = {k.lower(): v for k, v in dims.items()}
    ins = block_inputs(low, getattr(torch, dt), "cuda" if target == "cuda" else "cpu")
    if target == "cpu":
        ins = [t.numpy() for t in ins]
    fn(dims["H"], dims["KV"], *ins)
    entry = next(iter(fn._entries.values()))
    steps = [s.sym for s in entry.lowered.steps]
    if target == "cuda":
        from kinac.rt import cuda

        s = cuda.Stream.null()
        e0, e1 = cuda.Event(), cuda.Event()
        reps, ts = 20, []
        for _ in range(3):
            entry(*ins)
        for _ in range(5):
            e0.record(s)
            for _ in range(reps):
                entry(*ins)
            e1.record(s)
            e1.synchronize()
            ts.append(e0.elapsed_ms(e1) / reps)
        return steps, statistics.median(ts)
    walls = []
    for _ in range(7):
        t0 = time.perf_counter()
        entry(*ins)
        walls.append((time.perf_counter() - t0) * 1e3)
    return steps, float(np.median(walls))


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--gpu", action="store_true", help="the 45M block on CUDA (else the host)")
    ap.add_argument("--out", default=".")
    ap.add_argument("--quick", action="store_true")
    a = ap.parse_args()
    target, dims, dtypes = "cpu", SMALL, "T=f32"
    if a.gpu:
        from kinac.rt import cuda

        if not cuda.available():
            print(f"profile_trace: no GPU ({cuda.unavailable_reason()}); nothing to do")
            return 0
        target, dims, dtypes = "cuda", BIG, "T=bf16"
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    trace = out / f"profile_trace_{target}.json"
    cache = out / "profile_trace_cache"
    cmd = [sys.executable, "-m", "kinac", "profile", str(ROOT / "workspaces/transformer"), "block",
           "--target", target, "--dims", ",".join(f"{k}={v}" for k, v in dims.items()),
           "--dtypes", dtypes, "--trace", str(trace), "--repeat", "10", "--cache-dir", str(cache)]  # fmt: skip
    print("$", " ".join(cmd[1:]), flush=True)
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, check=False)
    print(proc.stdout + proc.stderr, flush=True)
    if proc.returncode != 0:
        print(f"kinac profile failed (exit {proc.returncode})")
        return 1
    cli_s = time.perf_counter() - t0
    steps, graph_ms = graph_time(target, dims, cache)
    doc = json.loads(trace.read_text())
    # the host trace's entry events are timed around each call by the profiler itself; the
    # graph-time check is the GPU's (there the entry event is the sum of separate step timings)
    problems, stats = validate(doc, steps, graph_ms if target == "cuda" else None)
    stamp = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
    what = "45M block bf16 (B4 S1024 D2048 H16 KV4 F5632)" if target == "cuda" else "small block f32 (host)"  # fmt: skip
    md = f"## kinac profile, {what}, target {target} ({stamp})\n\n" + markdown(doc, steps)
    md += (f"\nTrace {trace.name}: {stats.get('events')} events, {stats.get('calls')} call(s), "
           f"{len(steps)} kernels per call; kernels sum to {stats.get('kernel_ms_sum', 0):.4f} ms")  # fmt: skip
    if "graph_ms" in stats:
        md += f"; whole graph {stats['graph_ms']:.4f} ms ({100 * stats['deviation']:.1f}% apart, goal <= 5%)"  # fmt: skip
    md += f"\nValidator: {'PASS' if not problems else 'FAIL: ' + '; '.join(problems)}\n"
    md += f"(kinac profile CLI, build included: {cli_s:.1f} s)\n"
    print(md)
    (out / "profile_trace.md").write_text(md, encoding="utf-8")
    payload = {"date": stamp, "target": target, "stats": stats, "problems": problems}
    (out / "profile_trace.json").write_text(json.dumps(payload, indent=1), encoding="utf-8")
    return 1 if problems else 0


if __name__ == "__main__":
    raise SystemExit(main())
