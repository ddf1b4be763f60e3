"""Issue 17's last rows on a GPU: host-input calls of the MLP against device input, the caller's
pinned ``x`` with its DMA queued first (2026-12-02e) and the path before, in ONE process.

    PYTHONPATH=. python3 benches/runtime_direct_probe.py --out DIR [--sizes 0.5,1,2,4,16]

Per size of ``x`` (``benches/runtime_sweep.py``'s MLPs: the compute grows faster than the copy),
pipelined us per call, rounds interleaved, medians of the rounds:

* ``dev``: a device ``x`` (the reference of every ratio);
* ``numpy``: a numpy ``x`` (staged through the turn's pinned block);
* ``pe``: ``x`` in a ``pinned_empty`` array (DMA'd where it is, the call waits for it), with the
  early DMA (``staging_direct``) and without (``stager.early_dma = False``: ``steady_call``);
* ``pe_calls``: the early DMA as driver calls (``stager.direct_by_calls``) instead of the copy
  graph;
* ``pt``: ``x`` a ``pin_memory()`` torch CPU tensor, early DMA and pinnedness cached, early DMA
  with ``is_pinned()`` every call (``pt_nocache``), the same as driver calls (``pt_calls``: the
  defaults), and the path before (neither);

each output compared bit for bit with the device ``x``'s; the DMA alone (CUDA events, torch's
copy from pinned memory). At 0.5 MiB also the host's own time per call of the pinned ``x``
(the copy graph's launch stamped: the host work before it and after it, median), both paths.

Writes ``DIR/direct_probe.{md,json}`` and prints the markdown.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from benches.runtime_modes import _copy_ms, _mlp_fns, _weights  # noqa: E402
from benches.runtime_sweep import SWEEP  # noqa: E402

SIZES = {
    "0.5": SWEEP[0],
    "1": SWEEP[1],
    "2": SWEEP[2],
    "4": SWEEP[3],
    "8": SWEEP[4],
    "16": SWEEP[5],
}
# x 0.5 MiB with a narrow hidden layer: the compute shorter than the DMA, so the loop's period
# is the DMA plus the host work it does not overlap (what the early DMA shortens), not the compute
SIZES["0.5-dma"] = (4, 128, 256, 128)
MODES = (
    "dev", "numpy", "pe_early", "pe_calls", "pe_before", "pt_early", "pt_nocache", "pt_calls",
    "pt_before",
)  # fmt: skip
# mode -> (input, early DMA, pinnedness cached, the early DMA as driver calls)
SETTINGS = {
    "dev": ("dev", False, False, False),
    "numpy": ("numpy", True, False, True),
    "pe_early": ("pe", True, True, False),
    "pe_calls": ("pe", True, False, True),
    "pe_before": ("pe", False, False, False),
    "pt_early": ("pt", True, True, False),
    "pt_nocache": ("pt", True, False, False),
    "pt_calls": ("pt", True, False, True),
    "pt_before": ("pt", False, False, False),
}


def _per_call_us(call: Any, n: int, sync: Any) -> float:
    t0 = time.perf_counter()
    for _ in range(n):
        call()
    sync()
    return (time.perf_counter() - t0) * 1e6 / n


def _stamps(fn: Any, args: tuple[Any, ...], st: Any, n: int) -> tuple[float, float]:
    """Median host us before and after the copy graph's launch, per call of ``fn(*args)``."""
    stamp = [0]
    clock = time.perf_counter_ns
    saved = []
    for b in st._direct_built.values():
        if b is not None:
            launch = b.launch

            def run(ex: Any, s: Any, launch: Any = launch) -> int:
                stamp[0] = clock()
                return int(launch(ex, s))

            saved.append((b, launch))
            b.launch = run
    pre, post = [], []
    try:
        for _ in range(n):
            t0 = clock()
            fn(*args)
            t2 = clock()
            pre.append((stamp[0] - t0) / 1e3)
            post.append((t2 - stamp[0]) / 1e3)
    finally:
        for b, launch in saved:
            b.launch = launch
    return statistics.median(pre), statistics.median(post)


