"""Host cost of one call through ``kinac.compile`` (issue 14 item 3), against eager PyTorch.

# kinac-bench: gpu   (scripts/gpu.sh runs every bench carrying this line, with --gpu)
# kinac-bench: quick   (takes --quick: scripts/gpu.sh passes it when KINAC_BENCH_QUICK is set)

What a user pays per call on top of the work: argument checks, the specialisation lookup,
binding, output allocation. A trivial entry (ten arrays of 16 floats, summed), so the work is
negligible and the time is the host's:

* arrays only, a dim parameter passed positionally, and dims passed by keyword;
* numpy arrays and torch tensors (CPU here; on ``--gpu``, torch CUDA tensors into a
  ``target='cuda'`` entry);
* the loaded runtime entry called directly (what the API adds is the difference);
* reference: one eager ``torch.add`` on the same tensors, in the same run.

On ``--gpu`` it adds the 10-array transformer block (B4 S128 D256 H4 KV2, bf16 and f32, dims
H and KV passed as arguments, as ``benches/gpu.py`` calls it), against the eager PyTorch
block's host cost: goal 15 us per call from torch tensors (12 us with margin). The same
arrays every call take the hot path (``hot path`` column: every timed call did); a row with a
fresh activation each call (a new ``x`` tensor, the weights the same) shows what a call costs
when the arrays change.

GPU host times are the median over bursts of 20 calls with the GPU drained between bursts, so
a full launch queue never makes the host wait.

    PYTHONPATH=. python3 benches/call_overhead.py [--gpu] [--out DIR] [--quick]

Writes ``call_overhead.md`` / ``call_overhead.json`` to ``--out`` (default: print only).
"""

from __future__ import annotations

import argparse
import datetime
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

N_ARRAYS = 10
GOAL_BLOCK_US = 15.0  # the goal
MARGIN_BLOCK_US = 12.0  # the target that leaves the goal a margin


def trivial_source() -> str:
    """``t10``: ten arrays summed; ``t10n``: the same with a dim parameter ``N`` (the length is
    ``N * K``, so ``N`` cannot come from the shapes alone)."""
    names = [f"a{i}" for i in range(N_ARRAYS)]
    total = names[0]
    for n in names[1:]:
        total = f"(add {total} {n})"
    plain = " ".join(f"({n} : (tensor f32 [L]))" for n in names)
    dimmed = " ".join(f"({n} : (tensor f32 [(* N K)]))" for n in names)
    return (
        "(module t10)\n"
        f"(defn t10 [{plain}] -> (tensor f32 [L])\n  {total})\n"
        f"(defn t10n [(N : dim) {dimmed}] -> (tensor f32 [(* N K)])\n  {total})\n"
    )


def host_us(fn: Callable[[], Any], burst: int, batches: int, drain: Callable[[], None]) -> float:
    """Median over ``batches`` of the host time per call of ``burst`` back-to-back calls."""
    for _ in range(burst):
        fn()
    drain()
    samples = []
    for _ in range(batches):
        t0 = time.perf_counter_ns()
        for _ in range(burst):
            fn()
        samples.append((time.perf_counter_ns() - t0) / burst / 1e3)
        drain()
    return statistics.median(samples)


calls = [0]  # calls made through counted() (the hot path column compares hot_calls with it)


def counted(fn: Callable[[], Any]) -> Callable[[], Any]:
    def call() -> Any:
        calls[0] += 1
        return fn()

    return call


def trivial_rows(device: str, quick: bool) -> list[dict[str, Any]]:
    """One row per (argument kind, call form): host us per call and the eager reference."""
    import numpy as np
    import torch

    import kinac

    target = "cuda" if device == "cuda" else "cpu"
    drain: Callable[[], None] = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    burst, batches = (20, 20) if quick else (20, 200)
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / "t10.kina"
        src.write_text(trivial_source(), encoding="utf-8")
        plain = kinac.compile(src, "t10", target=target, no_cache=True)
        dimmed = kinac.compile(src, "t10n", target=target, no_cache=True)
    rng = np.random.default_rng(0)
    nps = [rng.standard_normal(16).astype(np.float32) for _ in range(N_ARRAYS)]
    tts = [torch.from_numpy(a).to(device) for a in nps]
    kinds: dict[str, list[Any]] = {"torch": tts}
    if device == "cpu":
        kinds = {"numpy": nps, "torch": tts}
    a, b = tts[0], tts[1]
    ref = host_us(lambda: torch.add(a, b), burst, batches, drain)
    rows = []
    for kind, arrs in kinds.items():
        want = sum(np.asarray(x, dtype=np.float64) for x in nps)
        forms: list[tuple[str, Any, Callable[[], Any]]] = [
            ("arrays only", plain, lambda f=plain, x=arrs: f(*x)),
            ("dim positional", dimmed, lambda f=dimmed, x=arrs: f(4, *x)),
            ("dims by keyword", dimmed, lambda f=dimmed, x=arrs: f(*x, N=4)),
        ]
        for form, fn, call in forms:
            got = torch.from_dlpack(call()).cpu().double().numpy()
            assert np.allclose(got, want, rtol=1e-5), f"{kind} {form}: wrong result"
            for _ in range(3):  # the third call of a form memoises it: timed calls are hot
                call()
            before, hot0, n0 = fn.slow_calls, fn.hot_calls, calls[0]
            v = host_us(counted(call), burst, batches, drain)
            fast = fn.slow_calls == before  # every timed call took the fast path
            rows.append(
                {
                    "what": f"kinac.compile callable, {kind}, {form}",
                    "us": v,
                    "ref_us": ref,
                    "fast_path": fast,
                    "hot_path": fn.hot_calls - hot0 == calls[0] - n0,
                }  # fmt: skip
            )
        entry = next(iter(plain._entries.values()))
        v = host_us(lambda e=entry, x=arrs: e(*x), burst, batches, drain)
        rows.append({"what": f"runtime entry called directly, {kind}", "us": v, "ref_us": ref})
    return rows


