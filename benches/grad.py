# kinac-bench: gpu
"""Forward + backward of the transformer block: ``kinac.value_and_grad`` against PyTorch.

    PYTHONPATH=. python3 benches/grad.py                   host: the small block, f32
    PYTHONPATH=. python3 benches/grad.py --gpu --out DIR   GPU (scripts/gpu.sh): small and 45M
                                                           blocks, f32 and bf16

The loss is ``mean((block(x) - y)^2)`` over the block of ``workspaces/transformer`` (the
anchors' sizes: small B=4 S=128 D=256 H=4 KV=2 F=704; 45M B=4 S=1024 D=2048 H=16 KV=4
F=5632), differentiated with respect to all nine weights. PyTorch runs the same block
(``tests/test_grad_models.py``: ``torch_block``) in eager mode and under ``torch.compile``,
``loss.backward()`` with the weights' ``.grad`` reset each step; bf16 rows run both with bf16
weights and activations. Per row: the median step time (forward + backward, synchronised),
the first call's time for kinac (compilation included), the largest relative gradient error
against eager PyTorch of the same dtype, and on the GPU the peak memory (torch's
``max_memory_allocated``; kinac's pool peak). Writes ``grad_bench.md``/``.json`` to ``--out``.
"""

from __future__ import annotations

import argparse
import functools
import json
import shutil
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

SIZES = {
    "small": dict(B=4, S=128, D=256, H=4, KV=2, F=704),
    "45M": dict(B=4, S=1024, D=2048, H=16, KV=4, F=5632),
}
ROWS: list[dict[str, Any]] = []


def _sync(device: str) -> None:
    import torch

    if device == "cuda":
        torch.cuda.synchronize()


def _time(fn: Callable[[], Any], device: str, steps: int) -> float:
    """The median seconds of ``fn`` over ``steps`` synchronised calls."""
    times = []
    for _ in range(steps):
        _sync(device)
        t = time.perf_counter()
        fn()
        _sync(device)
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def _arrays(size: str, dtype: str, device: str) -> tuple[dict[str, Any], dict[str, int]]:
    import torch
    from test_grad_models import block_arrays

    d = SIZES[size]
    arrays = block_arrays(d["B"], d["S"], d["D"], d["F"], d["H"], d["KV"])
    tdt = torch.bfloat16 if dtype == "bf16" else torch.float32
    return {n: torch.tensor(a).to(device=device, dtype=tdt) for n, a in arrays.items()}, d


def _pool(device: str, reset: bool) -> float | None:
    if device != "cuda":
        return None
    from kinac.rt import cuda

    res = cuda.default_resource()
    if not hasattr(res, "memory_stats"):
        return None
    if reset:
        res.reset_peak_stats()
        return 0.0
    return float(res.memory_stats().get("allocated_bytes.all.peak", 0)) / 2**20


def kinac_row(
    size: str, dtype: str, device: str, ws: Path, cache: str, steps: int
) -> dict[str, Any]:
    from test_grad_models import BLOCK_W, block_names

    import kinac

    t, d = _arrays(size, dtype, device)
    target = "cuda" if device == "cuda" else "cpu"
    xs = [t[n] for n in block_names()]
    t0 = time.perf_counter()
    fn = kinac.value_and_grad(ws, "block-loss", wrt=BLOCK_W, target=target, cache_dir=cache)
    _, grads = fn(d["H"], d["KV"], *xs)
    _sync(device)
    first = time.perf_counter() - t0
    _pool(device, reset=True)
    sec = _time(lambda: fn(d["H"], d["KV"], *xs), device, steps)
    peak = _pool(device, reset=False)
    return {"seconds": sec, "first_s": round(first, 2), "peak_mib": peak, "grads": grads}


