# kinac-bench: gpu
"""Forward + backward of the transformer block: ``kinac.value_and_grad`` against PyTorch.

    PYTHONPATH=. python3 benches/grad.py                   host: the small block, f32
    PYTHONPATH=. python3 benches/grad.py --gpu --out DIR   GPU (scripts/gpu.sh): the 45M block,
                                                           f32 and bf16 (--small: the small too)

The loss is ``mean((block(x) - y)^2)`` over the block of ``workspaces/transformer`` (the
anchors' sizes: small B=4 S=128 D=256 H=4 KV=2 F=704; 45M B=4 S=1024 D=2048 H=16 KV=4
F=5632), differentiated with respect to all nine weights. PyTorch runs the same block
(``tests/test_grad_models.py``: ``torch_block``) in eager mode and under ``torch.compile``,
``loss.backward()`` with the weights' ``.grad`` reset each step; bf16 rows run both with bf16
weights and activations (kinac's bf16 gradients accumulate matmuls and reductions in f32).

Per row, each implementation alone on the GPU (the previous rows' tensors, entries and
compiled functions dropped, ``gc`` and ``empty_cache`` run first):

* **time**: the median of ``--steps`` synchronised steps (forward + backward) after
  ``--warmup`` untimed ones; ``first call`` is the first step alone (kinac: compilation,
  PTX load and graph capture; torch.compile: its compilation), never in the median;
* **peak MiB**: the most device memory the step holds at once, *inputs included*. PyTorch:
  ``torch.cuda.max_memory_allocated()`` over the timed steps minus what was allocated before
  the row (inputs x, y and the weights, saved activations, gradients, cuBLAS workspace).
  kinac: the inputs' bytes (torch tensors, passed without a copy) plus the peak of kinac's
  memory pool over the timed steps minus its use before the row (arena, outputs, cuBLAS
  workspace, anything the runtime keeps); each step's outputs are dropped before the next,
  as eager drops ``.grad``; ``planned MiB`` is what the lowered entry's plan says
  (params + outputs + arena + workspace: :func:`kinac.ir.gpu.cost.planned_bytes`);
* ``kinac``: the default GPU gradient (in f32 the attention probabilities ``P`` are stored;
  the backward is ordered for memory, ``kinac/grad/schedule.py``: planned 1104 MiB at the
  45M block, against 1376 before);
* ``kinac (recompute P)`` (f32 on the GPU, an extra row): the same gradient with ``P``
  recomputed in the backward as well, which kinac does by default for bf16/f16 only
  (``docs/gradients-gpu.md``): the f32 memory/time trade, measured;
* **max rel err**: the largest ``max|g - g_eager| / max|g_eager|`` over the nine gradients,
  against eager PyTorch of the same dtype, on the host in f64.

Writes ``grad_bench.md``/``.json`` to ``--out``.
"""

from __future__ import annotations

import argparse
import functools
import gc
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
MiB = 2**20
ROWS: list[dict[str, Any]] = []


def _sync(device: str) -> None:
    import torch

    if device == "cuda":
        torch.cuda.synchronize()


def _time(fn: Callable[[], Any], device: str, steps: int) -> float:
    """The median seconds of ``fn`` over ``steps`` synchronised calls (results dropped)."""
    times = []
    for _ in range(steps):
        _sync(device)
        t = time.perf_counter()
        fn()
        _sync(device)
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def _clean(device: str) -> tuple[int, int]:
    """Drop what earlier rows left (tensors, entries, compiled graphs): ``(torch bytes, kinac
    pool bytes)`` still allocated, the baseline of this row's peaks."""
    gc.collect()
    if device != "cuda":
        return 0, 0
    import torch

    torch.cuda.synchronize()
    torch.cuda.empty_cache()
    return torch.cuda.memory_allocated(), _pool_bytes("current")


def _pool_bytes(which: str) -> int:
    """kinac's device pool: ``current`` or ``peak`` allocated bytes (0 before it exists)."""
    from kinac.rt import cuda

    res = cuda.default_resource()
    if not hasattr(res, "memory_stats"):
        return 0
    return int(res.memory_stats().get(f"allocated_bytes.all.{which}", 0))


def _pool_reset() -> None:
    from kinac.rt import cuda

    res = cuda.default_resource()
    if hasattr(res, "reset_peak_stats"):
        res.reset_peak_stats()


def _arrays(size: str, dtype: str, device: str) -> tuple[dict[str, Any], dict[str, int]]:
    import torch
    from test_grad_models import block_arrays

    d = SIZES[size]
    arrays = block_arrays(d["B"], d["S"], d["D"], d["F"], d["H"], d["KV"])
    tdt = torch.bfloat16 if dtype == "bf16" else torch.float32
    return {n: torch.tensor(a).to(device=device, dtype=tdt) for n, a in arrays.items()}, d


def _host(g: Any) -> Any:
    """A gradient (a torch tensor or a kinac array) as a float64 torch tensor on the host."""
    import torch

    if not isinstance(g, torch.Tensor):
        g = torch.from_dlpack(g)
    if g.dtype in (torch.int16, torch.uint16):  # bf16 bit patterns (numpy has no bf16)
        g = g.view(torch.bfloat16)
    return g.detach().to(device="cpu", dtype=torch.float64)


