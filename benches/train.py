# kinac-bench: gpu
"""Training throughput: kinac's ``Trainer`` against PyTorch eager and ``torch.compile``.

    PYTHONPATH=. python3 benches/train.py                   host: the 1M and 100M decoders
    PYTHONPATH=. python3 benches/train.py --gpu --out DIR   GPU (scripts/gpu.sh): f32, bf16 AMP
    PYTHONPATH=. python3 benches/train.py --estimate        the GPU step estimated, no GPU needed

The model is ``workspaces/decoder`` (4 pre-norm blocks; ``decoder_1m``: 0.80M weights, 256
tokens a step; ``decoder_100m``: 94.4M weights, 512 tokens a step), one AdamW step each
(lr 3e-4), on the synthetic task of ``kinac.train.data``. PyTorch runs the same model
(``tests/train_support.py``: ``decoder_loss_torch``) from the same first weights on the same
batches, with ``torch.optim.AdamW`` (``fused=True`` on the GPU, PyTorch's fastest: one
multi-tensor kernel); bf16 is ``torch.autocast(bfloat16)`` over f32 weights, as kinac's
``decoder-loss-bf16`` casts f32 master weights. Each row runs in a fresh process. Per row:
the median step time of the timed steps (each step timed alone, ending with the loss read on
the host) and steps/s and tokens/s from it; setup and the first step (compilation included)
apart; the first and last loss (kinac and torch must agree); on the GPU the memory: the
allocator's peak allocated bytes (torch ``max_memory_allocated``, kinac's pool
``allocated_bytes.all.peak``), its peak reserve, and the rise of ``cudaMemGetInfo``'s used
memory over the row. Writes ``train_bench.md``/``.json`` to ``--out`` and prints the markdown.
On the GPU the six rows (f32, bf16 x kinac, eager, torch.compile) take about 2-3 minutes,
most of it compilation.
"""

from __future__ import annotations

import argparse
import datetime
import json
import statistics
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

WS = ROOT / "workspaces" / "decoder"
ROWS: list[dict[str, Any]] = []
LR = 3e-4


def _sync(device: str) -> None:
    import torch

    if device == "cuda":
        torch.cuda.synchronize()


def kinac_rows(
    entry: str, target: str, steps: int, warm: int, cache: str, rounds: int = 1
) -> dict[str, Any]:
    """kinac's Trainer: the first step (compile included), warm-up steps, then ``rounds`` of
    ``steps`` timed steps, each timed alone (a step ends with the loss read on the host)."""
    from kinac.train import Trainer

    before = _device_used(target)
    t0 = time.perf_counter()
    tr = Trainer(WS, entry, lr=LR, seed=0, target=target, cache_dir=cache)
    setup = time.perf_counter() - t0
    first = tr.step()
    for _ in range(warm - 1):
        tr.step()
    _pool(target, reset=True)
    times: list[float] = []
    results = []
    for _ in range(rounds):
        for _ in range(steps):
            t = time.perf_counter()
            results.append(tr.step())
            times.append(time.perf_counter() - t)
    pool = _pool(target, reset=False)
    used = _device_used(target)
    return _row(
        "kinac", tr.n_weights, tr.tokens_per_step, setup + first.seconds, times,
        first.loss, results[-1].loss,
        peak=None if pool is None else pool[0],
        reserved=None if pool is None else pool[1],
        device=None if used is None or before is None else used - before,
        allocations_after_first=sum(tr.allocations_per_step[1:]),
        optimizer_calls_per_step=(tr.opt.calls / tr.step_count),
        **_entry_counts(tr),
    )  # fmt: skip


def _entry_counts(tr: Any) -> dict[str, Any]:
    """The loss entry's CUDA graphs captured, its replays, and its staged (volatile)
    positions: on a GPU the weights and gradients must never be staged."""
    entry = getattr(getattr(tr, "_entry", None), "entry", None)
    if entry is None or not hasattr(entry, "captures"):
        return {}
    names = [p.name for p in entry.lowered.params] + ["out"] * len(entry.lowered.outputs)
    return {
        "loss_entry_graphs": entry.captures,
        "loss_entry_replays": entry.replays,
        "loss_entry_staged": sorted({names[i] for i in entry.volatile}),
    }


