"""The headline rows of ``benches/gpu.py`` (issue 14): transformer blocks through the public API.

Every kinac figure here is a user's call: ``kinac.compile(workspaces/transformer, "block",
target="cuda")`` on the Kina source, called ``f(H, KV, *arrays)`` with torch CUDA tensors, as
a user calls it. Two timings per workload, wall clock on the host:

* **per call (sync)**: each call followed by ``torch.cuda.synchronize()`` (latency of one call);
* **pipelined**: ``n`` calls, one sync at the end, divided by ``n`` (throughput).

The small rows (issue 14's latency goal) are timed in a steady state: after 1 s of calls of every
candidate (:func:`warm_up`; the former first-measured figure is kept as ``kinac_cold_sync_ms``),
and the first of them with kinac and eager timed before ``torch.compile`` first runs in the
process (after it every Python call of the process costs more; kinac is timed again after it,
``kinac_after_compile_sync_ms``). The table's note under the rows says which applied.

Against, in the same process: PyTorch eager (the block written with SDPA, causal and GQA), and
the best PyTorch: the same SDPA block under ``torch.compile(mode="reduce-overhead")`` (CUDA
graphs). The ratio is against the better of the two PyTorch figures per column. Each result
is checked against a float64 reference (rel L2). Not a module ``scripts/gpu.sh`` runs alone (no
bench marker): ``benches/gpu.py`` calls :func:`api_blocks`.
"""

from __future__ import annotations

import math
import statistics
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from gpu_refs import BIG, SMALL, block_inputs, block_torch, causal_mask, rel_l2

ROOT = Path(__file__).resolve().parent.parent
LONG = {**BIG, "b": 1, "s": 4096}  # the 45M block's weights at S = 4096

# (name, dims, dtype, goals): goals name the column and the bound, as the issue states them
WORKLOADS: list[tuple[str, dict[str, int], str, dict[str, Any]]] = [
    ("small B4 S128 D256 bf16", SMALL, "bf16", {"sync_ms": 0.03}),
    ("45M B4 S1024 D2048 bf16", BIG, "bf16", {"pipe_ms": 0.62, "pipe_ratio": 0.8}),
    ("long B1 S4096 D2048 bf16", LONG, "bf16", {"pipe_ratio": 0.8}),
    ("small B4 S128 D256 f32", SMALL, "f32", {}),
    ("45M B4 S1024 D2048 f32", BIG, "f32", {}),
]


def block_sdpa(x: Any, wn1: Any, wq: Any, wk: Any, wv: Any, wo: Any, wn2: Any, wg: Any, wu: Any, wd: Any, h: int, kv: int) -> Any:  # fmt: skip
    """The block as a PyTorch user writes it for speed: SDPA (causal, GQA without copies)."""
    import torch
    import torch.nn.functional as F

    b, s, d = x.shape
    dh = d // h

    def rms(t: Any, w: Any) -> Any:
        return t * torch.rsqrt(torch.mean(t * t, dim=-1, keepdim=True) + 1e-6) * w

    n = rms(x, wn1)
    q = (n @ wq).view(b, s, h, dh).transpose(1, 2)
    k = (n @ wk).view(b, s, kv, dh).transpose(1, 2)
    v = (n @ wv).view(b, s, kv, dh).transpose(1, 2)
    o = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
    hid = x + o.transpose(1, 2).reshape(b, s, d) @ wo
    n2 = rms(hid, wn2)
    return hid + (F.silu(n2 @ wg) * (n2 @ wu)) @ wd


def wall_ms(fn: Callable[[], Any], n: int, sync_each: bool, rounds: int = 5) -> float:
    """Host wall time per call (ms): a sync after each call, or ``n`` calls then one sync
    (pipelined); median of ``rounds``."""
    import torch

    fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(rounds):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
            if sync_each:
                torch.cuda.synchronize()
        torch.cuda.synchronize()
        times.append((time.perf_counter() - t0) * 1e3 / n)
    return statistics.median(times)


WARM_S = 1.0  # the small rows' warm-up (seconds of calls), as the GEMM tuner's timing
_COMPILED: list[str] = []  # rows that ran torch.compile in this process so far


def warm_up(fns: dict[str, Callable[[], Any]], seconds: float) -> float:
    """Calls of every function in turn (10 each, then a sync) for ``seconds``: the small
    block's rows were measured first in the process, on a GPU whose clocks were still ramping
    (0.0418 ms per synced call at 07:35 against ~0.036 in the latency probe later in the same
    process, same code). Returns the seconds spent."""
    import torch

    t0 = time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        for fn in fns.values():
            for _ in range(10):
                fn()
            torch.cuda.synchronize()
    return time.perf_counter() - t0


