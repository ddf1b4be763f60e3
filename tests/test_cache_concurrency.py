"""Several processes sharing one cold cache (CI shards, the ranks of ``kinac launch``, an
editor's build beside a terminal's) open, write and read it at once: no warning, no file moved
aside, every value written is read back intact.

The defect this guards: a process holding two stores on one cache (``kinac.api`` opens one per
compiled function) read the SQLite header with a plain ``open()``/``close()`` before the second
connection, and closing that descriptor dropped the process's POSIX locks on the file, so another
process's writes raced its own: ``database disk image is malformed`` (a healthy index moved aside)
or ``disk I/O error`` (the cache turned off)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from kinac.rules.store import Store

ROOT = Path(__file__).resolve().parents[1]
ROUNDS = 6  # per process, each a save and a read by both stores, then a reopen

WORKER = r"""
import json, os, sys, types
from pathlib import Path
from kinac.rules.codec import digest, pack
from kinac.rules.store import Store

d, me, rounds = Path(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
msgs = []
first = Store(d, warn=msgs.append)  # two stores in one process, as kinac.api holds them
second = Store(d, warn=msgs.append)
for r in range(rounds):
    for j, s in enumerate((first, second)):
        s.load_graph()
        values = [os.urandom(2000 + 97 * k).hex() for k in range(12)]
        blobs = [pack(v) for v in values]
        for b in blobs:
            s.stage_blob(digest(b), b)
        memos = {
            f"w{me}-{r}-{k}-{j}": types.SimpleNamespace(
                name="q", key_json=b"[]", fp=digest(blobs[k % 12]), deps=[("dep", "fp")]
            )
            for k in range(60)
        }
        s.save(memos)
        for v, b in zip(values, blobs):
            if s.load_value(digest(b)) != v:
                msgs.append(f"value {digest(b)[:12]} not read back")
    first.close()  # reopen: a close is a checkpoint, racing the others' header checks
print(json.dumps(msgs))
"""


def test_processes_sharing_a_cold_cache_stay_quiet_and_lose_nothing(tmp_path: Path) -> None:
    d = tmp_path / "cache"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", WORKER, str(d), str(i), str(ROUNDS)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        for i in range(5)
    ]
    for p in procs:
        out, err = p.communicate(timeout=120)
        assert p.returncode == 0, err
        assert json.loads(out) == [], out
        assert "warning" not in err, err
    assert not [p.name for p in d.iterdir() if ".corrupt-" in p.name]
    s = Store(d, warn=lambda m: (_ for _ in ()).throw(AssertionError(m)))
    report = s.verify()  # type: ignore[attr-defined]
    assert report["dropped"] == 0 and report["records_dropped"] == 0 and not report["quarantined"]
    assert report["ok"] == 5 * ROUNDS * 2 * 12
    rows = s.load_graph()
    assert len(rows) == 5 * ROUNDS * 2 * 60
    for qid, raw in rows.items():
        rec = s.decode_record(qid, raw)
        assert rec is not None and rec[0] == "q"
    s.close()


def test_concurrent_cold_builds_agree_and_leave_a_sound_cache(tmp_path: Path) -> None:
    """Three ``kinac build`` processes on one workspace and one cold cache (CI shards, an
    editor's build beside a terminal's): no warning, identical artifacts, a cache that
    ``kinac cache verify`` finds sound and a fourth build reuses whole."""
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "t.kina").write_text(
        "(module t)\n\n(defn f [(x : (tensor f32 [N]))] -> (tensor f32 [N])\n  (exp (add x x)))\n"
    )
    (ws / "kina.toml").write_text(
        '[workspace]\nname = "t"\n\n[[entry]]\nname = "f"\ndefn = "f"\ndims = { N = 8 }\n'
    )
    cache = str(tmp_path / "cache")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    cmd = [sys.executable, "-m", "kinac", "build", str(ws), "--cache-dir", cache, "--no-server"]
    procs = [
        subprocess.Popen(
            [*cmd, "--json"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
        )
        for _ in range(3)
    ]
    reports = []
    for p in procs:
        out, err = p.communicate(timeout=180)
        assert p.returncode == 0 and err == "", err
        reports.append(json.loads(out))
    assert len(reports[0]["artifacts"]) == 3
    assert all(r["artifacts"] == reports[0]["artifacts"] for r in reports)
    verify = [sys.executable, "-m", "kinac", "cache", "verify", "--cache-dir", cache]
    v = subprocess.run(verify, capture_output=True, text=True, env=env, timeout=60)
    assert v.returncode == 0 and "warning" not in v.stderr, v.stdout + v.stderr
    again = subprocess.run([*cmd, "--json"], capture_output=True, text=True, env=env, timeout=60)
    assert json.loads(again.stdout)["queries_executed"] == 0, again.stderr
    assert json.loads(again.stdout)["artifacts"] == reports[0]["artifacts"]


def test_a_truncated_index_beside_a_wal_is_still_reported_and_rebuilt(tmp_path: Path) -> None:
    """The header check trusts a file with a live WAL (another process may be checkpointing
    it): real truncation is then found by SQLite on the first read, and quarantined."""
    import types

    d = tmp_path / "cache"
    s = Store(d)
    deps = [("a" * 40, "b" * 32)]
    memo = types.SimpleNamespace(name="n", key_json=b"k" * 50, fp="f" * 32, deps=deps)
    s.save({f"q{k}": memo for k in range(3000)})
    s.close()
    index = d / "index.db"
    index.write_bytes(index.read_bytes()[: index.stat().st_size // 3])
    (d / "index.db-wal").write_bytes(os.urandom(5000))
    warnings: list[str] = []
    s = Store(d, warn=warnings.append)
    assert s.load_graph() == {}  # rebuilt from nothing, not trusted
    assert len(warnings) == 1 and "is damaged" in warnings[0] and "moved it aside" in warnings[0]
    assert [p.name for p in d.iterdir() if p.name.startswith("index.db.corrupt-")]
    s.save({"q": memo})
    assert list(s.load_graph()) == ["q"]
    s.close()
