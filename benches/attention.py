# kinac-bench: gpu
"""kinac's fused attention kernel against PyTorch SDPA, in one process, on one GPU.

    PYTHONPATH=. python3 benches/attention.py --gpu --out DIR      (or: bash scripts/gpu.sh)

Causal grouped-query attention (16 query heads over 4 K/V heads), head dim 128, bf16 and f16,
B4 at S = 1024, 4096, 8192 and B1 at S = 16384. For each shape: every variant the autotuner
may choose (:func:`kinac.ir.gpu.attention_tune.candidates`: wgmma, pipelined wgmma, mma.sync;
tiles and stages), each checked against a float64 reference (three heads, all rows) and timed
with CUDA events (median of rounds); the variants are first run on small shapes in a child
process, so a fault cannot take this process's CUDA context, and one that fails there is not
run. Then the same attention through the public API (``kinac.compile`` on Kina source, per
call with a sync and pipelined): its first call autotunes on this GPU (the chosen variant is
reported), and a second process on the same cache must time nothing. PyTorch's
``scaled_dot_product_attention(is_causal=True, enable_gqa=True)`` (its own choice of kernel,
and its flash backend forced) is timed in the same run. TFLOP/s count the causal half
(``2 B H S^2 D``), as FlashAttention does. Every kernel's PTX is compiled up front by a pool of
processes (the autotuner's compiles hit that cache: same LLVM IR, same arch).
Writes ``attention_bench.md`` / ``.json`` to ``--out`` and prints the table.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
import traceback
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT)]

from kinac.ir.gpu.attention_params import AttnParams, bhsd_params  # noqa: E402

SIZES = ((4, 1024), (4, 4096), (4, 8192), (1, 16384))
ARCH = "sm_90a"  # the H200; every variant is compiled for it (mma.sync ones too)
HEADS, KV_HEADS, HEAD_DIM = 16, 4, 128


class KernelRun:
    """One compiled attention kernel, launched on torch tensors (legacy default stream)."""

    def __init__(self, p: AttnParams) -> None:
        from kinac.codegen.ptx import compile_ptx
        from kinac.ir.gpu.attention_kernel import (
            attention_llvm_ir,
            grid,
            kernel_name,
            smem_bytes,
        )
        from kinac.rt.cuda import driver
        from kinac.rt.cuda.device import Stream
        from kinac.rt.cuda.module import load_module

        self.p = p
        t0 = time.perf_counter()
        self.ptx = compile_ptx(attention_llvm_ir((p,)), ARCH)
        self.compile_s = time.perf_counter() - t0
        k = load_module(self.ptx).function(kernel_name(p))
        self.regs = k.num_regs
        d = driver.api()
        shm = smem_bytes(p)
        attr = d.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
        driver.check("cuFuncSetAttribute", d.cuFuncSetAttribute(k.handle, attr, shm))
        nargs = 1 + p.n_inputs  # the output, then Q, K, V (and a user's mask) as bhsd_params
        self.launch = k.prepare(("ptr",) * nargs, grid(p), p.threads, shm, None, "bindings")
        self.stream = Stream.null()

    def __call__(self, q: Any, k: Any, v: Any, o: Any, *more: Any) -> Any:
        """Launch on ``q, k, v`` into ``o``; ``more``: the further inputs (a mask)."""
        ptrs = (q.data_ptr(), k.data_ptr(), v.data_ptr(), *(x.data_ptr() for x in more))
        self.launch(self.stream, o.data_ptr(), *ptrs)
        return o


def reference(q: Any, k: Any, v: Any, heads: list[int], causal: bool = True) -> Any:
    """float64 attention of batch 0 at the given query heads: [len(heads), S, D]."""
    import torch

    g = q.shape[1] // k.shape[1]
    outs = []
    for h in heads:
        qh = q[0, h].double()
        kh, vh = k[0, h // g].double(), v[0, h // g].double()
        s = (qh @ kh.T) * q.shape[-1] ** -0.5
        if causal:
            n = s.shape[0]
            s = s.masked_fill(torch.ones(n, n, dtype=torch.bool, device=s.device).triu(1), -1e300)
        outs.append(torch.softmax(s, -1) @ vh)
    return torch.stack(outs)


def rel_err(out: Any, ref: Any) -> float:
    return float((out.double() - ref).norm() / ref.norm())


def time_ms(fn: Callable[[], Any], reps: int = 10, rounds: int = 5) -> float:
    """Median over ``rounds`` of the mean of ``reps`` back-to-back calls (CUDA events)."""
    import torch

    fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(rounds):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        for _ in range(reps):
            fn()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b) / reps)
    return statistics.median(times)


KINA_SOURCE = """\
; Causal grouped-query attention alone: Q [B H S Dh], K/V [B KV S Dh] (benches/attention.py).
(module gqa)
(import "std/nn.kina")