def _planned(fn: Any) -> dict[str, int] | None:
    """The loaded GPU entry's planned bytes (:func:`kinac.ir.gpu.cost.planned_bytes`)."""
    from kinac.ir.gpu.cost import planned_bytes

    for e in getattr(fn, "_entries", {}).values():
        lowered = getattr(getattr(e, "entry", None), "lowered", None)
        if lowered is not None and hasattr(lowered, "arena_bytes"):
            return planned_bytes(lowered)
    return None


def kinac_row(
    size: str, dtype: str, device: str, ws: Path, cache: str, steps: int, warmup: int
) -> dict[str, Any]:
    from test_grad_models import BLOCK_W, block_names

    import kinac

    base_t, base_k = _clean(device)
    t, d = _arrays(size, dtype, device)
    inputs = _clean(device)[0] - base_t
    target = "cuda" if device == "cuda" else "cpu"
    xs = [t[n] for n in block_names()]
    t0 = time.perf_counter()
    fn = kinac.value_and_grad(str(ws), "block-loss", wrt=BLOCK_W, target=target, cache_dir=cache)
    _, grads = fn(d["H"], d["KV"], *xs)
    _sync(device)
    first = time.perf_counter() - t0
    grads = {n: _host(g) for n, g in grads.items()}
    _ = None
    for _i in range(warmup):
        fn(d["H"], d["KV"], *xs)
    row: dict[str, Any] = {"first_s": round(first, 2)}
    if device == "cuda":
        import torch

        _sync(device)
        torch.cuda.reset_peak_memory_stats()
        _pool_reset()
    row["seconds"] = _time(lambda: fn(d["H"], d["KV"], *xs), device, steps)
    if device == "cuda":
        import torch

        torch_peak = torch.cuda.max_memory_allocated() - base_t
        pool_peak = _pool_bytes("peak") - base_k
        row["peak_mib"] = (torch_peak + pool_peak) / MiB
        row["inputs_mib"] = inputs / MiB
        row["pool_peak_mib"] = pool_peak / MiB
        plan = _planned(fn)
        if plan is not None:
            row["planned_mib"] = plan["total"] / MiB
            row["arena_mib"] = plan["arena"] / MiB
    row["grads"] = grads
    return row  # its entry and tensors go with this frame (main cleans before the next row)


def _recomputed_entry(size: str, dtype: str, ws: Path, cache: str) -> Any:
    """The GPU gradient entry of the default pipeline (``rematerialize``: free elementwise
    recomputes, the backward ordered for memory) with the attention probabilities recomputed
    in this dtype too (``softmax_dtypes=(dtype,)``; the default recomputes bf16/f16 only):
    the f32 memory/time trade of ``docs/gradients-gpu.md``, measured rather than estimated."""
    from test_grad_models import BLOCK_W

    from kinac import pipeline_grad
    from kinac.grad.remat import rematerialize
    from kinac.pipeline_gpu import link_lowered, lower_graph
    from kinac.pipeline_support import EntryKey
    from kinac.rt.cuda.entry import load_gpu_entry
    from kinac.session import Session

    dims = tuple(sorted(SIZES[size].items()))
    key = EntryKey("loss.kina", "block-loss", dims, (("T", dtype),), "cuda")
    db = Session(ws, cache_dir=cache).db
    try:
        spec = pipeline_grad.grad_graph(db, (key, tuple(BLOCK_W)))
        assert spec.graph is not None, spec.problem
        graph = rematerialize(spec.graph, softmax_dtypes=(dtype,))
        lo = lower_graph(db, graph, key, "GPU lowering of the gradient (bench)")
        ptx = link_lowered(db, lo, key, "PTX of the gradient (bench)")
    finally:
        db.commit()
        db.close()
    return load_gpu_entry(lo, ptx)


def kinac_recompute_row(
    size: str, dtype: str, device: str, ws: Path, cache: str, steps: int, warmup: int
) -> dict[str, Any]:
    """As :func:`kinac_row`, for :func:`_recomputed_entry` (GPU only)."""
    from test_grad_models import BLOCK_W, block_names

    from kinac.ir.gpu.cost import planned_bytes

    base_t, base_k = _clean(device)
    t, d = _arrays(size, dtype, device)
    inputs = _clean(device)[0] - base_t
    xs = [t[n] for n in block_names()]
    t0 = time.perf_counter()
    entry = _recomputed_entry(size, dtype, ws, cache)
    outs = entry(*xs)
    _sync(device)
    first = time.perf_counter() - t0
    grads = {n: _host(g) for n, g in zip(BLOCK_W, outs[1:], strict=True)}
    outs = None
    for _i in range(warmup):
        entry(*xs)
    import torch

    _sync(device)
    torch.cuda.reset_peak_memory_stats()
    _pool_reset()
    sec = _time(lambda: entry(*xs), device, steps)
    pool_peak = _pool_bytes("peak") - base_k
    plan = planned_bytes(entry.lowered)
    return {
        "seconds": sec,
        "first_s": round(first, 2),
        "peak_mib": (torch.cuda.max_memory_allocated() - base_t + pool_peak) / MiB,
        "inputs_mib": inputs / MiB,
        "pool_peak_mib": pool_peak / MiB,
        "planned_mib": plan["total"] / MiB,
        "arena_mib": plan["arena"] / MiB,
        "grads": grads,
    }


