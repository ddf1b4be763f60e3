"""Same-run before/after of the one-layer edit at L=32 in a resident session, two trees.

    python3 scripts/before_after_resident.py BEFORE AFTER [--target cpu|cuda] [--rounds N]

BEFORE and AFTER are commits (archived into temp dirs) or extracted trees. Each round runs,
for each tree in turn (alternating which goes first), one fresh process that builds
``benches/scaling.py``'s model cold in a session (its own cache), then the bench's edit
(an extra ``mul`` on the last layer's input) and five more edits of the last layer (a unary
op around its input, each a new kernel), each build's CPU seconds plus the collection the
session does after it (``settle``, as ``kinac watch`` and ``kinac serve`` do). Why: on a
shared 2-core machine a served row moves by more than a step cuts; the least and the median
of 6 x N edits per tree, interleaved, do not.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

CHILD = """
import sys, time, tempfile
from pathlib import Path
tree, target, L = Path(sys.argv[1]), sys.argv[2], int(sys.argv[3])
sys.path[:0] = [str(tree), str(tree / "benches")]
import scaling
from kinac.compiler_gc import compiler_gc, settle
from kinac.session import Session
compiler_gc()
with tempfile.TemporaryDirectory() as tmp:
    ws = scaling.make_workspace(Path(tmp), L)
    s = Session(ws, cache_dir=str(Path(tmp) / "cache"), target=target)
    t = time.process_time(); s.build(); out = [time.process_time() - t]
    settle()
    for op in (None, "neg", "exp", "tanh", "abs", "sqrt"):
        wrap = {L - 1: op} if op else None
        (ws / "model.kina").write_text(scaling.model_source(L, edited=True, wrap=wrap))
        s.invalidate_paths([ws / "model.kina"])
        t = time.process_time(); s.build(); settle(); out.append(time.process_time() - t)
    print(" ".join(f"{x:.5f}" for x in out))
"""


def tree_of(ref: str, tmp: Path) -> Path:
    """``ref`` as a directory: itself, or the commit archived under ``tmp``."""
    if Path(ref).is_dir():
        return Path(ref).resolve()
    out = tmp / ref.replace("/", "_")
    out.mkdir()
    archive = subprocess.run(["git", "archive", ref], capture_output=True, check=True).stdout
    subprocess.run(["tar", "-x", "-C", str(out)], input=archive, check=True)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("before")
    ap.add_argument("after")
    ap.add_argument("--target", default="cpu", choices=["cpu", "cuda"])
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--layers", type=int, default=32)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="kinac-ab-") as tmp:
        trees = {k: tree_of(getattr(args, k), Path(tmp)) for k in ("before", "after")}
        runs: dict[str, list[list[float]]] = {k: [] for k in trees}
        for r in range(args.rounds):
            for k in list(trees) if r % 2 == 0 else list(reversed(list(trees))):
                cmd = [sys.executable, "-c", CHILD, str(trees[k]), args.target, str(args.layers)]
                done = subprocess.run(cmd, capture_output=True, text=True, cwd=trees[k])
                if done.returncode != 0:
                    raise SystemExit(done.stderr[-3000:])
                runs[k].append([float(x) for x in done.stdout.split()])
    print(f"| {args.target}, L={args.layers}, {args.rounds} rounds | cold (least) | the bench's "
          "edit: least, median (ms) | five new-kernel edits: least, median (ms) |")  # fmt: skip
    print("|---|---|---|---|")
    for k, rs in runs.items():
        bench, rest = [r[1] for r in rs], [x for r in rs for x in r[2:]]
        print(f"| {k} ({getattr(args, k)}) | {min(r[0] for r in rs):.2f} s | "
              f"{min(bench) * 1e3:.1f}, {statistics.median(bench) * 1e3:.1f} | "
              f"{min(rest) * 1e3:.1f}, {statistics.median(rest) * 1e3:.1f} |")  # fmt: skip


if __name__ == "__main__":
    main()
