# kinac-bench: gpu
"""Training throughput: kinac's ``Trainer`` against PyTorch eager and ``torch.compile``.

    PYTHONPATH=. python3 benches/train.py                   host: the 1M and 100M decoders
    PYTHONPATH=. python3 benches/train.py --gpu --out DIR   GPU (scripts/gpu.sh): f32, bf16 AMP

The model is ``workspaces/decoder`` (4 pre-norm blocks; ``decoder_1m``: 0.80M weights, 256
tokens a step; ``decoder_100m``: 94.4M weights, 512 tokens a step), one AdamW step each
(lr 3e-4), on the synthetic task of ``kinac.train.data``. PyTorch runs the same model
(``tests/train_support.py``: ``decoder_loss_torch``) from the same first weights on the same
batches, with ``torch.optim.AdamW`` (``foreach`` on the GPU); bf16 is
``torch.autocast(bfloat16)`` over f32 weights, as kinac's ``decoder-loss-bf16`` casts f32
master weights. Per row: steps/s and tokens/s over the timed steps (the best of 2-3 rounds,
after warm-up steps that include compilation; the first step's time, compilation included,
is its own column),
the first step's loss (kinac and torch must agree), and on the GPU the peak memory (torch's
``max_memory_allocated``; kinac's pool peak). Writes ``train_bench.md``/``.json`` to
``--out`` and prints the markdown.
"""

from __future__ import annotations

import argparse
import datetime
import json
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
    """kinac's Trainer: the first step (compile included), then ``steps`` timed steps."""
    from kinac.train import Trainer

    t0 = time.perf_counter()
    tr = Trainer(WS, entry, lr=LR, seed=0, target=target, cache_dir=cache)
    setup = time.perf_counter() - t0
    first = tr.step()
    peak = None
    for _ in range(warm - 1):
        tr.step()
    res = _pool(target, reset=True)
    dt = float("inf")
    for _ in range(rounds):  # the best round: the machine may be shared
        t = time.perf_counter()
        results = tr.run(steps)
        dt = min(dt, time.perf_counter() - t)
    if res is not None:
        peak = _pool(target, reset=False)
    return {
        "impl": "kinac",
        "weights": tr.n_weights,
        "tokens": tr.tokens_per_step,
        "first_step_s": round(setup + first.seconds, 2),
        "steps_per_s": steps / dt,
        "tokens_per_s": steps * tr.tokens_per_step / dt,
        "loss0": first.loss,
        "loss_last": results[-1].loss,
        "peak_mib": peak,
        "allocations_after_first": sum(tr.allocations_per_step[1:]),
    }


def _pool(target: str, reset: bool) -> float | None:
    """The peak of kinac's GPU memory pool since the last reset, in MiB (None on the host)."""
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
        return 0.0
    return float(stats().get("allocated_bytes.all.peak", 0)) / 2**20


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
    opt = torch.optim.AdamW(list(w.values()), lr=LR, weight_decay=0.0, foreach=device == "cuda")
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

    t0 = time.perf_counter()
    loss0 = step(0)
    first = time.perf_counter() - t0
    for i in range(1, warm):
        step(i)
    if device == "cuda":
        torch.cuda.reset_peak_memory_stats()
    _sync(device)
    last, dt, i = 0.0, float("inf"), warm
    for _ in range(rounds):  # the best round: the machine may be shared
        t = time.perf_counter()
        for _ in range(steps):
            last = step(i)
            i += 1
        _sync(device)
        dt = min(dt, time.perf_counter() - t)
    peak = torch.cuda.max_memory_allocated() / 2**20 if device == "cuda" else None
    return {
        "impl": "torch.compile" if compiled else "torch eager",
        "weights": info.n_weights,
        "tokens": b * s,
        "first_step_s": round(first, 2),
        "steps_per_s": steps / dt,
        "tokens_per_s": steps * b * s / dt,
        "loss0": loss0,
        "loss_last": last,
        "peak_mib": peak,
        "allocations_after_first": None,
    }


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
    lines = [
        f"### Training ({device}, {datetime.date.today().isoformat()}): one AdamW step",
        "",
        "| model | dtype | impl | steps/s | tokens/s | first step s | loss step 1 | "
        "loss last | peak MiB |",
        "|---|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    for r in ROWS:
        if "error" in r:
            lines.append(f"| {r['model']} | {r['dtype']} | {r['impl']} | {r['error']} |||||")
            continue
        peak = "" if r.get("peak_mib") is None else f"{r['peak_mib']:.0f}"
        lines.append(
            f"| {r['model']} | {r['dtype']} | {r['impl']} | {r['steps_per_s']:.2f} | "
            f"{r['tokens_per_s']:,.0f} | {r['first_step_s']} | {r['loss0']:.4f} | "
            f"{r['loss_last']:.4f} | {peak} |"
        )
    return "\n".join(lines)


def plan(args: argparse.Namespace) -> list[dict[str, Any]]:
    """The rows to measure: per size and dtype, kinac, torch eager, and torch.compile where
    cheap (the host's 1M; on the GPU only with --compile: it compiles for about a minute)."""
    rows = []
    for size in args.sizes.split(","):
        big = size == "100m"
        # the host's 100M step takes seconds: fewer steps there
        steps, warm, rounds = (
            (2, 1, 2) if big and not args.gpu else (5, 1, 2) if big else (20, 2, 3)
        )
        for dt in args.dtypes.split(","):
            base = dict(size=size, dtype=dt, steps=steps, warm=warm, rounds=rounds)
            rows.append({**base, "impl": "kinac"})
            rows.append({**base, "impl": "torch eager"})
            if (args.compile if args.gpu else not big) and not args.no_compile:
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
    ap.add_argument("--compile", action="store_true", help="torch.compile rows on the GPU too")
    ap.add_argument("--no-compile", action="store_true", help="no torch.compile rows")
    ap.add_argument(
        "--row-timeout", type=float, default=600.0, help="seconds per row before it is stopped"
    )
    ap.add_argument(
        "--parallel-check",
        metavar="N",
        type=int,
        help="instead: train each --sizes model 20 steps on one device and data-parallel on N",
    )
    ap.add_argument("--layouts", default="dp,tp,2d", help="with --parallel-check")
    ap.add_argument("--row", help=argparse.SUPPRESS)  # internal: measure one row, print it
    ap.add_argument("--cache", help=argparse.SUPPRESS)
    args = ap.parse_args()
    args.gpu = args.gpu or args.target == "cuda"
    device = "cuda" if args.gpu else "cpu"
    if args.row:
        one_row(json.loads(args.row), device, args.cache)
        return 0
    args.sizes = args.sizes or ("100m" if args.gpu else "1m,100m")
    args.dtypes = args.dtypes or ("f32,bf16" if args.gpu else "f32")
    cache = tempfile.mkdtemp(prefix="kinac-train-bench-")
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