(defn gqa [(q : (tensor T [B H S Dh])) (k : (tensor T [B KV S Dh])) (v : (tensor T [B KV S Dh]))]
  -> (tensor T [B H S Dh])
  (where (= H (* KV G)))
  (let [(kr (repeat-interleave k :repeats G :axis 1))
        (vr (repeat-interleave v :repeats G :axis 1))
        (s (add (mul (matmul q (transpose kr :perm [0 1 3 2])) (rsqrt Dh))
                (cast (causal-mask S) :to T)))]
    (matmul (softmax s :axis -1) vr)))
"""


def wall_ms(fn: Callable[[], Any], n: int, sync_each: bool) -> float:
    """Host wall time per call: a sync after each call, or ``n`` calls then one sync
    (pipelined); median of 3 rounds."""
    import torch

    times = []
    for _ in range(3):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
            if sync_each:
                torch.cuda.synchronize()
        torch.cuda.synchronize()
        times.append((time.perf_counter() - t0) * 1e3 / n)
    return statistics.median(times)


def api_row(dtype: str, b: int, s: int, q: Any, k: Any, v: Any, sdpa: Callable[[], Any],
            ref: Any, heads: list[int], src: Path) -> dict[str, Any]:  # fmt: skip
    """kinac.compile on Kina source, called as a user calls it, against SDPA."""
    import torch

    import kinac

    row: dict[str, Any] = {"dtype": dtype, "B": b, "S": s, "path": "kinac.compile"}
    TUNINGS.clear()
    t0 = time.perf_counter()
    f = kinac.compile(src, "gqa", target="cuda")
    out = torch.from_dlpack(f(q, k, v))
    torch.cuda.synchronize()
    row["first_call_s"] = time.perf_counter() - t0
    row["tunings"] = len(TUNINGS)
    if TUNINGS:  # what the autotuner timed and chose on its first call
        from kinac.ir.gpu.attention_tune import label

        cands, ms = TUNINGS[-1]
        row["tuned"] = {label(c): t for c, t in zip(cands, ms, strict=True)}
        row["chosen"] = min(row["tuned"], key=lambda x: row["tuned"][x])
    row["err"] = rel_err(out[0, heads], ref)
    n = max(3, min(20, int(60 / max(0.05, time_ms(sdpa, 3, 3)))))
    for name, fn in (("kinac", lambda: f(q, k, v)), ("sdpa", sdpa)):
        row[f"{name}_sync_ms"] = wall_ms(fn, n, True)
        row[f"{name}_pipe_ms"] = wall_ms(fn, n, False)
    p = bhsd_params(dtype, b, HEADS, KV_HEADS, s, HEAD_DIM)
    row["tflops_pipe"] = tflops(p, row["kinac_pipe_ms"])
    row["ratio_pipe"] = row["kinac_pipe_ms"] / row["sdpa_pipe_ms"]
    row["ratio_sync"] = row["kinac_sync_ms"] / row["sdpa_sync_ms"]
    return row


def shape_params(dtype: str, b: int, s: int, d: int = HEAD_DIM, heads: int = HEADS,
                 kv: int = KV_HEADS) -> AttnParams:  # fmt: skip
    """The attention as ``kinac.compile`` fuses it (scale: ``rsqrt Dh`` in the program's dtype),
    so this bench's kernels and the autotuner's are the same LLVM IR."""
    from kinac.ir.gpu.attention import _round

    return replace(bhsd_params(dtype, b, heads, kv, s, d), scale=_round(d**-0.5, dtype))


def tflops(p: AttnParams, ms: float) -> float:
    from kinac.ir.gpu.attention_kernel import flops

    return flops(p) / ms / 1e9


def bench_shape(dtype: str, b: int, s: int, cands: list[AttnParams], rows: list[dict[str, Any]], api: list[dict[str, Any]] | None, src: Path) -> None:  # fmt: skip
    import torch
    import torch.nn.functional as F

    tdt = {"bf16": torch.bfloat16, "f16": torch.float16}[dtype]
    gen = torch.Generator(device="cuda").manual_seed(s + b)
    q = torch.randn(b, HEADS, s, HEAD_DIM, device="cuda", dtype=tdt, generator=gen)
    k = torch.randn(b, KV_HEADS, s, HEAD_DIM, device="cuda", dtype=tdt, generator=gen)
    v = torch.randn(b, KV_HEADS, s, HEAD_DIM, device="cuda", dtype=tdt, generator=gen)
    heads = [0, 5, HEADS - 1]
    ref = reference(q, k, v, heads)
    sdpa = lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)  # noqa: E731
    so = sdpa()
    sdpa_err = rel_err(so[0, heads], ref)
    sdpa_ms = time_ms(sdpa)
    del so
    flash_ms = None
    try:
        from torch.nn.attention import SDPBackend, sdpa_kernel

        with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
            flash_ms = time_ms(sdpa)
    except Exception:  # noqa: BLE001 - the flash backend may refuse (GQA, build): no column
        flash_ms = None
    if api is not None:
        try:
            api.append(api_row(dtype, b, s, q, k, v, sdpa, ref, heads, src))
        except Exception:  # noqa: BLE001
            api.append({"dtype": dtype, "B": b, "S": s, "error": traceback.format_exc()[-1500:]})
        print(json.dumps(api[-1]), flush=True)
    from kinac.ir.gpu.attention_tune import label

    for p in cands:
        row: dict[str, Any] = {"dtype": dtype, "B": b, "S": s, "variant": label(p), "mma": p.mma,
                               "tiles": f"{p.block_m}x{p.block_n}", "stages": p.stages,
                               "sdpa_ms": sdpa_ms, "sdpa_err": sdpa_err, "flash_ms": flash_ms}  # fmt: skip
        try:
            run = KernelRun(p)
            o = torch.full_like(q, float("nan"))
            run(q, k, v, o)
            torch.cuda.synchronize()
            row["err"] = rel_err(o[0, heads], ref)
            row["all_written"] = bool(torch.isfinite(o).all())
            row["ms"] = time_ms(lambda run=run, o=o: run(q, k, v, o))
            row["tflops"] = tflops(p, row["ms"])
            row["sdpa_tflops"] = tflops(p, sdpa_ms)
            row["ratio"] = row["ms"] / sdpa_ms
            row["regs"] = run.regs
        except Exception:  # noqa: BLE001 - one failing variant must not hide the others
            row["error"] = traceback.format_exc()[-1500:]
        rows.append(row)
        print(json.dumps(row), flush=True)


TUNINGS: list[tuple[Any, Any]] = []  # (candidates, ms) of each autotuning in this process
_PTX: dict[tuple[str, str], str] = {}  # (LLVM IR, arch) -> PTX, compiled up front


def _compile_job(job: tuple[str, str]) -> tuple[tuple[str, str], str | None]:
    """One variant's PTX; None when it does not compile (that variant then fails its smoke
    run and is skipped, instead of the whole bench failing here)."""
    from kinac.codegen.ptx import compile_ptx

    try:
        return job, compile_ptx(*job)
    except Exception as e:  # noqa: BLE001 - reported, the variant is skipped later
        print(f"precompile: a variant does not compile: {str(e)[:300]}", flush=True)
        return job, None


def precompile(params: list[AttnParams]) -> float:
    """Compile every variant's PTX in a pool of processes (before CUDA is touched), and make
    ``compile_ptx`` answer from that cache; returns the seconds it took."""
    from concurrent.futures import ProcessPoolExecutor

    import kinac.codegen.ptx as ptxmod
    from kinac.ir.gpu.attention_kernel import attention_llvm_ir

    t0 = time.perf_counter()
    jobs = list(dict.fromkeys((attention_llvm_ir((p,)), ARCH) for p in params))
    with ProcessPoolExecutor(max_workers=min(len(jobs), os.cpu_count() or 4)) as ex:
        _PTX.update((j, ptx) for j, ptx in ex.map(_compile_job, jobs) if ptx is not None)
    real = ptxmod.compile_ptx

    def cached(llvm_ir: str, arch: str = "sm_90", opt_level: int = 3) -> str:
        hit = _PTX.get((llvm_ir, arch)) if opt_level == 3 else None
        return hit if hit is not None else real(llvm_ir, arch, opt_level)

    ptxmod.compile_ptx = cached  # type: ignore[assignment]
    return time.perf_counter() - t0


def watch_tunings() -> None:
    """Record what the autotuner times (its GpuTimer), to report its choice."""
    from kinac.pipeline_autotune import GpuTimer

    real = GpuTimer.time

    def recording(self: Any, cands: Any, arch: str) -> Any:
        ms = real(self, cands, arch)
        TUNINGS.append((cands, ms))
        return ms

    GpuTimer.time = recording  # type: ignore[method-assign]


SMOKE = (("bf16", 128, 300), ("f16", 64, 129), ("bf16", 128, 64))
SMOKE_BATCH = 24  # variants per child process (module loads and runs: well under its 240 s)


def only(cands: list[AttnParams]) -> list[AttnParams]:
    """``cands`` restricted to the labels of ``--variants`` (passed to the smoke children in
    ``KINAC_BENCH_VARIANTS``); all when it is unset."""
    from kinac.ir.gpu.attention_tune import label

    keep = [x.strip() for x in os.environ.get("KINAC_BENCH_VARIANTS", "").split(",") if x.strip()]
    return [c for c in cands if label(c) in keep] if keep else cands


def smoke_variants() -> list[AttnParams]:
    """Small shapes of every Hopper candidate, in a fixed order (the child and the parent agree)."""
    from kinac.ir.gpu.attention_tune import candidates

    out: list[AttnParams] = []
    for dtype, d, s in SMOKE:
        out += only(list(candidates(shape_params(dtype, 1, s, d, 4, 2), ARCH)))
    return out


def smoke(indices: str) -> int:
    """Run the smoke variants ``indices`` (comma-separated) on small inputs against float64,
    printing ``ok i`` / ``bad i`` after each (a kernel fault ends the process: the parent
    learns which one from the last line)."""
    import torch

    tdt = {"bf16": torch.bfloat16, "f16": torch.float16}
    rc = 0
    variants = smoke_variants()
    for i in (int(x) for x in indices.split(",")):
        p = variants[i]
        q = torch.randn(1, 4, p.sq, p.head_dim, device="cuda", dtype=tdt[p.dtype])
        k = torch.randn(1, 2, p.sq, p.head_dim, device="cuda", dtype=tdt[p.dtype])
        v = torch.randn(1, 2, p.sq, p.head_dim, device="cuda", dtype=tdt[p.dtype])
        o = torch.full_like(q, float("nan"))
        KernelRun(p)(q, k, v, o)
        torch.cuda.synchronize()
        err = rel_err(o[0], reference(q, k, v, [0, 1, 2, 3]))
        good = err < 1e-2 and bool(torch.isfinite(o).all())
        rc |= 0 if good else 1
        print(f"{'ok' if good else 'bad'} {i} {err:.2e}", flush=True)
    return rc


def smoke_all() -> set[str]:
    """Labels of the variants that failed on small shapes (each batch in a child process; after
    a crash, the rest again without the one that crashed)."""
    from kinac.ir.gpu.attention_tune import label

    variants = smoke_variants()
    left, bad = list(range(len(variants))), set()
    while left:  # batches of SMOKE_BATCH per child (each child's time limit holds)
        batch, later = left[:SMOKE_BATCH], left[SMOKE_BATCH:]
        try:
            r = subprocess.run(
                [sys.executable, __file__, "--smoke", ",".join(map(str, batch))],
                capture_output=True, text=True, timeout=240, env=os.environ,
            )  # fmt: skip
            out, err, rc = r.stdout, r.stderr, r.returncode
        except subprocess.TimeoutExpired as e:  # a hung variant: the first not reported
            out = e.stdout.decode() if isinstance(e.stdout, bytes) else (e.stdout or "")
            err, rc = "timed out (240 s)", -9
        done = {}
        for line in out.splitlines():
            w = line.split()
            if len(w) >= 2 and w[0] in ("ok", "bad"):
                done[int(w[1])] = w[0]
        bad |= {label(variants[i]) for i, v in done.items() if v == "bad"}
        rest = [i for i in batch if i not in done]
        if rc != 0 and rest:  # the first not reported crashed (or hung) the child
            print(f"smoke: variant {label(variants[rest[0]])} crashed: {err[-600:]}")
            bad.add(label(variants[rest[0]]))
            rest = rest[1:]
        elif rc != 0 and not done:
            print(f"smoke failed: {err[-1500:]}")
            return {label(v) for v in variants}
        left = (rest if rc != 0 else []) + later
    print(f"smoke: {len(variants)} variant runs, failing labels: {sorted(bad)}", flush=True)
    return bad


def skip_in_tuning(bad: set[str]) -> None:
    """The autotuner of this process (the ``kinac.compile`` rows) times only the variants
    that passed the smoke runs: one that faulted or hung there is not launched in this
    process's CUDA context."""
    if not bad:
        return
    from kinac.ir.gpu import attention_tune as at

    real = at.candidates

    def passing(p: AttnParams, arch: str) -> tuple[AttnParams, ...]:
        return tuple(c for c in real(p, arch) if at.label(c) not in bad)

    at.candidates = passing  # type: ignore[assignment]


