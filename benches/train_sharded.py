"""Training the decoder on the simulated mesh in data-, tensor- and 2-D-parallel layouts, against
one device: each step's loss, the collectives every device runs, the bytes it moves, the time.

    PYTHONPATH=. python3 benches/train_sharded.py --simulate 4                 1M, dp/tp/2d
    PYTHONPATH=. python3 benches/train_sharded.py --simulate 4 --sizes 100m --steps 20

The model is ``workspaces/decoder`` (``decoder_1m`` / ``decoder_100m``), AdamW (lr 3e-4), seed
0, the synthetic task; one device is ``kinac.train.Trainer``; the layouts are
``kinac.api_grad_sharded.sharded_trainer`` (the gradient graph's per-device program on the
threaded simulator: ``dp`` the batch split, ``tp`` Megatron, ``2d`` dp x tp = 2 x N/2). Per row:
the largest relative difference of a step's loss from one device's, the first and last loss,
the collectives per device per step by kind and axis, the bytes one device moves per step
(the cost model's count), seconds per step after the first, and the first step (compilation
included). The simulator runs every device's segments on this machine's cores: its time is not
a speed-up claim, only what a step costs to simulate. Writes ``train_sharded.md``/``.json`` to
``--out`` and prints the markdown.
"""

from __future__ import annotations

import argparse
import datetime
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT)]

WS = ROOT / "workspaces" / "decoder"
LR = 3e-4


def run(trainer: Any, steps: int) -> dict[str, Any]:
    """``steps`` steps; the losses, the first step's seconds, the median of the others."""
    t0 = time.perf_counter()
    results = trainer.run(steps)
    wall = time.perf_counter() - t0
    later = sorted(r.seconds for r in results[1:]) or [results[0].seconds]
    return {
        "losses": [r.loss for r in results],
        "first_s": results[0].seconds,
        "step_s": later[len(later) // 2],
        "wall_s": wall,
    }


def row(
    entry: str, layout: str | None, n: int, steps: int, cache: str, bucket_mb: float | None = None
) -> dict[str, Any]:
    from kinac.api_grad_sharded import sharded_trainer
    from kinac.train import Trainer

    t0 = time.perf_counter()
    if layout is None:
        tr = Trainer(WS, entry, lr=LR, seed=0, cache_dir=cache)
    else:
        tr = sharded_trainer(
            WS, entry, n, layout, bucket_mb=bucket_mb, lr=LR, seed=0, cache_dir=cache
        )
    setup = time.perf_counter() - t0
    out = run(tr, steps)
    name = layout or "1 device"
    if layout is not None and bucket_mb:
        name += f" ({bucket_mb:g} MB buckets)"
    out.update(entry=entry, layout=name, setup_s=setup, weights=tr.n_weights)
    if layout is not None:
        log = tr.parallel.log
        out["mesh"] = " x ".join(
            f"{a}={s}" for a, s in zip(tr.parallel.mesh.axes, tr.parallel.mesh.shape, strict=True)
        )
        out["collectives"] = {f"{k} over {a}": c for (k, a), c in sorted(log.counts().items())}
        out["bytes_per_device"] = log.bytes_per_device()
    return out


def markdown(rows: list[dict[str, Any]]) -> str:
    lines = [
        "| model | layout | mesh | max rel. loss diff | loss first -> last | collectives per "
        "device per step | bytes per device per step | s/step | first step s |",
        "|---|---|---|---:|---|---|---:|---:|---:|",
    ]
    ref: dict[str, list[float]] = {}
    for r in rows:
        if r["layout"] == "1 device":
            ref[r["entry"]] = r["losses"]
        base = ref.get(r["entry"])
        diff = (
            max(abs(a - b) / abs(a) for a, b in zip(base, r["losses"], strict=True))
            if base is not None
            else float("nan")
        )
        colls = ", ".join(f"{c} {k}" for k, c in r.get("collectives", {}).items()) or "-"
        lines.append(
            f"| {r['entry']} | {r['layout']} | {r.get('mesh', '-')} | "
            f"{diff:.1e} | {r['losses'][0]:.4f} -> {r['losses'][-1]:.4f} | {colls} | "
            f"{r.get('bytes_per_device', 0):,} | {r['step_s']:.3f} | {r['first_s']:.1f} |"
        )
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--simulate", type=int, default=4, help="simulated devices (default 4)")
    ap.add_argument("--sizes", default="1m", help="comma-separated: 1m, 100m")
    ap.add_argument("--layouts", default="dp,tp,2d")
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--bucket-mb", type=float, default=None, help="bucket the all-reduces")
    ap.add_argument("--out", default=None, help="directory for train_sharded.md/.json")
    ap.add_argument("--cache-dir", default=None)
    args = ap.parse_args()
    cache = args.cache_dir or tempfile.mkdtemp(prefix="kinac-train-sharded-")
    rows = []
    for size in args.sizes.split(","):
        entry = f"decoder_{size.strip()}"
        for layout in [None, *args.layouts.split(",")]:
            r = row(entry, layout, args.simulate, args.steps, cache, args.bucket_mb)
            rows.append(r)
            print(
                f"{entry} {r['layout']}: {r['losses'][0]:.4f} -> {r['losses'][-1]:.4f}, "
                f"{r['step_s']:.3f} s/step, first {r['first_s']:.1f} s",
                file=sys.stderr,
                flush=True,
            )
    md = markdown(rows)
    stamp = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
    text = f"Sharded training on {args.simulate} simulated devices ({stamp}), {args.steps} steps\n\n{md}\n"
    print(text)
    if args.out:
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        (out / "train_sharded.md").write_text(text)
        (out / "train_sharded.json").write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