def block_rows(quick: bool) -> list[dict[str, Any]]:
    """The 10-array transformer block through the API on the GPU, dims as arguments."""
    import torch
    from gpu_refs import SMALL, block_inputs, block_torch, causal_mask

    import kinac

    drain = torch.cuda.synchronize
    burst, batches = (20, 20) if quick else (20, 200)
    fn = kinac.compile(ROOT / "workspaces/transformer", "block", target="cuda")
    rows = []
    h, kv = SMALL["h"], SMALL["kv"]
    for dt, tdt in (("bf16", torch.bfloat16), ("f32", torch.float32)):
        ins = block_inputs(SMALL, tdt)
        mask = causal_mask(SMALL["s"], tdt, "cuda")
        ref = host_us(lambda i=ins, m=mask: block_torch(*i, h, kv, m), burst, batches, drain)
        xs = [ins[0].clone() for _ in range(burst)]  # fresh activations, cycled

        def fresh(i: list[Any] = ins, xs: list[Any] = xs, it: list[int] = [0]) -> Any:  # noqa: B006
            it[0] = (it[0] + 1) % len(xs)
            return fn(h, kv, xs[it[0]], *i[1:])

        for form, call, goal in (
            ("dims positional", lambda i=ins: fn(h, kv, *i), True),
            ("dims by keyword", lambda i=ins: fn(*i, H=h, KV=kv), True),
            ("dims positional, a fresh x each call", fresh, False),
        ):
            for _ in range(3):
                call()
            drain()
            before, hot0, n0 = fn.slow_calls, fn.hot_calls, calls[0]
            v = host_us(counted(call), burst, batches, drain)
            row = {
                "what": f"transformer block B4 S128 D256 {dt}, 10 torch CUDA arrays, {form}",
                "us": v,
                "ref_us": ref,
                "fast_path": fn.slow_calls == before,
                "hot_path": fn.hot_calls - hot0 == calls[0] - n0,
            }
            if goal:
                row["goal_us"] = GOAL_BLOCK_US
            rows.append(row)
        entry = next(e for k, e in fn._entries.items() if k[0][0].dtype == dt)
        v = host_us(lambda e=entry, i=ins: e(*i), burst, batches, drain)
        rows.append({"what": f"transformer block {dt}, GpuEntry called directly", "us": v,
                     "ref_us": ref})  # fmt: skip
    return rows


def render(rows: list[dict[str, Any]], header: str) -> str:
    lines = [header, "", "| call | host us per call | eager torch, same run (one add; the block: the eager block) | ratio | fast path | hot path | goal |",
             "|---|---|---|---|---|---|---|"]  # fmt: skip
    for r in rows:
        fast = {True: "yes", False: "NO", None: "-"}[r.get("fast_path")]
        hot = {True: "yes", False: "no", None: "-"}[r.get("hot_path")]
        goal = f"<= {r['goal_us']:.0f} us ({'met' if r['us'] <= r['goal_us'] else 'NOT met'}; <= {MARGIN_BLOCK_US:.0f} with margin: {'yes' if r['us'] <= MARGIN_BLOCK_US else 'no'})" if "goal_us" in r else "-"  # fmt: skip
        lines.append(
            f"| {r['what']} | {r['us']:.2f} | {r['ref_us']:.2f} | {r['us'] / r['ref_us']:.2f}x | {fast} | {hot} | {goal} |"
        )
    return "\n".join(lines) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--gpu", action="store_true", help="CUDA entries and torch CUDA tensors")
    ap.add_argument("--out", default=None)
    ap.add_argument("--quick", action="store_true")
    a = ap.parse_args()
    import torch

    device = "cpu"
    if a.gpu:
        from kinac.rt import cuda

        if not cuda.available():
            print(f"call_overhead: no GPU ({cuda.unavailable_reason()}); nothing to do")
            return 0
        device = "cuda"
    else:
        torch.set_num_threads(1)
    stamp = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
    rows = trivial_rows(device, a.quick)
    errors = []
    if device == "cuda":
        try:
            rows += block_rows(a.quick)
        except Exception as e:  # noqa: BLE001 - report it with the rows that did run
            import traceback

            traceback.print_exc()
            errors.append(f"block: {type(e).__name__}: {e}")
    where = torch.cuda.get_device_name() if device == "cuda" else "CPU"
    md = render(rows, f"## Host cost per call through kinac.compile ({stamp}, {where}, torch {torch.__version__})")  # fmt: skip
    if errors:
        md += "\nErrors: " + "; ".join(errors) + "\n"
    print(md)
    if a.out:
        out = Path(a.out)
        out.mkdir(parents=True, exist_ok=True)
        (out / "call_overhead.md").write_text(md, encoding="utf-8")
        payload = {"date": stamp, "device": where, "rows": rows, "errors": errors}
        (out / "call_overhead.json").write_text(json.dumps(payload, indent=1), encoding="utf-8")
    bad = [r for r in rows if r.get("fast_path") is False]
    return 1 if errors or bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