def _reps(ms: float) -> int:
    """Calls per timing round: about 30 ms of GPU work, between 5 and 200 calls."""
    return max(5, min(200, int(30 / max(ms, 0.01))))


def measure(name: str, dims: dict[str, int], dt: str, goals: dict[str, Any], quick: bool) -> dict[str, Any]:  # fmt: skip
    """One workload: kinac through the API, eager SDPA, reduce-overhead SDPA; errors."""
    import torch

    import kinac

    tdt = {"bf16": torch.bfloat16, "f32": torch.float32}[dt]
    h, kv = dims["h"], dims["kv"]
    ins = block_inputs(dims, tdt)
    row: dict[str, Any] = {"workload": name, "dtype": dt}
    t0 = time.perf_counter()
    f = kinac.compile(ROOT / "workspaces/transformer", "block", target="cuda")
    got = torch.from_dlpack(f(h, kv, *ins))
    torch.cuda.synchronize()
    row["kinac_first_call_s"] = time.perf_counter() - t0
    ref64 = block_torch(*(t.double() for t in ins), h, kv, causal_mask(dims["s"], torch.float64, "cuda"))  # fmt: skip
    row["kinac_err"] = rel_l2(got, ref64)
    eager = lambda i=ins: block_sdpa(*i, h, kv)  # noqa: E731
    row["eager_err"] = rel_l2(eager(), ref64)
    row["tol"] = 1e-2 if dt == "bf16" else 1e-3
    del got, ref64
    call = lambda i=ins: f(h, kv, *i)  # noqa: E731  (the user's call: dims positional)
    n = _reps(wall_ms(call, 3, False, 1))
    fns: dict[str, Callable[[], Any]] = {"kinac": call, "eager": eager}

    def timed(which: dict[str, Callable[[], Any]]) -> None:
        for who, fn in which.items():
            row[f"{who}_sync_ms"] = wall_ms(fn, n, True)
            row[f"{who}_pipe_ms"] = wall_ms(fn, n, False)

    # issue 14's latency goal, the small rows: in a steady state (warm_up), and the first row
    # of the process before torch.compile has run in it: after it, every Python call of the
    # process costs more (H200, 10:23 UTC: kinac's synced call 27.8 -> 37.2 us, its host time
    # 6.1 -> 16.1, torch.cuda.synchronize() idle 4.2 -> 9.5; docs/gpu.md, "Latency of a small
    # call"); kinac is also timed after it (kinac_after_compile_sync_ms)
    small, clean = dims is SMALL, not _COMPILED
    if small:
        row["kinac_cold_sync_ms"] = wall_ms(call, n, True)  # (the order before: clocks ramping)
        row["warm_s"] = warm_up(fns, WARM_S)
        if clean:
            timed(fns)
            row["before_compile"] = True
    big_f32 = dt == "f32" and dims["s"] * dims["d"] >= BIG["s"] * BIG["d"]
    if not (quick and big_f32):  # compute-bound at 8 ms a call: CUDA graphs cannot help it
        try:
            t0 = time.perf_counter()
            _COMPILED.append(name)
            ro = torch.compile(lambda *a: block_sdpa(*a, h, kv), mode="reduce-overhead")
            for _ in range(3):
                ro(*ins)
            torch.cuda.synchronize()
            row["compile_s"] = time.perf_counter() - t0
            fns["reduce_overhead"] = lambda i=ins, g=ro: g(*i)
        except Exception as e:  # noqa: BLE001 - reported in the row, the rest still measured
            row["compile_error"] = f"{type(e).__name__}: {e}"[:300]
    if small and clean:
        rest = {k: v for k, v in fns.items() if k == "reduce_overhead"}
        warm_up({"kinac": call, **rest}, WARM_S)
        timed(rest)
        row["kinac_after_compile_sync_ms"] = wall_ms(call, n, True)
    else:
        if small:
            warm_up(fns, WARM_S)
        timed(fns)
    for col in ("sync", "pipe"):
        best = min(row.get(f"{w}_{col}_ms", math.inf) for w in ("eager", "reduce_overhead"))
        row[f"best_torch_{col}_ms"] = best
        row[f"{col}_ratio"] = row[f"kinac_{col}_ms"] / best
    entry = next(iter(f._entries.values()))
    row["hot_calls"] = f.hot_calls
    row["graph_launches"] = getattr(entry, "replays", None)
    if dt == "bf16" and dims["s"] >= 1024:
        try:  # after the headline timings; a failure here leaves the row as measured
            row.update(inside(entry, call, ins))
        except Exception as e:  # noqa: BLE001
            row["inside_error"] = f"{type(e).__name__}: {e}"[:300]
    row["goals"] = goals
    row["met"] = {
        k: (row[f"{k.split('_')[0]}_ratio"] if k.endswith("_ratio") else row[f"kinac_{k}"]) <= v
        for k, v in goals.items()
    }
    return row


