"""Two modes of ``benches/runtime.py`` that run compiled entries (issue 17 items 3 and 5).

* :func:`bench_host_inputs`: the MLP through ``kinac.compile`` fed a host (numpy) ``x`` each
  call, with the pinned pool and copy/compute overlap (the default) and without
  (``pinned=False``: a pageable copy and a wait), against the same MLP fed a device ``x``, all
  pipelined (calls queued back to back, one sync at the end), in the same run. Goal: host
  inputs within 1.2x of device inputs where the copy is shorter than the compute.
* :func:`soak`: a time-based soak: MLP calls of several shapes (host and device inputs, outputs
  kept for a random while) interleaved with mixed-size pool churn; every ``sample_s`` seconds
  one sample of the device pool (reserved, allocated, fragmentation), the pinned pool, the
  device's free memory and the calls done. Written as CSV and JSON (and a PNG when matplotlib
  is installed); :func:`check_growth` judges "no growth after warm-up".

Not a bench itself (no ``kinac-bench`` line): ``runtime.py`` imports it.
"""

from __future__ import annotations

import csv
import json
import random
import shutil
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kinac.rt.cuda.testing import Row, row

ROOT = Path(__file__).resolve().parent.parent
MLP_SIZES = ((4, 128, 256, 1024), (8, 512, 1024, 4096))


def _mlp_fns(tmp: Path) -> tuple[Any, Any]:
    """The MLP defn (dims free) compiled for the GPU, with and without pinned staging."""
    import kinac

    src = tmp / "mlp.kina"  # outside the workspace: its kina.toml would fix the dims
    src.write_text((ROOT / "workspaces/mlp/mlp.kina").read_text(encoding="utf-8"))
    pinned = kinac.compile(src, "mlp", target="cuda", no_cache=True)
    plain = kinac.compile(src, "mlp", target="cuda", no_cache=True, pinned=False)
    return pinned, plain


def _weights(torch: Any, d: int, f: int, seed: int = 0) -> list[Any]:
    g = torch.Generator().manual_seed(seed)
    shapes = ((d, f), (f,), (f, d), (d,))
    return [(torch.randn(s, generator=g) * s[0] ** -0.5).cuda() for s in shapes]


def median_per_call(run: Callable[[int], None], n: int, unit: float = 1e3) -> float:
    """Median over 5 rounds of the wall time per call of ``run(n)`` (``n`` calls, in seconds
    times ``unit``: ms by default), after a warm-up ``run(3)``. The one timing loop of the
    runtime benches: each mode differs only in what ``run`` does between calls (a sync after
    each, one at the end, none)."""
    run(3)
    ts = []
    for _ in range(5):
        t0 = time.perf_counter()
        run(n)
        ts.append((time.perf_counter() - t0) * unit / n)
    return sorted(ts)[2]


def _pipelined_ms(call: Callable[[], Any], n: int, sync: Callable[[], None]) -> float:
    """Median over 5 rounds of the wall time per call of ``n`` queued calls, one sync."""

    def run(k: int) -> None:
        for _ in range(k):
            call()
        sync()

    return median_per_call(run, n)


def _copy_ms(torch: Any, nbytes: int) -> float:
    """One host-to-device copy of ``nbytes`` from pinned memory (CUDA events)."""
    src = torch.empty(nbytes, dtype=torch.uint8).pin_memory()
    dst = torch.empty(nbytes, dtype=torch.uint8, device="cuda")
    e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    dst.copy_(src, non_blocking=True)
    ts = []
    for _ in range(5):
        e0.record()
        dst.copy_(src, non_blocking=True)
        e1.record()
        e1.synchronize()
        ts.append(e0.elapsed_time(e1))
    return sorted(ts)[2]


