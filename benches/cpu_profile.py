"""Per-kernel times of the small f32 block on the host (issue 14's attribution), one process.

    KINAC_NUM_THREADS=2 chrt -f 10 python3 benches/cpu_profile.py [--runs R] [--calls N] [--json F]

Each run is one ``kinac.observe`` profile of ``--calls`` calls (every step between two marks
in the entry's wrapper; a step's time is its median over the calls); the table gives each
step's least and median over the runs, their sum, and the whole call timed without marks
(best and median of batches of 5). Run it with ``KINAC_NUM_THREADS=1`` and ``=2`` and compare
a step's 2-thread time with half its 1-thread time: the difference is what splitting it costs
(the pool's fork and join, a thread idle at the join, two cores sharing caches and memory).
``--json`` writes the table for that comparison (``--compare A.json B.json`` prints it).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from cpu import BLOCK, compile_entry, inputs, load_average  # noqa: E402

from kinac.ir.testing import block_graph  # noqa: E402
from kinac.observe.profile import profile_host  # noqa: E402
from kinac.rt.host.pool import thread_count  # noqa: E402


def profile(runs: int, calls: int) -> dict[str, object]:
    g = block_graph(**BLOCK)
    entry, _ = compile_entry(g)
    ins = tuple(inputs(g))
    per: list[list[float]] = []
    whole: list[float] = []
    names: list[str] = []
    for _ in range(runs):
        p = profile_host(entry, ins, calls)
        names = [f"{k.name} {k.kind}/{k.impl} {list(k.shape)} {k.launch}" for k in p.kernels]
        per.append([k.ms * 1e3 for k in p.kernels])
        t = time.perf_counter()
        for _ in range(5):
            entry(*ins)
        whole.append((time.perf_counter() - t) / 5 * 1e3)
    steps = [
        {"step": n, "min_us": min(r[i] for r in per), "median_us": statistics.median(r[i] for r in per)}
        for i, n in enumerate(names)
    ]  # fmt: skip
    return {"threads": thread_count(), "steps": steps, "whole_best_ms": min(whole),
            "whole_median_ms": statistics.median(whole), "load": load_average(),
            "at": time.strftime("%H:%M UTC", time.gmtime())}  # fmt: skip


def show(t: dict[str, object]) -> None:
    steps = t["steps"]
    assert isinstance(steps, list)
    print(f"{t['threads']} threads, {t.get('at', '?')}, load {t.get('load', '?')}")
    for s in steps:
        print(f"  {s['step']:58} min {s['min_us']:7.0f} us   median {s['median_us']:7.0f} us")
    print(f"  sum of steps: min {sum(s['min_us'] for s in steps):.0f} us, "
          f"median {sum(s['median_us'] for s in steps):.0f} us")  # fmt: skip
    print(f"  whole call: best {t['whole_best_ms']:.3f} ms, median {t['whole_median_ms']:.3f} ms")


def compare(one: dict[str, object], two: dict[str, object]) -> None:
    """Each step: 1 thread, 2 threads, half the first, and the cost of the split."""
    s1, s2 = one["steps"], two["steps"]
    assert isinstance(s1, list) and isinstance(s2, list)
    print(f"{'step':58} {'1 thr':>7} {'2 thr':>7} {'1/2':>7} {'split cost':>10}  (min us)")
    tot = [0.0, 0.0]
    for a, b in zip(s1, s2, strict=True):
        half = a["min_us"] / 2
        tot[0] += a["min_us"]
        tot[1] += b["min_us"]
        print(f"{b['step']:58} {a['min_us']:7.0f} {b['min_us']:7.0f} {half:7.0f} "
              f"{b['min_us'] - half:10.0f}")  # fmt: skip
    print(f"{'sum':58} {tot[0]:7.0f} {tot[1]:7.0f} {tot[0] / 2:7.0f} {tot[1] - tot[0] / 2:10.0f}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=6)
    ap.add_argument("--calls", type=int, default=20)
    ap.add_argument("--json", help="write the table here")
    ap.add_argument("--compare", nargs=2, metavar=("ONE_THREAD", "TWO_THREADS"))
    args = ap.parse_args()
    if args.compare:
        one, two = (json.loads(Path(p).read_text()) for p in args.compare)
        compare(one, two)
        return
    t = profile(args.runs, args.calls)
    show(t)
    if args.json:
        Path(args.json).write_text(json.dumps(t, indent=1))


if __name__ == "__main__":
    main()