def probe(fn: Any, size: str, rounds: int) -> dict[str, Any]:
    import numpy as np
    import torch

    from kinac.rt.cuda.pinned import pinned_empty

    b, s, d, f = SIZES[size]
    sync = torch.cuda.synchronize
    ws = _weights(torch, d, f)
    x = np.random.default_rng(0).standard_normal((b, s, d)).astype(np.float32)
    x_dev = torch.from_numpy(x).cuda()
    pe = pinned_empty(x.shape, x.dtype)
    pe[...] = x
    pt = torch.from_numpy(x).pin_memory()
    want = torch.from_dlpack(fn(x_dev, *ws)).cpu().numpy()
    ins = {"dev": x_dev, "numpy": x, "pe": pe, "pt": pt}
    for _ in range(4):
        fn(x, *ws)
    shapes = (x.shape, *(tuple(w.shape) for w in ws))
    st = next(  # (this MLP's entry: two sizes share x's shape)
        e._stager
        for k, e in fn._entries.items()
        if k[0][0].device == "cpu" and tuple(tuple(t.shape) for t in k[0]) == shapes
    )
    same: dict[str, bool] = {}

    def setmode(mode: str) -> Any:
        what, st.early_dma, st.pin_cache, st.direct_by_calls = SETTINGS[mode]
        return ins[what]

    for mode in MODES:  # warm-up, and each path's result bit for bit
        xx = setmode(mode)
        for _ in range(6):
            fn(xx, *ws)
        same[mode] = bool(np.array_equal(torch.from_dlpack(fn(xx, *ws)).cpu().numpy(), want))
    sync()
    est = max(20.0, 30.0 * x.nbytes / 2**19)  # us per call, roughly
    n = int(min(300, max(20, 8000 / est)))
    per: dict[str, list[float]] = {m: [] for m in MODES}
    d0 = st.direct
    for _ in range(rounds):
        for mode in MODES:
            xx = setmode(mode)
            per[mode].append(_per_call_us(lambda xx=xx: fn(xx, *ws), n, sync))
    r: dict[str, Any] = {"size": size, "shape": [b, s, d, f], "n": n, "same": same}
    r["us"] = {m: statistics.median(v) for m, v in per.items()}
    r["ratio"] = {m: r["us"][m] / r["us"]["dev"] for m in MODES}
    r["dma_us"] = _copy_ms(torch, x.nbytes) * 1e3
    r["direct_dmas"] = st.direct - d0
    if size.startswith("0.5"):
        for mode in ("pe_early", "pe_before", "pt_early", "pt_before"):
            xx = setmode(mode)
            r[f"host_{mode}"] = _stamps(fn, (xx, *ws), st, 400)
        sync()
    st.early_dma, st.pin_cache, st.direct_by_calls = True, False, True
    return r


def table(res: list[dict[str, Any]]) -> list[str]:
    out = [
        "| x MiB [B,S,D,F] | DMA us | device x us | numpy x | pinned_empty, DMA first (graph) | "
        "pinned_empty, DMA first (driver calls) | pinned_empty, before | pin_memory(), DMA "
        "first + cached | pin_memory(), DMA first, is_pinned() each call | pin_memory(), DMA "
        "first (driver calls) | pin_memory(), before | all bit-identical |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in res:
        u, q = r["us"], r["ratio"]
        cells = [f"{u[m]:.1f} ({q[m]:.3f}x)" for m in MODES[1:]]
        out.append(
            f"| {r['size']} {r['shape']} | {r['dma_us']:.1f} | {u['dev']:.1f} | "
            + " | ".join(cells)
            + f" | {all(r['same'].values())} |"
        )
    for r in res:
        if "host_pe_early" in r:
            out.append("")
            out.append(f"Host us per call at {r['size']}, before / after the copy graph's launch:")
            for m in ("pe_early", "pe_before", "pt_early", "pt_before"):
                a, b = r[f"host_{m}"]
                out.append(f"- {m}: {a:.2f} / {b:.2f} (sum {a + b:.2f})")
    return out


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="gpu-out")
    ap.add_argument("--sizes", default="0.5,0.5-dma,1,2,4,16")
    ap.add_argument("--rounds", type=int, default=7)
    a = ap.parse_args()
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    res = []
    tmpd = tempfile.TemporaryDirectory()
    fn, _ = _mlp_fns(Path(tmpd.name))
    for sz in a.sizes.split(","):
        t0 = time.perf_counter()
        res.append(probe(fn, sz, a.rounds))
        res[-1]["seconds"] = time.perf_counter() - t0
        lines = table(res)
        (out / "direct_probe.md").write_text("\n".join(lines) + "\n", encoding="utf-8")
        (out / "direct_probe.json").write_text(json.dumps(res, indent=1), encoding="utf-8")
    print("\n".join(table(res)), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