def second_process(src: Path) -> dict[str, Any]:
    """``kinac.compile`` of one shape again in a fresh process on the same cache: its autotuner
    must time nothing (the choice is a stored artifact)."""
    code = "\n".join([
        f"import sys, time, json, torch; sys.path[:0] = [{str(ROOT)!r}]",
        "import kinac; from kinac.pipeline_autotune import GpuTimer",
        "calls = []; real = GpuTimer.time",
        "GpuTimer.time = lambda self, c, a: calls.append(1) or real(self, c, a)",
        "q = torch.randn(4, 16, 1024, 128, device='cuda', dtype=torch.bfloat16)",
        "k = torch.randn(4, 4, 1024, 128, device='cuda', dtype=torch.bfloat16)",
        f"t0 = time.perf_counter(); f = kinac.compile({str(src)!r}, 'gqa', target='cuda')",
        "f(q, k, k); torch.cuda.synchronize()",
        "print(json.dumps({'first_call_s': time.perf_counter() - t0, 'timer_calls': len(calls)}))",
    ])  # fmt: skip
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=180)
    try:
        return dict(json.loads(r.stdout.strip().splitlines()[-1]))
    except Exception:  # noqa: BLE001
        return {"error": (r.stdout + r.stderr)[-1500:]}


def report(rows: list[dict[str, Any]], api: list[dict[str, Any]], out: Path,
           extra: dict[str, Any]) -> int:  # fmt: skip
    """Write the tables (after every shape: a run cut short still leaves its numbers)."""
    import torch

    best: dict[str, dict[str, Any]] = {}
    for r in rows:
        if "ms" not in r or r["err"] > 1e-2:
            continue
        key = f"{r['dtype']} B{r['B']} S{r['S']}"
        if key not in best or r["ms"] < best[key]["ms"]:
            best[key] = r
    lines = [
        f"GPU: {torch.cuda.get_device_name()}, torch {torch.__version__}; causal GQA H{HEADS} "
        f"KV{KV_HEADS} D{HEAD_DIM}; kernel times by CUDA events; SDPA: its own choice of "
        "kernel; SDPA flash: the flash backend forced. Best variant per shape:",
        "",
        "| shape | best variant | kinac ms | kinac TFLOP/s | SDPA ms | SDPA TFLOP/s | kinac/SDPA "
        "| SDPA flash ms | kinac/flash | err kinac | err SDPA |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for key, r in sorted(best.items()):
        fl = r.get("flash_ms")
        fls = f"{fl:.3f} | {r['ms'] / fl:.2f}x" if fl else "- | -"
        lines.append(
            f"| {key} | {r['variant']} | {r['ms']:.3f} | {r['tflops']:.0f} | {r['sdpa_ms']:.3f} "
            f"| {r['sdpa_tflops']:.0f} | {r['ratio']:.2f}x | {fls} | {r['err']:.1e} "
            f"| {r['sdpa_err']:.1e} |"
        )
    variants = list(dict.fromkeys(r["variant"] for r in rows))
    shapes = list(dict.fromkeys(f"{r['dtype']} B{r['B']} S{r['S']}" for r in rows))
    lines += ["", "Every variant, ms (kinac/SDPA); 'fail' = wrong or failed, '-' = not run:", "",
              "| shape | " + " | ".join(variants) + " |",
              "|---|" + "---|" * len(variants)]  # fmt: skip
    for sh in shapes:
        cells = []
        for v in variants:
            hit = [x for x in rows if f"{x['dtype']} B{x['B']} S{x['S']}" == sh
                   and x["variant"] == v]  # fmt: skip
            if not hit or hit[0].get("skipped"):
                cells.append("-")
            elif "ms" not in hit[0] or hit[0]["err"] > 1e-2:
                cells.append("fail")
            else:
                cells.append(f"{hit[0]['ms']:.3f} ({hit[0]['ratio']:.2f}x)")
        lines.append(f"| {sh} | " + " | ".join(cells) + " |")
    lines += [
        "",
        "Through the public API (`kinac.compile` on Kina source, torch tensors in, as a user "
        "calls it; the first call autotunes on this GPU): host wall time per call, with a sync "
        "after each call / pipelined",
        "",
        "| shape | autotuned variant | kinac sync ms | SDPA sync ms | ratio | kinac pipelined ms "
        "| SDPA pipelined ms | ratio | kinac TFLOP/s (pipelined) | err | first call s |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in api:
        key = f"{r['dtype']} B{r['B']} S{r['S']}"
        if "error" in r:
            lines.append(f"| {key} | failed: {r['error'].splitlines()[-1][:80]} |")
            continue
        lines.append(
            f"| {key} | {r.get('chosen', '-')} | {r['kinac_sync_ms']:.3f} | {r['sdpa_sync_ms']:.3f} "
            f"| {r['ratio_sync']:.2f}x | {r['kinac_pipe_ms']:.3f} | {r['sdpa_pipe_ms']:.3f} "
            f"| {r['ratio_pipe']:.2f}x | {r['tflops_pipe']:.0f} | {r['err']:.1e} "
            f"| {r['first_call_s']:.1f} |"
        )
    lines += ["", f"Run: {json.dumps(extra)}"]
    text = "\n".join(lines)
    (out / "attention_bench.md").write_text(text + "\n")
    (out / "attention_bench.json").write_text(
        json.dumps({"kernel": rows, "api": api, "run": extra}, indent=1)
    )
    bad = [r for r in rows + api if "error" in r or r.get("err", 1) > 1e-2]
    return 1 if bad else 0


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--gpu", action="store_true")
    ap.add_argument("--out", default="gpu-out")
    ap.add_argument("--quick", action="store_true", help="one size only")
    ap.add_argument("--no-api", action="store_true", help="kernels only, no kinac.compile rows")
    ap.add_argument("--shapes", default="", help="only these: dtype:B:S,... (bf16:4:4096)")
    ap.add_argument("--variants", default="", help="only these candidates: label,label,...")
    ap.add_argument("--smoke", default="", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.variants:
        os.environ["KINAC_BENCH_VARIANTS"] = a.variants
    if a.smoke:
        return smoke(a.smoke)
    from kinac.ir.gpu.attention_tune import candidates, label

    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    sizes = SIZES[:1] if a.quick else SIZES
    shapes = [(dt, b, s) for dt in ("bf16", "f16") for b, s in sizes]
    if a.shapes:
        shapes = [(x.split(":")[0], int(x.split(":")[1]), int(x.split(":")[2]))
                  for x in a.shapes.split(",")]  # fmt: skip
    cands = {sh: only(list(candidates(shape_params(*sh), ARCH))) for sh in shapes}
    extra: dict[str, Any] = {}
    t0 = time.perf_counter()
    extra["precompile_s"] = precompile([c for cs in cands.values() for c in cs] + smoke_variants())
    print(f"precompiled in {extra['precompile_s']:.1f} s", flush=True)
    import torch

    watch_tunings()
    rows: list[dict[str, Any]] = []
    api: list[dict[str, Any]] = []
    src = out / "gqa.kina"
    src.write_text(KINA_SOURCE)
    rc = 0
    bad = smoke_all()
    extra["smoke_failed"] = sorted(bad)
    skip_in_tuning(bad)
    for dtype, b, s in shapes:
        ok = [c for c in cands[(dtype, b, s)] if label(c) not in bad]
        rows += [{"dtype": dtype, "B": b, "S": s, "variant": label(c), "skipped": True}
                 for c in cands[(dtype, b, s)] if label(c) in bad]  # fmt: skip
        bench_shape(dtype, b, s, ok, rows, None if a.no_api else api, src)
        torch.cuda.empty_cache()
        rc = report(rows, api, out, extra)
        print(f"[{time.perf_counter() - t0:.0f} s] {dtype} B{b} S{s} done", flush=True)
    if not a.no_api:
        extra["second_process"] = second_process(src)
        print(f"second process: {extra['second_process']}", flush=True)
    rc = report(rows, api, out, extra)
    print((out / "attention_bench.md").read_text())
    return rc


if __name__ == "__main__":
    sys.exit(main())
