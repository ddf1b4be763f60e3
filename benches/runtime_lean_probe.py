"""The lean call paths (2026-12-02d) against the path before them, in ONE process on one GPU:
issue 17's last goal (host-input calls within 1.2x of device-input calls where the copy is
shorter than the compute) and issue 14's host time of the small block's call.

    PYTHONPATH=. python3 benches/runtime_lean_probe.py --out DIR    (a GPU; about two minutes)

Why: the 2026-12-02c rounds found the host-input loop of the MLP host-bound on kinac's Python
(a bare loop with the same driver work 10-17 us a call faster). The lean paths
(``kinac.rt.hot.LEAN``, ``KINAC_LEAN_CALLS=0`` for the path before) reuse a returned output
nobody holds, launch a bound call's last graph (a staged call's last turn) without looking it
up, and let the staged bound call vouch for its host arrays' form. Switched at run time here
(``set_lean``: the memos dropped, so the next calls bind again), rounds interleaved, medians:

* **MLP** (``workspaces/mlp``, dims free) at x = 0.5 / 1 / 2 MiB: pipelined us per call of a
  device ``x``, a numpy ``x`` and a ``pinned_empty`` ``x``, each path; the ratios to the device
  ``x`` of the same path (the goal's); the host's time for the calls before the final sync;
  every output compared bit for bit with the device ``x``'s of the path before;
* **small bf16 block** (``workspaces/transformer``, B4 S128 D256, ``f(H, KV, *arrays)`` with
  torch CUDA tensors, as ``benches/latency_probe.py`` calls it): host us per call (a burst of
  20 while the GPU is busy), per call with ``torch.cuda.synchronize()`` and with
  ``f.synchronize()``, pipelined; the entry called directly; the bare ``cuGraphLaunch``.

Writes ``DIR/lean_probe.{md,json}`` after each part and prints the markdown.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from benches.latency_probe import host_us, report_writer, sync_each_us  # noqa: E402
from benches.runtime_modes import _mlp_fns, _pipelined_ms, _weights  # noqa: E402

MiB = 1 << 20
SIZES = {0.5: (4, 128, 256, 1024), 1.0: (4, 128, 512, 2048), 2.0: (4, 256, 512, 2048)}
LINES: list[str] = []
RES: dict[str, Any] = {}


def emit(line: str = "") -> None:
    LINES.append(line)
    print(line, flush=True)


def set_lean(fn: Any, lean: bool) -> None:
    """Switch the lean paths and make ``fn``'s calls bind again (its memo, its entries' and
    stagers' memos dropped; the kept outputs let go)."""
    from kinac.rt import hot

    hot.LEAN = lean
    fn._memo[0] = None
    fn._memo_next = None
    for e in fn._entries.values():
        e._kept = None
        e._last_box[0] = None
        st = getattr(e, "_stager", None)
        if st is not None:
            st.memo[0] = None


def mlp(
    fn: Any, mib: float, rounds: int, quick: bool, kinds: tuple[str, ...] = ()
) -> dict[str, Any]:
    """The MLP rows of one size (see the module docstring); ``kinds``: only these arrays."""
    import numpy as np
    import torch

    from kinac.rt.cuda.pinned import pinned_empty

    b, s, d, f = SIZES[mib]
    ws = _weights(torch, d, f)
    x = np.random.default_rng(0).standard_normal((b, s, d)).astype(np.float32)
    x_dev = torch.from_numpy(x).cuda()
    buf = pinned_empty(x.shape, x.dtype)
    buf[...] = x
    n = 40 if quick else 80
    sync = torch.cuda.synchronize
    set_lean(fn, False)
    want = torch.from_dlpack(fn(x_dev, *ws)).cpu().numpy()
    arrays = {"device x": x_dev, "numpy x": x, "pinned_empty x": buf}
    arrays = {k: v for k, v in arrays.items() if not kinds or k in kinds}
    ts: dict[str, list[float]] = {}
    host: dict[str, list[float]] = {}
    same: dict[str, bool] = {}
    paths: dict[str, str] = {}
    for rnd in range(rounds):
        for lean in (False, True):
            set_lean(fn, lean)
            tag = "lean" if lean else "before"
            for name, arr in arrays.items():
                key = f"{name}, {tag}"
                for _ in range(6):
                    fn(arr, *ws)
                sync()
                h0 = fn.hot_calls
                ts.setdefault(key, []).append(
                    _pipelined_ms(lambda a=arr: fn(a, *ws), n, sync) * 1e3
                )
                if rnd == 0:  # (the pipelined loop: 3 warm-up calls, 5 rounds of n)
                    paths[key] = f"hot {fn.hot_calls - h0} of {3 + 5 * n}"
                host.setdefault(key, []).append(host_us(lambda a=arr: fn(a, *ws), sync, 20))
                if rnd == 0:
                    y = torch.from_dlpack(fn(arr, *ws)).cpu().numpy()
                    same[key] = bool(np.array_equal(y, want))
    set_lean(fn, True)
    med = {k: statistics.median(v) for k, v in ts.items()}
    r: dict[str, Any] = {"mib": mib, "shape": [b, s, d, f], "us": med, "host_burst_us": {
        k: statistics.median(v) for k, v in host.items()}, "identical": same, "paths": paths,
        "samples": ts}  # fmt: skip
    r["ratio"] = {
        k: v / med[dev]
        for k, v in med.items()
        if "device" not in k and (dev := f"device x, {k.rsplit(', ', 1)[1]}") in med
    }
    return r


