"""Benchmark: cold type check of the transformer-block workspace, after imports.

Prints the wall time of reading and checking every defn of ``workspaces/transformer`` (the
prelude included) in a fresh in-memory environment, the share of obligations closed by
normalisation (without Z3), and the time to specialise the ``block`` entry to a graph.
Goals (issue 3): within 200 ms; at least 90% closed without Z3.

    python benches/typecheck.py [--repeat N]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

t_imp = time.perf_counter()
from kinac.check import DefnRef, specialise  # noqa: E402
from kinac.check.env import InMemoryEnv  # noqa: E402
from kinac.check.sig import analyse  # noqa: E402
from kinac.reader.parse import parse_file  # noqa: E402

IMPORT_S = time.perf_counter() - t_imp
WS = ROOT / "workspaces" / "transformer"


def cold_check() -> tuple[float, dict[str, int], InMemoryEnv]:
    analyse.cache_clear()
    sources = {p.relative_to(WS).as_posix(): p.read_text() for p in sorted(WS.glob("*.kina"))}
    t0 = time.perf_counter()
    env = InMemoryEnv({p: parse_file(p, t) for p, t in sources.items()})
    stats = {"defns": 0, "total": 0, "by_norm": 0, "by_solver": 0, "errors": 0}
    for f in [*sources, "@kinac/std/nn.kina"]:
        for c in env.check_file(f):
            stats["defns"] += 1
            stats["total"] += c.stats.total
            stats["by_norm"] += c.stats.by_norm
            stats["by_solver"] += c.stats.by_solver
            stats["errors"] += sum(1 for d in c.diagnostics if d.is_error)
    return time.perf_counter() - t0, stats, env


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=7)
    a = ap.parse_args()
    times = []
    stats: dict[str, int] = {}
    env = None
    for _ in range(a.repeat):
        t, stats, env = cold_check()
        times.append(t)
    assert env is not None
    dims = {"H": 4, "KV": 2, "B": 4, "S": 128, "D": 256, "F": 704}
    t0 = time.perf_counter()
    sp = specialise(DefnRef("block.kina", "block"), dims, {"T": "f32"}, env)
    t_spec = time.perf_counter() - t0
    share = stats["by_norm"] / stats["total"] if stats["total"] else 1.0
    print(f"imports (kinac.check, reader): {IMPORT_S * 1000:.1f} ms")
    print(
        f"cold check of workspaces/transformer + prelude ({stats['defns']} defns, "
        f"{stats['errors']} errors): median {statistics.median(times) * 1000:.1f} ms, "
        f"min {min(times) * 1000:.1f} ms over {a.repeat} runs (goal 200 ms)"
    )
    print(
        f"obligations: {stats['total']} total, {stats['by_norm']} closed by normalisation, "
        f"{stats['by_solver']} sent to Z3: {share:.1%} without Z3 (goal >= 90%)"
    )
    n = len(sp.graph.nodes) if sp.graph is not None else 0
    print(
        f"specialise block at block_small dims (warm checked defns): {t_spec * 1000:.1f} ms, "
        f"{n} graph nodes"
    )


if __name__ == "__main__":
    main()