def torch_row(size: str, dtype: str, device: str, compiled: bool, steps: int) -> dict[str, Any]:
    import torch
    from test_grad_models import BLOCK_W, torch_block

    t, d = _arrays(size, dtype, device)
    for n in BLOCK_W:
        t[n].requires_grad_(True)
    loss = torch_block
    if compiled:
        loss = torch.compile(torch_block)

    def step() -> None:
        for n in BLOCK_W:
            t[n].grad = None
        loss(t, d["H"], d["KV"]).backward()

    t0 = time.perf_counter()
    step()
    _sync(device)
    first = time.perf_counter() - t0
    if device == "cuda":
        torch.cuda.reset_peak_memory_stats()
    sec = _time(step, device, steps)
    peak = torch.cuda.max_memory_allocated() / 2**20 if device == "cuda" else None
    return {
        "seconds": sec,
        "first_s": round(first, 2),
        "peak_mib": peak,
        "grads": {n: t[n].grad for n in BLOCK_W},
    }


def max_rel_err(got: dict[str, Any], want: dict[str, Any]) -> float:
    import torch

    worst = 0.0
    for n, w in want.items():
        g = torch.from_dlpack(got[n]) if not isinstance(got[n], torch.Tensor) else got[n]
        if g.dtype in (torch.int16, torch.uint16):  # bf16 bit patterns (numpy has no bf16)
            g = g.view(torch.bfloat16)
        g = g.to(device=w.device, dtype=torch.float64)
        w64 = w.to(torch.float64)
        worst = max(worst, float((g - w64).abs().max() / w64.abs().max()))
    return worst


def main() -> int:
    from test_grad_models import BLOCK_LOSS

    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--gpu", action="store_true", help="run on the GPU (needs CUDA)")
    ap.add_argument("--out", default=None, help="write grad_bench.md/.json here")
    ap.add_argument("--no-compile", action="store_true", help="skip torch.compile")
    args = ap.parse_args()
    device = "cuda" if args.gpu else "cpu"
    tmp = Path(tempfile.mkdtemp(prefix="kinac-grad-bench-"))
    ws = tmp / "transformer"
    shutil.copytree(ROOT / "workspaces" / "transformer", ws)
    (ws / "loss.kina").write_text(BLOCK_LOSS)
    cache = str(tmp / "cache")
    plan = [("small", "f32")] if not args.gpu else [(s, d) for s in SIZES for d in ("f32", "bf16")]
    for size, dt in plan:
        steps = 5 if size == "45M" or not args.gpu else 20
        ref: dict[str, Any] | None = None
        impls: list[tuple[str, Callable[[], dict[str, Any]]]] = [
            ("torch eager", functools.partial(torch_row, size, dt, device, False, steps)),
            ("kinac", functools.partial(kinac_row, size, dt, device, ws, cache, steps)),
        ]
        if not args.no_compile:
            impls.append(
                ("torch.compile", functools.partial(torch_row, size, dt, device, True, steps))
            )
        for impl, fn in impls:
            row: dict[str, Any] = {"block": size, "dtype": dt, "impl": impl, "device": device}
            try:
                res = fn()
                grads = res.pop("grads")
                if impl == "torch eager":
                    ref = grads
                elif ref is not None:
                    res["max_rel_err"] = max_rel_err(grads, ref)
                row.update(res)
            except Exception as e:  # noqa: BLE001 - a failing row is reported, not fatal
                row["error"] = f"{type(e).__name__}: {e}"
                traceback.print_exc()
            ROWS.append(row)
            print(json.dumps(row), flush=True)
    md = markdown()
    print(md)
    if args.out:
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        (out / "grad_bench.md").write_text(md + "\n")
        (out / "grad_bench.json").write_text(json.dumps(ROWS, indent=2) + "\n")
    return 1 if any("error" in r for r in ROWS) else 0


def markdown() -> str:
    lines = [
        "| block | dtype | impl | fwd+bwd (median) | first call | peak MiB | max rel err vs eager |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in ROWS:
        if "error" in r:
            lines.append(f"| {r['block']} | {r['dtype']} | {r['impl']} | error: {r['error']} ||||")
            continue
        peak = f"{r['peak_mib']:.0f}" if r.get("peak_mib") is not None else "-"
        err = f"{r['max_rel_err']:.1e}" if "max_rel_err" in r else "-"
        lines.append(
            f"| {r['block']} | {r['dtype']} | {r['impl']} | {r['seconds'] * 1e3:.2f} ms | "
            f"{r['first_s']} s | {peak} | {err} |"
        )
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
