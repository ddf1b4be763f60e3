"""Builds do not depend on ``PYTHONHASHSEED``: the same queries run, the cache holds the same bytes.

String hashing is salted per process, so iterating a set (or a dict built from one) of names
gives a different order in every process. If that order leaks into what a query reads, into a
key or into a value, two processes over one cache (CI and a developer, ``kinac watch`` and a
build, a build server and a fresh process) disagree: misses, byte-different artifacts, oracle
tests that flake. Each build below runs in its own process under a different seed, with a
fresh cache: the executed queries (names and memo ids, in order), every stored record (its
key, value fingerprint and dependency trace, byte for byte) and every stored value must be
equal; and a process under another seed, over the first one's cache, must execute nothing.

The workspaces are small: the MLP built for the host and for the GPU (PTX only, no GPU
needed), and a file with a six-defn call cycle (the recursion check read its members' callees
in set order: its trace, and so its stored record, changed with the seed).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
CYCLE = ("ping", "pong", "ring", "rung", "zig", "zag")

DRIVER = r"""
import hashlib, json, sqlite3, sys
from kinac.rules.disk import SafeDisk
from kinac.session import Session
import diskcache

out = {}
for ws, cache, target in json.loads(sys.argv[1]):
    s = Session(ws, cache_dir=cache, target=target)
    report = s.build()
    executed = [[e.query, e.qid] for e in s.db.events.executed_events]
    errors = sum(d.is_error for d in s.diagnostics(report))
    s.close()
    con = sqlite3.connect(cache + "/index.db")
    memos = {q: hashlib.sha256(r).hexdigest() for q, r in con.execute("SELECT qid, rec FROM memo")}
    con.close()
    blobs = diskcache.Cache(cache + "/blobs", disk=SafeDisk)
    values = {k: hashlib.sha256(blobs[k]).hexdigest() for k in blobs.iterkeys()}
    blobs.close()
    out[f"{ws} {target}"] = {"executed": executed, "errors": errors, "artifacts": report.artifacts,
                             "memos": memos, "values": values}
print(json.dumps(out))
"""


def _cycle_workspace(where: Path) -> Path:
    """A workspace whose one file calls round a cycle of six defns (K0204 for each)."""
    ws = where / "cycle"
    ws.mkdir()
    (ws / "kina.toml").write_text('[workspace]\nname = "cycle"\n')
    defns = [
        f"(defn {a} [(x : (tensor f32 [N]))] -> (tensor f32 [N])\n  ({b} (neg x)))\n"
        for a, b in zip(CYCLE, CYCLE[1:] + CYCLE[:1], strict=True)
    ]
    (ws / "cycle.kina").write_text("".join(defns))
    return ws


def _start(seed: int, jobs: list[tuple[str, str, str]]) -> subprocess.Popen[str]:
    """Start ``jobs`` (workspace, cache, target) in one fresh process under ``seed``."""
    env = {**os.environ, "PYTHONHASHSEED": str(seed), "KINAC_SERVER": "0"}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    return subprocess.Popen(
        [sys.executable, "-c", DRIVER, json.dumps(jobs)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _result(proc: subprocess.Popen[str]) -> dict[str, Any]:
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err[-4000:]
    return json.loads(out)  # type: ignore[no-any-return]


def test_builds_are_independent_of_the_hash_seed(tmp_path: Path) -> None:
    mlp = tmp_path / "mlp"
    shutil.copytree(ROOT / "workspaces" / "mlp", mlp, ignore=shutil.ignore_patterns(".kinac*"))
    cycle = _cycle_workspace(tmp_path)
    cases = [(mlp, "cpu"), (mlp, "cuda"), (cycle, "cpu")]

    def jobs(tag: str) -> list[tuple[str, str, str]]:
        return [(str(ws), str(tmp_path / f"cache-{tag}-{ws.name}-{t}"), t) for ws, t in cases]

    procs = [_start(0, jobs("a")), _start(1, jobs("b"))]  # side by side: separate caches
    first, second = (_result(p) for p in procs)
    for case in first:
        a, b = first[case], second[case]
        assert a["executed"], case
        assert a["executed"] == b["executed"], case  # the same queries, in the same order
        assert a["artifacts"] == b["artifacts"], case
        assert a["memos"] == b["memos"], case  # keys, fingerprints and traces, byte for byte
        assert a["values"] == b["values"], case
    assert first[f"{mlp} cpu"]["artifacts"] and first[f"{mlp} cuda"]["artifacts"]
    assert first[f"{cycle} cpu"]["errors"] == len(CYCLE)  # K0204 on each defn of the cycle

    warm = _result(_start(2, jobs("a")))  # another seed over the first process's caches
    for case, got in warm.items():
        assert got["executed"] == [], (case, got["executed"])
        assert got["artifacts"] == first[case]["artifacts"], case