def _row(impl: str, weights: int, tokens: int, first: float, times: list[float], loss0: float,
         last: float, **extra: Any) -> dict[str, Any]:  # fmt: skip
    """A row: the median step time (and steps/s from it), the first step apart."""
    med = statistics.median(times)
    return {
        "impl": impl,
        "weights": weights,
        "tokens": tokens,
        "first_step_s": round(first, 2),
        "step_ms": med * 1e3,
        "steps_per_s": 1.0 / med,
        "tokens_per_s": tokens / med,
        "loss0": loss0,
        "loss_last": last,
        **extra,
    }


def _device_used(target: str) -> float | None:
    """Device memory in use (total - free, ``cudaMemGetInfo``) in MiB: the process's
    allocators' reserved memory, CUDA context and libraries included (None on the host)."""
    if target != "cuda":
        return None
    import torch

    torch.cuda.init()
    free, total = torch.cuda.mem_get_info()
    return float(total - free) / 2**20


def _pool(target: str, reset: bool) -> tuple[float, float] | None:
    """The peaks of kinac's GPU memory pool (allocated, reserved) since the last reset, in MiB
    (None on the host)."""
    if target != "cuda":
        return None
    from kinac.rt import cuda

    res = cuda.default_resource()
    stats = getattr(res, "memory_stats", None)
    if stats is None:
        return None
    if reset:
        if hasattr(res, "reset_peak_stats"):
            res.reset_peak_stats()
        return None
    st = stats()
    mib = 2**20
    return (
        float(st.get("allocated_bytes.all.peak", 0)) / mib,
        float(st.get("reserved_bytes.all.peak", 0)) / mib,
    )


def torch_rows(
    entry: str, device: str, amp: bool, compiled: bool, steps: int, warm: int, rounds: int = 1
) -> dict[str, Any]:
    """The same model and steps in PyTorch (eager, or ``torch.compile`` of the loss)."""
    import torch
    from train_support import decoder_loss_torch

    from kinac.train.data import batch
    from kinac.train.params import entry_info, init_weights

    info = entry_info(str(WS), entry)
    h, kv = info.dims["H"], info.dims["KV"]
    w = {
        k: torch.tensor(v, device=device, requires_grad=True)
        for k, v in init_weights(info, 0).items()
    }
    cuda = device == "cuda"
    opt = torch.optim.AdamW(list(w.values()), lr=LR, weight_decay=0.0, fused=True if cuda else None)
    b, s = info.batch_shape

    def loss_fn(tok: Any, tgt: Any) -> Any:
        with torch.autocast(device_type=device, dtype=torch.bfloat16, enabled=amp):
            return decoder_loss_torch(tok, tgt, w, h=h, kv=kv)

    fn: Callable[..., Any] = torch.compile(loss_fn) if compiled else loss_fn

    def step(i: int) -> float:
        tok, tgt = batch(0, i, b, s, info.vocab)
        loss = fn(torch.tensor(tok, device=device), torch.tensor(tgt, device=device))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        return float(loss.item())

    before = _device_used(device)
    t0 = time.perf_counter()
    loss0 = step(0)
    first = time.perf_counter() - t0
    for i in range(1, warm):
        step(i)
    if device == "cuda":
        torch.cuda.reset_peak_memory_stats()
    _sync(device)
    last, i = 0.0, warm
    times: list[float] = []
    for _ in range(rounds):
        for _ in range(steps):
            t = time.perf_counter()
            last = step(i)  # ends with loss.item(): the step is done on the device
            times.append(time.perf_counter() - t)
            i += 1
    cuda = device == "cuda"
    used = _device_used(device)
    return _row(
        "torch.compile" if compiled else "torch eager", info.n_weights, b * s, first, times,
        loss0, last,
        peak=torch.cuda.max_memory_allocated() / 2**20 if cuda else None,
        reserved=torch.cuda.max_memory_reserved() / 2**20 if cuda else None,
        device=None if used is None or before is None else used - before,
        allocations_after_first=None,
    )  # fmt: skip


def run(label: str, fn: Callable[[], dict[str, Any]], **extra: Any) -> None:
    try:
        row = fn()
    except Exception as e:  # noqa: BLE001 - a failed row is reported, the others still run
        traceback.print_exc()
        row = {"impl": extra.get("impl", "?"), "error": f"{type(e).__name__}: {str(e)[:200]}"}
    row = {"model": label, **extra, **row}
    ROWS.append(row)
    print(json.dumps(row), flush=True)