def torch_row(
    size: str, dtype: str, device: str, compiled: bool, steps: int, warmup: int
) -> dict[str, Any]:
    import torch
    from test_grad_models import BLOCK_W, torch_block

    if compiled:
        torch._dynamo.reset()
    base_t, _ = _clean(device)
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
    grads = {n: _host(t[n].grad) for n in BLOCK_W}
    for _i in range(warmup):
        step()
    if device == "cuda":
        _sync(device)
        torch.cuda.reset_peak_memory_stats()
    sec = _time(step, device, steps)
    peak = (torch.cuda.max_memory_allocated() - base_t) / MiB if device == "cuda" else None
    return {"seconds": sec, "first_s": round(first, 2), "peak_mib": peak, "grads": grads}


def max_rel_err(got: dict[str, Any], want: dict[str, Any]) -> float:
    """The largest ``max|g - w| / max|w|`` over the gradients (host f64 tensors)."""
    worst = 0.0
    for n, w in want.items():
        worst = max(worst, float((got[n] - w).abs().max() / w.abs().max()))
    return worst


def main() -> int:
    from test_grad_models import BLOCK_LOSS

    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--gpu", action="store_true", help="run on the GPU (needs CUDA)")
    ap.add_argument("--out", default=None, help="write grad_bench.md/.json here")
    ap.add_argument("--no-compile", action="store_true", help="skip torch.compile")
    ap.add_argument("--small", action="store_true", help="on the GPU, the small block too")
    ap.add_argument(
        "--no-recompute",
        action="store_true",
        help="skip the f32 row with attention probabilities recomputed (not kinac's default)",
    )
    ap.add_argument("--steps", type=int, default=None, help="timed steps (GPU 20, host 5)")
    ap.add_argument("--warmup", type=int, default=3, help="untimed steps after the first")
    args = ap.parse_args()
    device = "cuda" if args.gpu else "cpu"
    tmp = Path(tempfile.mkdtemp(prefix="kinac-grad-bench-"))
    ws = tmp / "transformer"
    shutil.copytree(ROOT / "workspaces" / "transformer", ws)
    (ws / "loss.kina").write_text(BLOCK_LOSS)
    cache = str(tmp / "cache")
    sizes = (["small"] if args.small else []) + ["45M"]
    plan = [("small", "f32")] if not args.gpu else [(s, d) for s in sizes for d in ("f32", "bf16")]
    steps = args.steps or (20 if args.gpu else 5)
    started = time.perf_counter()
    for size, dt in plan:
        ref: dict[str, Any] | None = None
        impls: list[tuple[str, Callable[[], dict[str, Any]]]] = [
            ("torch eager", functools.partial(torch_row, size, dt, device, False, steps, args.warmup)),
            ("kinac", functools.partial(kinac_row, size, dt, device, ws, cache, steps, args.warmup)),
        ]  # fmt: skip
        if args.gpu and dt == "f32" and not args.no_recompute:
            impls.append(
                (
                    "kinac (recompute P)",
                    functools.partial(
                        kinac_recompute_row, size, dt, device, ws, cache, steps, args.warmup
                    ),
                )  # fmt: skip
            )
        if not args.no_compile:
            impls.append(
                (
                    "torch.compile",
                    functools.partial(torch_row, size, dt, device, True, steps, args.warmup),
                )  # fmt: skip
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
            if impl == "torch.compile":
                import torch

                torch._dynamo.reset()
            _clean(device)
    md = markdown() + f"\n\nwall time {time.perf_counter() - started:.0f} s (compilations included)"
    print(md)
    if args.out:
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        (out / "grad_bench.md").write_text(md + "\n")
        (out / "grad_bench.json").write_text(json.dumps(ROWS, indent=2) + "\n")
    return 1 if any("error" in r for r in ROWS) else 0


def _mib(r: dict[str, Any], k: str) -> str:
    return f"{r[k]:.0f}" if r.get(k) is not None else "-"


def markdown() -> str:
    lines = [
        "| block | dtype | impl | fwd+bwd (median) | first call | peak MiB (inputs incl.) "
        "| planned MiB | max rel err vs eager |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in ROWS:
        if "error" in r:
            lines.append(f"| {r['block']} | {r['dtype']} | {r['impl']} | error: {r['error']} |||||")
            continue
        err = f"{r['max_rel_err']:.1e}" if "max_rel_err" in r else "-"
        lines.append(
            f"| {r['block']} | {r['dtype']} | {r['impl']} | {r['seconds'] * 1e3:.2f} ms | "
            f"{r['first_s']} s | {_mib(r, 'peak_mib')} | {_mib(r, 'planned_mib')} | {err} |"
        )
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