def inside(entry: Any, call: Callable[[], Any], ins: list[Any]) -> dict[str, Any]:
    """What the API's entry runs (issue 14: whole entry against the sum of its steps): the
    nodes of its CUDA graph, each step replayed alone (the kernel table of ``benches/gpu.py``,
    for the variant this entry built: the tuned attention), and the whole call timed with CUDA
    events back to back, as that table times its entries."""
    import torch

    graphs = [g for _, _, g in entry._bound.values() if g is not None]
    nodes = graphs[-1].nodes() if graphs else []
    # how the grouped GEMMs were issued once bound to the caller's addresses (kinac.rt.cuda.blas)
    forms = list(getattr(entry.blas, "bound_forms", ()))
    steps = []
    for s, t in entry.profile(*ins):
        how = (f"{s.gemm.mode} b={s.gemm.batch} {s.gemm.m}x{s.gemm.n}x{s.gemm.k}"
               + (f" +{s.gemm.epilogue}" if s.gemm.epilogue else "")) if s.gemm else \
            "; ".join(f"{ln.grid}x{ln.block} {ln.note}" for ln in s.launches)  # fmt: skip
        steps.append({"step": s.sym, "kind": s.kind, "how": how, "us": t * 1000,
                      "mb": s.bytes_moved / 1e6})  # fmt: skip
    call()
    torch.cuda.synchronize()
    ts = []
    state: list[str] = []
    probe = threading.Thread(target=lambda: state.append(gpu_state()))
    probe.start()  # samples the GPU while the calls below keep it busy
    for _ in range(7):
        e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        e0.record()
        for _ in range(20):
            call()
        e1.record()
        e1.synchronize()
        ts.append(e0.elapsed_time(e1) / 20)
    t_end = time.perf_counter() + 3.0
    while probe.is_alive() and time.perf_counter() < t_end:  # busy until it has sampled
        for _ in range(20):
            call()
        torch.cuda.synchronize()
    probe.join()
    return {"graph_nodes": nodes, "steps": steps, "kinac_events_ms": statistics.median(ts),
            "gpu_state": state[0] if state else "", "bound_forms": forms}  # fmt: skip


def gpu_state() -> str:
    """SM clock, power, temperature and the active clock-event reasons (power or thermal
    capping) now, from nvidia-smi: whether a sustained run is throttled, which timing each
    kernel alone does not see."""
    import subprocess

    for reasons in ("clocks_event_reasons.active", "clocks_throttle_reasons.active"):
        q = f"clocks.sm,power.draw,temperature.gpu,{reasons}"
        try:
            r = subprocess.run(["nvidia-smi", f"--query-gpu={q}", "--format=csv,noheader"],
                               capture_output=True, text=True, timeout=10)  # fmt: skip
        except (OSError, subprocess.SubprocessError) as e:
            return f"nvidia-smi: {e}"
        if r.returncode == 0:
            return r.stdout.strip().splitlines()[0] if r.stdout.strip() else ""
    return "nvidia-smi: " + r.stderr.strip()[:200]


def render_inside(rows: list[dict[str, Any]]) -> list[str]:
    """Per API workload with :func:`inside`'s figures: steps, graph nodes, whole vs sum."""
    lines: list[str] = []
    for r in rows:
        if "inside_error" in r:
            lines.append(f"\nInside the API entry of {r['workload']}: failed ({r['inside_error']})")
        if "steps" not in r:
            continue
        total = sum(s["us"] for s in r["steps"])
        lines += [f"\n### Inside the API entry of {r['workload']}\n",
                  f"Sum of steps (each replayed alone) {total / 1000:.4f} ms; whole call (CUDA "
                  f"events, 20 back to back) {r['kinac_events_ms']:.4f} ms; pipelined wall "
                  f"{r['kinac_pipe_ms']:.4f} ms.\n",
                  "| step | kind | launch / call | time (us) | MB moved |", "|---|---|---|---|---|"]  # fmt: skip
        lines += [f"| {s['step']} | {s['kind']} | {s['how']} | {s['us']:.1f} | {s['mb']:.1f} |"
                  for s in r["steps"]]  # fmt: skip
        lines.append(f"\nCUDA graph nodes ({len(r['graph_nodes'])} lines): "
                     + "; ".join(r["graph_nodes"]))  # fmt: skip
        lines.append("\nGrouped GEMMs as bound (each binding, in step order; strided: one "
                     "stride per operand at the caller's addresses): "
                     + (", ".join(r.get("bound_forms", [])) or "-"))  # fmt: skip
        lines.append(f"\nGPU during the timed calls (SM MHz, W, C, clock-event reasons): "
                     f"{r.get('gpu_state', '')}")  # fmt: skip
    return lines