def markdown(device: str) -> str:
    def mib(r: dict[str, Any], k: str) -> str:
        return "" if r.get(k) is None else f"{r[k]:,.0f}"

    lines = [
        f"### Training ({device}, {datetime.date.today().isoformat()}): one AdamW step",
        "",
        "step ms: the median of the timed steps (each ends with the loss read on the host); "
        "first step s: setup and the first step, compilation included. Memory (MiB): "
        "*peak*, the allocator's peak of allocated bytes over the timed steps (torch "
        "`max_memory_allocated`; kinac its pool's `allocated_bytes.all.peak`); *reserved*, "
        "the allocator's peak reserve; *device*, the rise of `cudaMemGetInfo`'s used memory "
        "from before the model to after the run (the allocators' caches, cuBLAS workspaces "
        "and loaded kernels included).",
        "",
        "| model | dtype | impl | step ms | steps/s | tokens/s | first step s | loss step 1 | "
        "loss last | peak | reserved | device |",
        "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in ROWS:
        if "error" in r:
            lines.append(f"| {r['model']} | {r['dtype']} | {r['impl']} | {r['error']} |||||||||")
            continue
        lines.append(
            f"| {r['model']} | {r['dtype']} | {r['impl']} | {r['step_ms']:.2f} | "
            f"{r['steps_per_s']:.1f} | {r['tokens_per_s']:,.0f} | {r['first_step_s']} | "
            f"{r['loss0']:.4f} | {r['loss_last']:.4f} | {mib(r, 'peak')} | "
            f"{mib(r, 'reserved')} | {mib(r, 'device')} |"
        )
    return "\n".join(lines)


def plan(args: argparse.Namespace) -> list[dict[str, Any]]:
    """The rows to measure: per size and dtype, kinac, torch eager and torch.compile (not on
    the host's 100M: minutes of compilation for two steps)."""
    rows = []
    for size in args.sizes.split(","):
        big = size == "100m"
        # the host's 100M step takes seconds: fewer steps there; the GPU's takes milliseconds
        steps, warm, rounds = (30, 3, 1) if args.gpu else (2, 1, 2) if big else (20, 2, 3)
        for dt in args.dtypes.split(","):
            base = dict(size=size, dtype=dt, steps=steps, warm=warm, rounds=rounds)
            rows.append({**base, "impl": "kinac"})
            rows.append({**base, "impl": "torch eager"})
            if (args.gpu or not big) and not args.no_compile:
                rows.append({**base, "impl": "torch.compile"})
    return rows


def one_row(spec: dict[str, Any], device: str, cache: str) -> None:
    """Measure one row in this process (the parent runs each row in a fresh process, so no
    row sees another's threads, caches or memory pool)."""
    size, dt, steps, warm = spec["size"], spec["dtype"], spec["steps"], spec["warm"]
    rounds = spec["rounds"]
    label = f"decoder {size.upper()}"
    if spec["impl"] == "kinac":
        entry = f"decoder_{size}" + ("_bf16" if dt == "bf16" else "")
        run(
            label,
            lambda: kinac_rows(entry, device, steps, warm, cache, rounds),
            dtype=dt,
            impl="kinac",
        )
    else:
        compiled = spec["impl"] == "torch.compile"
        run(
            label,
            lambda: torch_rows(
                f"decoder_{size}", device, dt == "bf16", compiled, steps, warm, rounds
            ),
            dtype=dt,
            impl=spec["impl"],
        )


def parallel_check(size: str, n: int, steps: int, cache: str, layouts: list[str]) -> str:
    """``steps`` AdamW steps on one device and on ``n`` simulated devices in each layout, from
    the same weights and batches: the largest per-step relative loss difference, the losses."""
    from kinac.train import Trainer

    entry = f"decoder_{size}"
    t0 = time.perf_counter()
    one = [r.loss for r in Trainer(WS, entry, lr=LR, seed=0, cache_dir=cache).run(steps)]
    lines = [
        f"### {n} simulated devices ({datetime.date.today().isoformat()}): {entry}, "
        f"{steps} AdamW steps; one device: loss {one[0]:.4f} -> {one[-1]:.4f}, "
        f"{time.perf_counter() - t0:.0f} s",
        "",
        "| layout | largest per-step relative loss difference | loss | wall s | collectives "
        "per step and device |",
        "|---|---:|---|---:|---|",
    ]
    for layout in layouts:
        t1 = time.perf_counter()
        tr = Trainer(WS, entry, lr=LR, seed=0, simulate=n, layout=layout, cache_dir=cache)
        par = [r.loss for r in tr.run(steps)]
        worst = max(abs(a - b) / abs(a) for a, b in zip(one, par, strict=True))
        counts = ", ".join(f"{v} {k[0]} over {k[1]}" for k, v in tr.parallel.log.counts().items())
        lines.append(
            f"| {layout} | {worst:.1e} | {par[0]:.4f} -> {par[-1]:.4f} | "
            f"{time.perf_counter() - t1:.0f} | {counts} |"
        )
        print(lines[-1], flush=True)
    return "\n".join(lines)


def estimate(sizes: list[str], dtypes: list[str], cache: str) -> str:
    """The GPU step of each model, estimated on this machine without a GPU: the loss-and-
    gradient program and the optimizer's programs built for target cuda, their launch plans
    costed by :mod:`kinac.ir.gpu.cost` (bytes at 4 TB/s, cuBLAS FLOPs at the dtype's peak,
    serial loops), the launches and library calls a step makes, and the device memory the
    trainer holds (flat parameter, gradient and moment buffers, the gradient program's arena,
    the cuBLAS workspace). Not a measurement: launch gaps (~1-2 us per graph node) and
    cuBLAS efficiency below peak come on top."""
    import numpy as np

    from kinac import pipeline, pipeline_gpu, pipeline_grad
    from kinac.api import compile as compile_defn
    from kinac.ir.gpu.cost import estimate_steps
    from kinac.rt.cuda.blas import WORKSPACE
    from kinac.train.flat import layout
    from kinac.train.fused import fused_lowered
    from kinac.train.optim import OPTIM_KINA
    from kinac.train.params import entry_info

    mib = 2**20
    lines = [
        "| model | dtype | loss+grad: kernels / cuBLAS calls | est. ms | optimizer: launches | "
        "est. ms (3 kernels) | step est. ms | steps/s | flat buffers MiB | arena MiB | device MiB |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for size in sizes:
        for dt in dtypes:
            entry = f"decoder_{size}" + ("_bf16" if dt == "bf16" else "")
            info = entry_info(str(WS), entry, target="cuda", cache_dir=cache)
            cd = compile_defn(WS, entry, target="cuda", cache_dir=cache)
            assert cd.fixed is not None
            key = pipeline.EntryKey(
                cd.key.file, cd.key.name, cd.fixed.dims, cd.fixed.dtypes, "cuda"
            )
            wrt = tuple(w.name for w in info.weights)
            lo = pipeline_grad.grad_gpu_lowered(cd.sess.db, (key, wrt))
            cd.sess.db.commit()
            kernels = sum(len(st.launches) for st in lo.steps)
            gemms = sum(1 for st in lo.steps if st.gemm is not None)
            grad_s = sum(c.est_s for c in estimate_steps(lo.steps))
            _, n = layout({w.name: w.shape for w in info.weights})
            three_s, opt_launches = 0.0, 0
            for name in ("adamw-m", "adamw-v", "adamw-param"):
                f = compile_defn(OPTIM_KINA, name, target="cuda", cache_dir=cache)
                k = pipeline.EntryKey(f.key.file, name, (("..s", (n,)),), (("T", "f32"),), "cuda")
                olo = pipeline_gpu.gpu_lowered(f.sess.db, k)
                f.sess.db.commit()
                three_s += sum(c.est_s for c in estimate_steps(olo.steps))
            # the trainer's step on a GPU: the three formulas as one fused in-place kernel
            flo, _ = fused_lowered(n, "f32", {"cache_dir": cache})
            opt_s = sum(c.est_s for c in estimate_steps(flo.steps))
            opt_launches = sum(len(st.launches) for st in flo.steps)
            flat = 4 * n * np.dtype(np.float32).itemsize / mib  # parameters, gradients, m, v
            arena = lo.arena_bytes / mib
            step = grad_s + opt_s
            lines.append(
                f"| decoder {size.upper()} | {dt} | {kernels} / {gemms} | {grad_s * 1e3:.2f} | "
                f"{opt_launches} | {opt_s * 1e3:.2f} ({three_s * 1e3:.2f}) | {step * 1e3:.2f} | {1 / step:.0f} | "
                f"{flat:,.0f} | {arena:,.0f} | {flat + arena + WORKSPACE / mib:,.0f} |"
            )
            print(lines[-1], flush=True)
    return "\n".join(lines)


def main() -> int:
    import subprocess

    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--gpu", action="store_true", help="train on the GPU (needs CUDA)")
    ap.add_argument("--target", choices=["cpu", "cuda"], help="--target cuda is --gpu")
    ap.add_argument("--out", default=None, help="write train_bench.md/.json here")
    ap.add_argument("--sizes", default=None, help="1m, 100m or both (default: host both, GPU 100m)")
    ap.add_argument(
        "--dtypes", default=None, help="f32, bf16 or both (default: host f32, GPU both)"
    )
    ap.add_argument("--compile", action="store_true", help="(the default now; kept for scripts)")
    ap.add_argument("--no-compile", action="store_true", help="no torch.compile rows")
    ap.add_argument(
        "--row-timeout", type=float, default=300.0, help="seconds per row before it is stopped"
    )
    ap.add_argument(
        "--parallel-check",
        metavar="N",
        type=int,
        help="instead: train each --sizes model 20 steps on one device and data-parallel on N",
    )
    ap.add_argument("--layouts", default="dp,tp,2d", help="with --parallel-check")
    ap.add_argument(
        "--estimate",
        action="store_true",
        help="instead: estimate the GPU step on this machine (no GPU needed; kinac.ir.gpu.cost)",
    )
    ap.add_argument("--row", help=argparse.SUPPRESS)  # internal: measure one row, print it
    ap.add_argument("--cache", help=argparse.SUPPRESS)
    args = ap.parse_args()
    args.gpu = args.gpu or args.target == "cuda"
    device = "cuda" if args.gpu else "cpu"
    if args.row:
        one_row(json.loads(args.row), device, args.cache)
        return 0
    if args.estimate:
        args.gpu = True  # the GPU's defaults: the 100M model, f32 and bf16
    args.sizes = args.sizes or ("100m" if args.gpu else "1m,100m")
    args.dtypes = args.dtypes or ("f32,bf16" if args.gpu else "f32")
    cache = tempfile.mkdtemp(prefix="kinac-train-bench-")
    if args.estimate:
        text = estimate(args.sizes.split(","), args.dtypes.split(","), cache)
        print(text)
        if args.out:
            Path(args.out).mkdir(parents=True, exist_ok=True)
            (Path(args.out) / "train_estimate.md").write_text(text + "\n")
        return 0
    if args.parallel_check:
        text = "\n\n".join(
            parallel_check(size, args.parallel_check, 20, cache, args.layouts.split(","))
            for size in args.sizes.split(",")
        )
        print(text)
        if args.out:
            Path(args.out).mkdir(parents=True, exist_ok=True)
            (Path(args.out) / "train_parallel.md").write_text(text + "\n")
        return 0
    for spec in plan(args):
        cmd = [sys.executable, __file__, "--row", json.dumps(spec), "--cache", cache]
        cmd += ["--gpu"] if args.gpu else []
        failed = {"model": f"decoder {spec['size'].upper()}", "dtype": spec["dtype"],
                  "impl": spec["impl"]}  # fmt: skip
        try:
            proc = subprocess.run(
                cmd, capture_output=True, text=True, check=False, timeout=args.row_timeout
            )
        except subprocess.TimeoutExpired:
            ROWS.append({**failed, "error": f"over {args.row_timeout:.0f} s (stopped)"})
            print(json.dumps(ROWS[-1]), flush=True)
            continue
        got = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
        if got:
            ROWS.append(json.loads(got[-1]))
        else:
            sys.stderr.write(proc.stderr[-3000:])
            ROWS.append({**failed, "error": f"exit {proc.returncode}"})
        print(json.dumps(ROWS[-1]), flush=True)
    md = markdown(device)
    print(md)
    if args.out:
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        (out / "train_bench.md").write_text(md + "\n")
        (out / "train_bench.json").write_text(json.dumps(ROWS, indent=2) + "\n")
    return 1 if any("error" in r for r in ROWS) else 0


if __name__ == "__main__":
    sys.exit(main())