def bench_host_inputs(quick: bool) -> list[Row]:
    """Rows: host-input calls (pinned + overlap, and the old path) against device inputs."""
    import numpy as np
    import torch

    rows: list[Row] = []
    sync = torch.cuda.synchronize
    with tempfile.TemporaryDirectory() as tmp:
        pinned, plain = _mlp_fns(Path(tmp))
        for b, s, d, f in MLP_SIZES[:1] if quick else MLP_SIZES:
            ws = _weights(torch, d, f)
            x_host = np.random.default_rng(0).standard_normal((b, s, d)).astype(np.float32)
            x_dev = torch.from_numpy(x_host).cuda()
            want = torch.from_dlpack(pinned(x_dev, *ws)).cpu().numpy()
            got = pinned(x_host, *ws)
            same = bool(np.array_equal(torch.from_dlpack(got).cpu().numpy(), want))
            n = 20 if quick else 100
            dev_ms = _pipelined_ms(lambda x=x_dev, w=ws: pinned(x, *w), n, sync)  # type: ignore[misc]
            host_ms = _pipelined_ms(lambda x=x_host, w=ws: pinned(x, *w), n, sync)  # type: ignore[misc]
            plain_ms = _pipelined_ms(lambda x=x_host, w=ws: plain(x, *w), n, sync)  # type: ignore[misc]
            copy = _copy_ms(torch, x_host.nbytes)
            shorter = copy < dev_ms
            what = f"MLP [{b},{s},{d}] f32 hidden {f}, x ({x_host.nbytes >> 20} MiB) from numpy each call"
            ref = "device x, same entry, pipelined"
            goal = "<= 1.2x" if shorter else "info"
            rows.append(row(f"{what}: pinned pool + overlap, pipelined (same result: {same})",
                            host_ms, "ms", dev_ms, ref, goal))  # fmt: skip
            rows.append(row(f"{what}: pageable copy + wait (pinned=False), pipelined",
                            plain_ms, "ms", dev_ms, ref, "info"))  # fmt: skip
            rows.append(row(f"{what}: the copy alone (pinned, events), shorter than compute: {shorter}",
                            copy, "ms", dev_ms, "compute per call", "info"))  # fmt: skip
            entry = next(e for k, e in pinned._entries.items() if k[0][0].device == "cpu")
            st = entry._stager.pool.memory_stats()
            rows.append(row("pinned pool after the runs: reserved MiB (hits / misses "
                            f"{st['hits']:.0f} / {st['misses']:.0f})",
                            st["reserved_bytes.all.current"] / 2**20, "MiB", None, "", "info"))  # fmt: skip
    return rows


# ---- soak ---------------------------------------------------------------------------------------
FIELDS = (
    "t_s", "calls", "reserved_bytes", "allocated_bytes", "fragmentation_pct",
    "external_fragmentation_pct", "pinned_reserved_bytes", "pinned_allocated_bytes",
    "device_free_bytes", "rss_bytes",
)  # fmt: skip


def _rss() -> int:
    try:
        with open("/proc/self/statm", encoding="ascii") as fh:
            import os

            return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except OSError:
        return 0


def soak(minutes: float, sample_s: float, out: Path, seed: int = 0) -> dict[str, Any]:
    """Run the soak workload for ``minutes``; write ``soak_samples.csv``/``.json`` (and
    ``soak_samples.png``) under ``out``; return the summary."""
    import numpy as np

    rng = random.Random(seed)
    nrng = np.random.default_rng(seed)
    tmp = tempfile.mkdtemp()  # the source must outlive the compiled defn (compiled per shape)
    try:
        pinned, _ = _mlp_fns(Path(tmp))
        return _soak(pinned, minutes, sample_s, out, rng, nrng)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _soak(
    pinned: Any, minutes: float, sample_s: float, out: Path, rng: random.Random, nrng: Any
) -> dict[str, Any]:
    import numpy as np
    import torch

    from kinac.rt import cuda
    from kinac.rt.cuda.pinned import default_pool

    shapes = [(4, 128, 256, 1024), (2, 64, 256, 1024), (8, 128, 512, 2048)]
    weights = {(d, f): _weights(torch, d, f) for _, _, d, f in shapes}
    xs = [nrng.standard_normal((b, s, d)).astype(np.float32) for b, s, d, _ in shapes]
    for (_, _, d, f), x in zip(shapes, xs, strict=True):  # compile every specialisation first
        pinned(x, *weights[(d, f)])
        pinned(torch.from_numpy(x).cuda(), *weights[(d, f)])
    pool = cuda.default_resource()
    pin = default_pool()
    dev = cuda.current_device()
    kept: list[Any] = []  # outputs held for a while (random lifetimes)
    churn: list[tuple[int, int]] = []
    from kinac.rt.cuda import soak as churn_mod

    samples: list[dict[str, float]] = []
    calls = 0
    t0 = time.perf_counter()
    end = t0 + minutes * 60
    next_sample = t0
    while True:
        now = time.perf_counter()
        if now >= next_sample:
            torch.cuda.synchronize()
            st, ps = pool.memory_stats(), pin.memory_stats()
            samples.append({
                "t_s": round(now - t0, 3), "calls": calls,
                "reserved_bytes": st["reserved_bytes.all.current"],
                "allocated_bytes": st["allocated_bytes.all.current"],
                "fragmentation_pct": st.get("fragmentation_pct", 0.0),
                "external_fragmentation_pct": st.get("external_fragmentation_pct", 0.0),
                "pinned_reserved_bytes": ps["reserved_bytes.all.current"],
                "pinned_allocated_bytes": ps["allocated_bytes.all.current"],
                "device_free_bytes": dev.mem_info()[0], "rss_bytes": _rss(),
            })  # fmt: skip
            print(f"soak t={now - t0:7.1f}s calls={calls} " + " ".join(f"{k}={v:.4g}" for k, v in samples[-1].items() if k not in ("t_s", "calls")), flush=True)  # fmt: skip
            if now >= end:
                break
            next_sample = min(next_sample + sample_s, end)
        k = rng.randrange(len(shapes))
        _, _, d, f = shapes[k]
        x = xs[k] if rng.random() < 0.5 else torch.from_numpy(xs[k]).cuda()
        kept.append(pinned(x, *weights[(d, f)]))
        calls += 1
        if len(kept) > 64 or rng.random() < 0.3:
            kept.pop(rng.randrange(len(kept)))
        for _ in range(4):  # pool churn of mixed sizes, random lifetimes
            if len(churn) < 200 and rng.random() < 0.55:
                n = churn_mod.mixed_size(rng)
                churn.append((pool.allocate(n, 0), n))
            elif churn:
                p, n = churn.pop(rng.randrange(len(churn)))
                pool.deallocate(p, n, 0)
    for p, n in churn:
        pool.deallocate(p, n, 0)
    kept.clear()
    torch.cuda.synchronize()
    out.mkdir(parents=True, exist_ok=True)
    with open(out / "soak_samples.csv", "w", newline="", encoding="utf-8") as fh:
        w = csv.DictWriter(fh, fieldnames=FIELDS)
        w.writeheader()
        w.writerows(samples)
    summary = {"minutes": minutes, "sample_s": sample_s, "calls": calls, **check_growth(samples)}
    (out / "soak_samples.json").write_text(
        json.dumps({"summary": summary, "samples": samples}, indent=1), encoding="utf-8"
    )
    summary["png"] = plot(out / "soak_samples.csv", out / "soak_samples.png")
    return summary


