# kinac-bench: gpu
"""kinac's fused attention kernel against PyTorch SDPA, in one process, on one GPU.

    PYTHONPATH=. python3 benches/attention.py --gpu --out DIR      (or: bash scripts/gpu.sh)

Causal grouped-query attention (16 query heads over 4 K/V heads), head dim 128, bf16 and f16,
B4 at S = 1024, 4096, 8192 and B1 at S = 16384. For each shape: the kernel at the chosen tiles
with ``mma.sync`` and with ``wgmma`` (each wgmma variant is first run in a child process, so a
fault cannot take this process's CUDA context; ``--all-tiles``: every tile candidate), each
checked against a float64 reference (three heads, all rows) and timed with CUDA events
(median of rounds); then the same attention through the public API (``kinac.compile`` on Kina
source, per call with a sync and pipelined). PyTorch's
``scaled_dot_product_attention(is_causal=True, enable_gqa=True)`` (its own choice of kernel,
and its flash backend forced) is timed in the same run. TFLOP/s count the causal half
(``2 B H S^2 D``), as FlashAttention does.
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

from kinac.ir.gpu.attention_params import AttnParams, AttnTiles, bhsd_params  # noqa: E402

SIZES = ((4, 1024), (4, 4096), (4, 8192), (1, 16384))
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
        self.ptx = compile_ptx(attention_llvm_ir((p,)), "sm_90a" if p.arch == "sm_90a" else "sm_90")
        self.compile_s = time.perf_counter() - t0
        k = load_module(self.ptx).function(kernel_name(p))
        self.regs = k.num_regs
        d = driver.api()
        shm = smem_bytes(p)
        attr = d.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
        driver.check("cuFuncSetAttribute", d.cuFuncSetAttribute(k.handle, attr, shm))
        self.launch = k.prepare(("ptr",) * 4, grid(p), 32 * p.warps, shm, None, "bindings")
        self.stream = Stream.null()

    def __call__(self, q: Any, k: Any, v: Any, o: Any) -> Any:
        self.launch(self.stream, o.data_ptr(), q.data_ptr(), k.data_ptr(), v.data_ptr())
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
    t0 = time.perf_counter()
    f = kinac.compile(src, "gqa", target="cuda")
    out = torch.from_dlpack(f(q, k, v))
    torch.cuda.synchronize()
    row["first_call_s"] = time.perf_counter() - t0
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


def tflops(p: AttnParams, ms: float) -> float:
    from kinac.ir.gpu.attention_kernel import flops

    return flops(p) / ms / 1e9


def bench_shape(dtype: str, b: int, s: int, cands: list[tuple[AttnTiles, str]], rows: list[dict[str, Any]], api: list[dict[str, Any]], src: Path) -> None:  # fmt: skip
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
    try:
        api.append(api_row(dtype, b, s, q, k, v, sdpa, ref, heads, src))
    except Exception:  # noqa: BLE001
        api.append({"dtype": dtype, "B": b, "S": s, "error": traceback.format_exc()[-1500:]})
    print(json.dumps(api[-1]), flush=True)
    for t, mma in cands:
        p = bhsd_params(dtype, b, HEADS, KV_HEADS, s, HEAD_DIM, True, t)
        p = replace(p, mma=mma)
        row: dict[str, Any] = {"dtype": dtype, "B": b, "S": s, "tiles": f"{t.block_m}x{t.block_n}", "mma": mma,
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


WGMMA = ("wgmma", "wgmma_qk")
WGMMA_TILES = (AttnTiles(64, 64), AttnTiles(128, 64), AttnTiles(64, 128))


def smoke(mma: str) -> int:
    """Run the ``mma`` variant once on small inputs against float64 (in a child process: a
    kernel fault must not take the benchmark's CUDA context with it)."""
    import torch

    errs = []
    for dtype, d, s, t in (
        ("bf16", 128, 300, AttnTiles(64, 64)),
        ("f16", 64, 129, AttnTiles(128, 64)),
    ):
        tdt = {"bf16": torch.bfloat16, "f16": torch.float16}[dtype]
        q = torch.randn(1, 4, s, d, device="cuda", dtype=tdt)
        k = torch.randn(1, 2, s, d, device="cuda", dtype=tdt)
        v = torch.randn(1, 2, s, d, device="cuda", dtype=tdt)
        run = KernelRun(replace(bhsd_params(dtype, 1, 4, 2, s, d, True, t), mma=mma))
        o = torch.full_like(q, float("nan"))
        run(q, k, v, o)
        torch.cuda.synchronize()
        errs.append(rel_err(o[0], reference(q, k, v, [0, 1, 2, 3])))
    print(json.dumps({"mma": mma, "errs": errs}), flush=True)
    return 0 if all(e < 1e-2 for e in errs) else 1


def wgmma_smoke() -> dict[str, bool]:
    """Which wgmma variants run correctly here (each tried in a child process)."""
    ok = {}
    for m in WGMMA:
        try:
            p = subprocess.run(
                [sys.executable, __file__, "--smoke", m], capture_output=True, text=True,
                timeout=90, env=os.environ,
            )  # fmt: skip
            print(
                f"smoke {m}: rc {p.returncode} {p.stdout.strip()[-300:]} {p.stderr.strip()[-800:]}"
            )
            ok[m] = p.returncode == 0
        except subprocess.TimeoutExpired:
            ok[m] = False
    return ok


def report(rows: list[dict[str, Any]], api: list[dict[str, Any]], out: Path) -> int:
    """Write the tables (after every shape: a run cut short still leaves its numbers)."""
    import torch

    best: dict[str, dict[str, Any]] = {}
    best_mma: dict[str, dict[str, Any]] = {}
    for r in rows:
        if "ms" not in r or r["err"] > 1e-2:
            continue
        key = f"{r['dtype']} B{r['B']} S{r['S']}"
        if key not in best or r["ms"] < best[key]["ms"]:
            best[key] = r
        mk = f"{key} {r.get('mma', 'sync')}"
        if mk not in best_mma or r["ms"] < best_mma[mk]["ms"]:
            best_mma[mk] = r
    lines = [
        f"GPU: {torch.cuda.get_device_name()}, torch {torch.__version__}; causal GQA H{HEADS} "
        f"KV{KV_HEADS} D{HEAD_DIM}; kernel times by CUDA events, best tile choice per shape; "
        "SDPA: its own choice of kernel; SDPA flash: the flash backend forced",
        "",
        "| shape | mma | tiles | kinac ms | kinac TFLOP/s | SDPA ms | SDPA TFLOP/s | kinac/SDPA "
        "| SDPA flash ms | kinac/flash | err kinac | err SDPA |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for key, r in sorted(best_mma.items()):
        fl = r.get("flash_ms")
        fls = f"{fl:.3f} | {r['ms'] / fl:.2f}x" if fl else "- | -"
        lines.append(
            f"| {key.rsplit(' ', 1)[0]} | {r.get('mma', 'sync')} | {r['tiles']} | {r['ms']:.3f} "
            f"| {r['tflops']:.0f} | {r['sdpa_ms']:.3f} "
            f"| {r['sdpa_tflops']:.0f} | {r['ratio']:.2f}x | {fls} | {r['err']:.1e} "
            f"| {r['sdpa_err']:.1e} |"
        )
    lines += [
        "",
        "Through the public API (`kinac.compile` on Kina source, torch tensors in, as a user "
        "calls it): host wall time per call, with a sync after each call / pipelined",
        "",
        "| shape | kinac sync ms | SDPA sync ms | ratio | kinac pipelined ms | SDPA pipelined ms "
        "| ratio | kinac TFLOP/s (pipelined) | err | first call s |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in api:
        key = f"{r['dtype']} B{r['B']} S{r['S']}"
        if "error" in r:
            lines.append(f"| {key} | failed: {r['error'].splitlines()[-1][:80]} |")
            continue
        lines.append(
            f"| {key} | {r['kinac_sync_ms']:.3f} | {r['sdpa_sync_ms']:.3f} | {r['ratio_sync']:.2f}x "
            f"| {r['kinac_pipe_ms']:.3f} | {r['sdpa_pipe_ms']:.3f} | {r['ratio_pipe']:.2f}x "
            f"| {r['tflops_pipe']:.0f} | {r['err']:.1e} | {r['first_call_s']:.1f} |"
        )
    text = "\n".join(lines)
    (out / "attention_bench.md").write_text(text + "\n")
    (out / "attention_bench.json").write_text(json.dumps({"kernel": rows, "api": api}, indent=1))
    tiles = {k: f"{r['tiles']} {r.get('mma', 'sync')}" for k, r in best.items()}
    (out / "attention_tiles.json").write_text(json.dumps(tiles, indent=1))
    bad = [r for r in rows + api if "error" in r or r.get("err", 1) > 1e-2]
    return 1 if bad else 0


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--gpu", action="store_true")
    ap.add_argument("--out", default="gpu-out")
    ap.add_argument("--quick", action="store_true", help="one size only")
    ap.add_argument("--all-tiles", action="store_true", help="every tile candidate per shape")
    ap.add_argument("--no-wgmma", action="store_true", help="mma.sync kernels only")
    ap.add_argument("--smoke", default="", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.smoke:
        return smoke(a.smoke)
    import torch

    from kinac.ir.gpu.attention import TILE_CANDIDATES, choose_tiles

    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    rows: list[dict[str, Any]] = []
    api: list[dict[str, Any]] = []
    src = out / "gqa.kina"
    src.write_text(KINA_SOURCE)
    sizes = SIZES[:1] if a.quick else SIZES
    t0 = time.perf_counter()
    rc = 0
    wg = wgmma_smoke() if not a.no_wgmma else {}
    print(f"wgmma smoke test: {wg}", flush=True)
    for dtype in ("bf16", "f16"):
        for b, s in sizes:
            chosen = choose_tiles(HEAD_DIM, s, s)
            # default: the chosen tiles, mma.sync and wgmma; --all-tiles: the sweeps
            tiles = list(TILE_CANDIDATES[HEAD_DIM]) if a.all_tiles else [chosen]
            cands = [(t, "sync") for t in tiles]
            wtiles = WGMMA_TILES if a.all_tiles else (chosen,)
            if wg.get("wgmma"):
                cands += [(t, "wgmma") for t in wtiles]
            elif wg.get("wgmma_qk"):
                cands += [(t, "wgmma_qk") for t in wtiles]
            bench_shape(dtype, b, s, cands, rows, api, src)
            torch.cuda.empty_cache()
            rc = report(rows, api, out)
            print(f"[{time.perf_counter() - t0:.0f} s] {dtype} B{b} S{s} done", flush=True)
    print((out / "attention_bench.md").read_text())
    return rc


if __name__ == "__main__":
    sys.exit(main())