def _goal_text(row: dict[str, Any]) -> str:
    parts = []
    for k, v in row["goals"].items():
        col = "sync" if k.startswith("sync") else "pipelined"
        what = f"{col} <= {v:g} x best PyTorch" if k.endswith("_ratio") else f"{col} <= {v:g} ms"
        parts.append(f"{what}: {'met' if row['met'][k] else 'NOT met'}")
    return "; ".join(parts) or "-"


def render(rows: list[dict[str, Any]]) -> list[str]:
    lines = [
        "| block | kinac per call (sync) | best PyTorch (sync) | ratio | kinac pipelined | best PyTorch (pipelined) | ratio | eager SDPA sync / pipelined | reduce-overhead sync / pipelined | error (rel L2 vs f64) | goal |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]  # fmt: skip
    for r in rows:
        ro = (
            f"{r['reduce_overhead_sync_ms']:.4f} / {r['reduce_overhead_pipe_ms']:.4f}"
            if "reduce_overhead_sync_ms" in r
            else "not run" + (f" ({r['compile_error']})" if "compile_error" in r else "")
        )
        ok = "" if r["kinac_err"] < r["tol"] else " (ABOVE the bound)"
        lines.append(
            f"| {r['workload']} | {r['kinac_sync_ms']:.4f} | {r['best_torch_sync_ms']:.4f} | {r['sync_ratio']:.2f}x "
            f"| {r['kinac_pipe_ms']:.4f} | {r['best_torch_pipe_ms']:.4f} | {r['pipe_ratio']:.2f}x "
            f"| {r['eager_sync_ms']:.4f} / {r['eager_pipe_ms']:.4f} | {ro} "
            f"| {r['kinac_err']:.2e} (eager {r['eager_err']:.2e}; < {r['tol']:g}){ok} | {_goal_text(r)} |"
        )  # fmt: skip
    return lines


def api_blocks(emit: Callable[[str], None], results: dict[str, Any], quick: bool) -> None:
    """Measure every workload (each in its own try: one failure does not hide the others)."""

    emit("\n## Transformer blocks through the public API (headline)\n")
    emit(
        "`kinac.compile(workspaces/transformer, \"block\", target=\"cuda\")` on the Kina source, "
        "called `f(H, KV, *arrays)` with torch CUDA tensors; wall clock per call with a sync "
        "after each call, and pipelined (n calls, one sync). Best PyTorch: the better of the "
        "SDPA block eager and under `torch.compile(mode=\"reduce-overhead\")`, same process"
        + (" (--quick: not compiled for the 45M f32 block, compute-bound)" if quick else "")
        + ".\n"
    )  # fmt: skip
    results["api_blocks"] = api_blocks_rows(emit, WORKLOADS, quick)


def api_blocks_rows(
    emit: Callable[[str], None],
    workloads: list[tuple[str, dict[str, int], str, dict[str, Any]]],
    quick: bool,
) -> list[dict[str, Any]]:
    """Measure ``workloads`` (each in its own try: one failure does not hide the others) and
    emit their tables; ``benches/latency_probe.py --headline`` runs the small bf16 row alone."""
    import traceback

    rows: list[dict[str, Any]] = []
    for name, dims, dt, goals in workloads:
        try:
            rows.append(measure(name, dims, dt, goals, quick))
        except Exception:  # noqa: BLE001
            emit(f"\n**{name} failed:**\n```\n{traceback.format_exc()[-2000:]}\n```")
    for line in render(rows):
        emit(line)
    for r in rows:
        if "kinac_cold_sync_ms" in r:
            clean = r.get("before_compile", False)
            emit(
                f"\n{r['workload']}: every column measured after {r['warm_s']:.1f} s of calls (warm-up: the "
                f"GPU's clocks up)"
                + ("; kinac and eager before torch.compile first ran in this process, reduce-overhead "
                   f"after it; kinac per call (sync) after it too: {r['kinac_after_compile_sync_ms']:.4f} ms "
                   "(torch.compile makes every Python call of the process dearer: docs/gpu.md, "
                   "\"Latency of a small call\")" if clean else "")
                + f". kinac per call (sync) measured before the warm-up, as this row was before "
                f"2026-12-02e: {r['kinac_cold_sync_ms']:.4f} ms"
            )  # fmt: skip
    for line in render_inside(rows):
        emit(line)
    return rows