def check_growth(samples: list[dict[str, float]], warm: float = 0.25) -> dict[str, Any]:
    """After the first ``warm`` share of the samples (the warm-up), reserved bytes of the
    device and pinned pools must not grow: the maximum over the second half of the steady part
    at most 5% + 128 MiB above the maximum over its first half (the random workload's live set
    fluctuates by a few of its largest blocks, 64 MiB at most; a leak of even one 0.5 MiB
    output per call grows by gigabytes). Returns the verdict and the numbers it used."""
    if len(samples) < 3:
        return {"growth_checked": False, "reason": "fewer than 3 samples"}
    start = max(1, int(len(samples) * warm))
    steady = samples[start:]
    half = steady[: max(1, len(steady) // 2)]
    out: dict[str, Any] = {"growth_checked": True}
    ok = True
    for key in ("reserved_bytes", "pinned_reserved_bytes"):
        ref = max(s[key] for s in half)
        last_max = max(s[key] for s in steady[len(half) :] or half)
        out[f"{key}_first_half_max"] = ref
        out[f"{key}_second_half_max"] = last_max
        ok &= last_max <= ref * 1.05 + 128 * 2**20
    out["no_growth"] = ok
    out["max_fragmentation_pct"] = max(s["fragmentation_pct"] for s in steady)
    return out


def plot(csv_path: Path, png_path: Path) -> str | None:
    """Reserved/allocated bytes and fragmentation over time, from the CSV (matplotlib if
    installed; None otherwise). Usable on any machine: ``python3 benches/runtime.py --plot
    CSV``."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    with open(csv_path, newline="", encoding="utf-8") as fh:
        rows = [{k: float(v) for k, v in r.items()} for r in csv.DictReader(fh)]
    if not rows:
        return None
    t = [r["t_s"] / 60 for r in rows]
    fig, (a1, a2) = plt.subplots(2, 1, figsize=(8, 6), sharex=True)
    for key, label in (("reserved_bytes", "device pool reserved"),
                       ("allocated_bytes", "device pool allocated"),
                       ("pinned_reserved_bytes", "pinned pool reserved")):  # fmt: skip
        a1.plot(t, [r[key] / 2**20 for r in rows], marker="o", label=label)
    a1.set_ylabel("MiB")
    a1.legend()
    a1.set_title("kinac runtime soak")
    a2.plot(t, [r["fragmentation_pct"] for r in rows], marker="o", label="fragmentation at peak")
    a2.plot(t, [r["external_fragmentation_pct"] for r in rows], marker=".", label="external now")
    a2.set_ylabel("%")
    a2.set_xlabel("minutes")
    a2.legend()
    fig.tight_layout()
    fig.savefig(png_path, dpi=100)
    plt.close(fig)
    return str(png_path)
