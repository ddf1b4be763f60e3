"""A/B of the query engine's lock (bug round 2026-12-02e): a resident one-file edit of the
transformer workspace, rebuilt with ``Database.get`` holding the database's re-entrant lock
(``lock``) and calling the unlocked body directly (``nolock``), alternating in one process so
the machine's load hits both alike. Also counts the engine calls of one edit and times an
uncontended ``RLock`` enter/exit.

    python3 benches/engine_lock_ab.py [--edits 40]
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--edits", type=int, default=40)
    args = ap.parse_args()
    from kinac.compiler_gc import compiler_gc, settle
    from kinac.rules.engine import Database
    from kinac.session import Session

    compiler_gc()
    with tempfile.TemporaryDirectory() as tmp:
        ws = Path(tmp) / "ws"
        shutil.copytree(ROOT / "workspaces" / "transformer", ws)
        sess = Session(ws, cache_dir=str(Path(tmp) / "cache"))
        sess.build()
        settle()
        f = ws / "ffn.kina"
        orig = f.read_text()
        locked, plain = Database.get, Database._get
        times: dict[str, list[float]] = {"lock": [], "nolock": []}
        for i in range(args.edits):
            mode = "lock" if i % 2 == 0 else "nolock"
            Database.get = locked if mode == "lock" else plain  # type: ignore[method-assign]
            n = 4 + i % 7
            extra = f"(defn extra [(x : (tensor f32 [{n}]))] -> (tensor f32 [{n}]) (add x x))"
            f.write_text(f"{orig}\n; edit {i}\n{extra}\n")
            sess.invalidate_paths([f])
            t = time.perf_counter()
            sess.build()
            times[mode].append(time.perf_counter() - t)
            settle()
        calls = [0]

        def counting(self: Any, q: Any, key: Any) -> Any:
            calls[0] += 1
            return plain(self, q, key)

        Database.get = counting  # type: ignore[method-assign]
        f.write_text(orig + "\n; counted\n")
        sess.invalidate_paths([f])
        sess.build()
        Database.get = locked  # type: ignore[method-assign]
        sess.close()
    for mode, ts in times.items():
        print(f"{mode}: median {statistics.median(ts) * 1e3:.2f} ms over {len(ts)} edits")
    print(f"engine calls (Database.get) in one edit: {calls[0]}")
    lock = threading.RLock()
    t = time.perf_counter()
    for _ in range(1_000_000):
        with lock:
            pass
    print(f"RLock enter+exit, uncontended: {(time.perf_counter() - t) * 1e3:.0f} ns")


if __name__ == "__main__":
    main()