def mlp_table(r: dict[str, Any]) -> None:
    b, s, d, f = r["shape"]
    emit(f"\n### MLP, x = {r['mib']:g} MiB ([{b},{s},{d}], hidden {f})\n")
    emit("| call | us per call (pipelined) | / device x (same path) | host us per call (burst) "
         "| bit-identical | hot calls (first round) |")  # fmt: skip
    emit("|---|---|---|---|---|---|")
    for k, v in r["us"].items():
        ratio = r["ratio"].get(k)
        emit(f"| {k} | {v:.1f} | {f'{ratio:.3f}x' if ratio else '-'} | "
             f"{r['host_burst_us'][k]:.1f} | {r['identical'].get(k)} | {r['paths'].get(k)} |")  # fmt: skip


def block(rounds: int, n: int) -> dict[str, Any]:
    import torch
    from gpu_refs import SMALL, block_inputs

    import kinac

    h, kv = SMALL["h"], SMALL["kv"]
    ins = block_inputs(SMALL, torch.bfloat16)
    f = kinac.compile(ROOT / "workspaces/transformer", "block", target="cuda")
    set_lean(f, False)
    want = torch.from_dlpack(f(h, kv, *ins)).clone()
    sync = torch.cuda.synchronize
    samples: dict[str, list[float]] = {}
    same: dict[str, bool] = {}
    for _ in range(rounds):
        for lean in (False, True):
            set_lean(f, lean)
            tag = "lean" if lean else "before"
            for _ in range(8):
                f(h, kv, *ins)
            sync()
            for name, v in block_round(f, h, kv, ins, n).items():
                samples.setdefault(f"{name}, {tag}", []).append(v)
            if tag not in same:
                same[tag] = bool(torch.equal(torch.from_dlpack(f(h, kv, *ins)), want))
    entry = next(iter(f._entries.values()))
    g = [x for _, _, x in entry._bound.values() if x is not None][-1]
    fast = g.fast_launch
    bare = [statistics.median(host_us(lambda: fast[0](fast[1], entry.stream.cvp), sync)
                              for _ in range(5)) for _ in range(rounds)]  # fmt: skip
    set_lean(f, True)
    med = {k: statistics.median(v) for k, v in samples.items()}
    med["bare cuGraphLaunch of the entry's graph (PyDLL): host us (burst of 20)"] = (
        statistics.median(bare)
    )
    return {"us": med, "identical": same, "samples": samples}


def block_round(f: Any, h: int, kv: int, ins: list[Any], n: int) -> dict[str, float]:
    """One round of the small block's measures (us)."""
    import torch

    sync = torch.cuda.synchronize
    entry = next(iter(f._entries.values()))

    def call() -> Any:
        return f(h, kv, *ins)

    def burst(c: Callable[[], Any]) -> float:
        return statistics.median(host_us(c, sync) for _ in range(5))

    return {
        "f(H, KV, *arrays): host us (burst of 20)": burst(call),
        "f(*arrays, H=, KV=): host us (burst of 20)": burst(lambda: f(*ins, H=h, KV=kv)),
        "entry(*arrays): host us (burst of 20)": burst(lambda: entry(*ins)),
        "f(H, KV, *arrays) + torch.cuda.synchronize(): us per call": _each(call, sync, n),
        "f(H, KV, *arrays) + f.synchronize(): us per call": _each(call, f.synchronize, n),
        "f(H, KV, *arrays) pipelined: us per call": _pipelined_ms(call, n, sync) * 1e3,
    }


def _each(call: Callable[[], Any], wait: Callable[[], Any], n: int) -> float:
    """``latency_probe.sync_each_us`` from an idle GPU (a wait before the first call)."""
    wait()
    return sync_each_us(call, wait, n)


def block_table(r: dict[str, Any]) -> None:
    emit("\n### Small bf16 block (B4 S128 D256 H4 KV2), torch CUDA tensors\n")
    emit(f"Outputs bit-identical to the path before's first output: {r['identical']}\n")
    emit("| measure | before | lean |")
    emit("|---|---|---|")
    names = dict.fromkeys(k.rsplit(", ", 1)[0] for k in r["us"] if k.endswith((", before", ", lean")))  # fmt: skip
    for name in names:
        emit(f"| {name} | {r['us'][name + ', before']:.2f} | {r['us'][name + ', lean']:.2f} |")
    for k, v in r["us"].items():
        if not k.endswith((", before", ", lean")):
            emit(f"| {k} | {v:.2f} | |")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default="lean-out")
    ap.add_argument("--plan", nargs="*", default=["mlp:1", "mlp:0.5", "block", "mlp:2"],
                    help="parts in order: mlp:MiB (0.5, 1, 2) or block")  # fmt: skip
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--quick", action="store_true")
    a = ap.parse_args()
    write = report_writer(a.out, "lean_probe", LINES, RES)

    import torch

    emit("# benches/runtime_lean_probe.py: the lean call paths vs the path before, same run\n")
    emit(f"{torch.cuda.get_device_name()}, torch {torch.__version__}, "
         f"{time.strftime('%Y-%m-%d %H:%M:%S UTC', time.gmtime())}, rounds {a.rounds}")  # fmt: skip
    with tempfile.TemporaryDirectory() as tmp:
        fn = None
        for part in a.plan:
            t0 = time.perf_counter()
            try:
                if part == "block":
                    RES["block"] = r = block(a.rounds, 100 if a.quick else 200)
                    block_table(r)
                else:
                    mib = float(part.split(":")[1])
                    if fn is None:
                        fn, _ = _mlp_fns(Path(tmp))
                    RES[f"mlp_{mib:g}"] = r = mlp(fn, mib, a.rounds, a.quick)
                    mlp_table(r)
            except Exception:  # noqa: BLE001 - the other parts still run
                emit(f"\n**{part} failed:**\n```\n{traceback.format_exc()[-3000:]}\n```")
            emit(f"\n({part}: {time.perf_counter() - t0:.1f} s)")
            write()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
