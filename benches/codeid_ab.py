"""A/B of the code-identity scan (``kinac/rules/codeid.py``) between two kinac trees.

Why: the scan runs at the start of every build (docs/incremental.md, "Code identity"); a
change to it must not slow a warm build. Two trees, e.g. ``git archive HEAD~1 kinac
workspaces | tar -x -C /tmp/before`` and the same with the new ``codeid.py``, are timed
interleaved on ``kinac build workspaces/mlp`` (no server), in two modes:

* ``warm``: nothing changed since the last build (the persisted identities are adopted);
* ``touched``: a kinac source's stat changed, not its text (every identity is recomputed
  from the persisted per-file table; no memo is invalidated).

Usage: ``python3 benches/codeid_ab.py BEFORE_DIR AFTER_DIR [N]``.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time


def main() -> None:
    dirs = {"before": sys.argv[1], "after": sys.argv[2]}
    n = int(sys.argv[3]) if len(sys.argv) > 3 else 9
    for mode in ("warm", "touched"):
        caches = {k: tempfile.mkdtemp() for k in dirs}

        def run(k: str, touch: bool, caches: dict[str, str] = caches) -> float:
            if touch:
                os.utime(os.path.join(dirs[k], "kinac/rt/host/pool.py"))
            env = {**os.environ, "PYTHONPATH": dirs[k], "KINAC_SERVER": "0"}
            t = time.perf_counter()
            r = subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "kinac",
                    "build",
                    "workspaces/mlp",
                    "--cache-dir",
                    caches[k],
                ],
                cwd=dirs[k],
                env=env,
                capture_output=True,
                text=True,
                check=False,
            )
            assert r.returncode == 0, r.stderr[-500:]
            return time.perf_counter() - t

        for k in dirs:
            run(k, False)
            run(k, False)
        times: dict[str, list[float]] = {k: [] for k in dirs}
        for _ in range(n):
            for k in dirs:
                times[k].append(run(k, mode == "touched"))
        for k, v in times.items():
            print(
                f"{mode:8} {k:7} median {1000 * statistics.median(v):.0f} ms "
                f"min {1000 * min(v):.0f} ms (n={len(v)})"
            )


if __name__ == "__main__":
    main()
