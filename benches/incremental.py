"""Incremental build benchmark on a generated workspace (100 files x 10 defns by default).

Measures, in one run:
  * cold build in a fresh process (empty cache), wall clock including Python start-up;
  * no-op rebuild in a fresh process (``kinac build`` again; goal < 300 ms);
  * no-op rebuild in watch mode (one process, a save that changed nothing; goal < 50 ms);
  * one-body edit rebuild, in a fresh process and in watch mode (goal: < 10% of the cold build).

Python's bytecode cache matters for the fresh-process figures (each ``kinac`` process imports
the checker); the header says whether it was on. ``--bytecode on`` compiles kinac's bytecode
first and lets the ``kinac`` processes use it, ``off`` sets ``PYTHONDONTWRITEBYTECODE`` for
them and points their ``.pyc`` lookup at an empty directory (every process compiles what it
imports, as on a read-only install without bytecode), and ``env`` (default) keeps this
environment's setting (``PYTHONDONTWRITEBYTECODE`` alone still reads existing ``.pyc`` files).

Usage: python benches/incremental.py [--files 100] [--defns 10] [--bytecode env|on|off]
                                     [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
import wsgen  # noqa: E402

CHILD_ENV = dict(os.environ)  # the environment of the ``kinac`` processes (see --bytecode)


def set_bytecode(mode: str) -> bool:
    """Set up the bytecode cache of the ``kinac`` processes; whether it is on."""
    if mode == "on":
        CHILD_ENV.pop("PYTHONDONTWRITEBYTECODE", None)
        import compileall

        compileall.compile_dir(str(Path(__file__).resolve().parent.parent / "kinac"), quiet=1)
    elif mode == "off":  # and no .pyc found either: an empty cache prefix hides kinac's
        CHILD_ENV["PYTHONDONTWRITEBYTECODE"] = "1"
        CHILD_ENV["PYTHONPYCACHEPREFIX"] = tempfile.mkdtemp(prefix="kinac-bench-nopyc-")
    return not CHILD_ENV.get("PYTHONDONTWRITEBYTECODE")


def kinac_build(ws: Path, cache: Path) -> tuple[float, dict]:
    t0 = time.perf_counter()
    out = subprocess.run(
        [sys.executable, "-m", "kinac", "build", str(ws), "--json", "--cache-dir", str(cache)],
        capture_output=True,
        text=True,
        check=False,
        env=CHILD_ENV,
    )
    wall = time.perf_counter() - t0
    if out.returncode not in (0, 1):
        raise SystemExit(f"kinac build failed ({out.returncode}):\n{out.stderr}")
    return wall, json.loads(out.stdout)


def body_edit(ws: Path, f: int, d: int, variant: int) -> None:
    p = ws / f"m{f:03d}.kina"
    text = p.read_text()
    new = text.replace(wsgen.defn_text(f, d), wsgen.defn_text(f, d, variant))
    assert new != text
    p.write_text(new)


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--files", type=int, default=100)
    ap.add_argument("--defns", type=int, default=10)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--bytecode", choices=("env", "on", "off"), default="env")
    ap.add_argument("--json", metavar="FILE")
    args = ap.parse_args()
    bytecode = set_bytecode(args.bytecode)
    defn = min(3, args.defns - 1)  # the defn whose body the edits change (files 50.., 60..)
    from kinac.session import Session

    tmp = Path(tempfile.mkdtemp(prefix="kinac-bench-"))
    ws, cache = tmp / "ws", tmp / "cache"
    wsgen.generate(ws, args.files, args.defns)

    cold, doc = kinac_build(ws, cache)
    assert not doc["diagnostics"], doc["diagnostics"][:3]
    cold_queries = doc["queries_executed"]
    noop = [kinac_build(ws, cache) for _ in range(args.repeat)]
    noop_wall = statistics.median(w for w, _ in noop)
    noop_inproc = statistics.median(d["seconds"] for _, d in noop)
    assert all(d["queries_executed"] == 0 for _, d in noop)

    edits = []
    for i in range(args.repeat):
        body_edit(ws, (args.files // 2 + i) % args.files, defn, 1 + i % 4)
        w, d = kinac_build(ws, cache)
        edits.append((w, d))
    edit_wall = statistics.median(w for w, _ in edits)
    edit_queries = statistics.median(d["queries_executed"] for _, d in edits)
    edit_inproc = statistics.median(d["seconds"] for _, d in edits)

    sess = Session(ws, cache_dir=str(cache))
    sess.build()
    watch_noop = []
    for _ in range(20):
        t0 = time.perf_counter()
        sess.invalidate_paths([ws / "m010.kina"])
        sess.db.events.clear()
        sess.build()
        watch_noop.append(time.perf_counter() - t0)
    watch_edit = []
    for i in range(args.repeat):
        f = (args.files * 3 // 5 + i) % args.files
        body_edit(ws, f, defn, 1 + i % 4)
        t0 = time.perf_counter()
        sess.invalidate_paths([ws / f"m{f:03d}.kina"])
        sess.db.events.clear()
        sess.build()
        watch_edit.append(time.perf_counter() - t0)
    sess.close()

    res = {
        "date": time.strftime("%Y-%m-%d"),
        "machine": f"{platform.node()} ({os.cpu_count()} cores, {platform.python_implementation()} {platform.python_version()})",
        "workspace": f"{args.files} files x {args.defns} defns",
        "cold_build_s": round(cold, 3),
        "cold_queries": cold_queries,
        "noop_fresh_process_ms": round(noop_wall * 1000, 1),
        "noop_fresh_process_inside_ms": round(noop_inproc * 1000, 1),
        "noop_watch_ms": round(statistics.median(watch_noop) * 1000, 2),
        "body_edit_fresh_process_ms": round(edit_wall * 1000, 1),
        "body_edit_fresh_process_inside_ms": round(edit_inproc * 1000, 1),
        "body_edit_queries": edit_queries,
        "body_edit_watch_ms": round(statistics.median(watch_edit) * 1000, 1),
    }
    res["body_edit_share_of_cold_pct"] = round(100 * edit_wall / cold, 2)
    rows = [
        (
            "cold build (fresh process, empty cache)",
            f"{res['cold_build_s'] * 1000:.0f} ms",
            f"{cold_queries} queries",
        ),
        (
            "no-op, fresh process (goal < 300 ms)",
            f"{res['noop_fresh_process_ms']:.0f} ms",
            f"{res['noop_fresh_process_inside_ms']:.0f} ms after start-up",
        ),
        ("no-op, watch (goal < 50 ms)", f"{res['noop_watch_ms']:.1f} ms", ""),
        (
            "one-body edit, fresh process (goal < 10% of cold)",
            f"{res['body_edit_fresh_process_ms']:.0f} ms",
            f"{res['body_edit_share_of_cold_pct']}% of cold, {edit_queries} queries, "
            f"{res['body_edit_fresh_process_inside_ms']:.0f} ms after start-up",
        ),
        ("one-body edit, watch", f"{res['body_edit_watch_ms']:.1f} ms", ""),
    ]
    res["bytecode_cache"] = bytecode
    print(
        f"kinac incremental benchmark, {res['workspace']}, {res['date']}, {res['machine']}, "
        f"bytecode cache {'on' if res['bytecode_cache'] else 'off'}"
    )
    print("| measurement | time | notes |\n|---|---|---|")
    for r in rows:
        print(f"| {r[0]} | {r[1]} | {r[2]} |")
    if args.json:
        Path(args.json).write_text(json.dumps(res, indent=2))


if __name__ == "__main__":
    main()
