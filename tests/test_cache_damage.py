"""A damaged cache (issue 15): every kind of damage is quarantined once, reported once, and
never a traceback; ``cache verify`` says so and exits 1; builds, gc, stats and clear work.

Runs the CLI in-process on a one-defn workspace, so each case costs milliseconds.
"""

from __future__ import annotations

import gc
import os
import random
import sqlite3
from pathlib import Path

import pytest

from kinac.cli import main
from kinac.rules.store import INDEX

SOURCE = "(defn twice [(x : (tensor f32 [N]))] -> (tensor f32 [N]) (add x x))\n"


@pytest.fixture()
def ws(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    root.mkdir()
    (root / "kina.toml").write_text('[workspace]\nname = "tiny"\n')
    (root / "twice.kina").write_text(SOURCE)
    return root


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out = capsys.readouterr()
    assert "Traceback" not in out.err + out.out
    return code, out.out, out.err


def warnings(err: str) -> list[str]:
    return [line for line in err.splitlines() if line.startswith("kinac: warning:")]


def _damage_pages(p: Path) -> None:
    """Overwrite the middle of the file: SQLite then reports 'database disk image is malformed'."""
    data = bytearray(p.read_bytes())
    page = 4096
    for i in range(page, len(data), page):
        data[i : i + 64] = b"\xa5" * 64
    p.write_bytes(bytes(data))


DAMAGE = {
    "malformed": _damage_pages,
    "truncated": lambda p: p.write_bytes(p.read_bytes()[: max(100, p.stat().st_size // 3)]),
    "zeros": lambda p: p.write_bytes(bytes(p.stat().st_size)),
    "random": lambda p: p.write_bytes(random.Random(5).randbytes(max(8192, p.stat().st_size))),
    "directory": lambda p: (p.unlink(), p.mkdir(), (p / "x").write_text("x")),
}


def _built(capsys: pytest.CaptureFixture[str], ws: Path, cache: Path) -> None:
    code, _, err = run(capsys, "build", str(ws), "--cache-dir", str(cache))
    assert code == 0 and not warnings(err), err
    gc.collect()  # close the in-process session's connections, as an exiting process would
    for side in ("-wal", "-shm"):  # a checkpointed index: damage lands in the file itself
        Path(f"{cache / INDEX}{side}").unlink(missing_ok=True)


@pytest.mark.parametrize("kind", sorted(DAMAGE))
@pytest.mark.parametrize("what", [INDEX, "blobs/cache.db"])
def test_damaged_cache_is_quarantined_once_and_builds_go_on(
    ws: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], kind: str, what: str
) -> None:
    cache = tmp_path / "cache"
    _built(capsys, ws, cache)
    DAMAGE[kind](cache / what)
    (ws / "twice.kina").write_text(SOURCE.replace("add x x", "mul x x"))  # reads the graph
    code, out, err = run(capsys, "build", str(ws), "--cache-dir", str(cache))
    assert code == 0 and "no errors" in out + err
    (warning,) = warnings(err)  # said once, naming the file moved aside
    moved = [p.name for p in cache.rglob("*.corrupt-*")]
    assert len(moved) == 1 and moved[0] in warning and "damaged" in warning
    code, out, err = run(capsys, "build", str(ws), "--cache-dir", str(cache))
    assert code == 0 and not warnings(err)  # healed: no warning on later builds
    assert "(0 queries run" in out + err


@pytest.mark.parametrize("kind", sorted(DAMAGE))
def test_cache_verify_reports_damage_and_exits_1(
    ws: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], kind: str
) -> None:
    cache = tmp_path / "cache"
    _built(capsys, ws, cache)
    DAMAGE[kind](cache / INDEX)
    code, _, err = run(capsys, "cache", "verify", str(ws), "--cache-dir", str(cache))
    assert code == 1
    (line,) = err.splitlines()
    assert line.startswith("kinac: error: the cache at") and "corrupt-" in line
    code, _, err = run(capsys, "cache", "verify", str(ws), "--cache-dir", str(cache))
    assert code == 0 and err == ""  # fixed by the first verify


@pytest.mark.parametrize("action", ["stats", "gc", "clear"])
def test_maintenance_works_on_a_damaged_cache(
    ws: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], action: str
) -> None:
    cache = tmp_path / "cache"
    _built(capsys, ws, cache)
    _damage_pages(cache / INDEX)
    code, _, err = run(capsys, "cache", action, str(ws), "--cache-dir", str(cache))
    assert code == 0
    assert len(warnings(err)) == (0 if action == "clear" else 1)


def test_verify_finds_damage_that_opening_does_not(
    ws: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A broken page deep in the value store only shows under a full integrity check."""
    cache = tmp_path / "cache"
    _built(capsys, ws, cache)
    con = sqlite3.connect(cache / "blobs" / "cache.db")
    con.execute("CREATE TABLE pad(x BLOB)")
    con.executemany("INSERT INTO pad VALUES (?)", [(os.urandom(3000),) for _ in range(40)])
    con.commit()
    con.close()
    p = cache / "blobs" / "cache.db"
    data = bytearray(p.read_bytes())
    data[-3 * 4096 : -3 * 4096 + 16] = b"\xff" * 16  # a page header of the padding table
    p.write_bytes(bytes(data))
    code, _, err = run(capsys, "cache", "verify", str(ws), "--cache-dir", str(cache))
    assert code == 1 and "blobs.corrupt-" in err


def test_cache_dir_that_is_a_file(
    ws: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cache = tmp_path / "cache"
    cache.write_text("not a directory")
    code, out, err = run(capsys, "build", str(ws), "--cache-dir", str(cache))
    assert code == 0 and "no errors" in out + err
    (warning,) = warnings(err)
    assert "is not a directory" in warning and "without a cache" in warning
    assert cache.read_text() == "not a directory"  # the user's file is left alone
    for action in ("verify", "stats", "gc", "clear"):
        code, _, err = run(capsys, "cache", action, str(ws), "--cache-dir", str(cache))
        assert (
            code == 1 and err.startswith("kinac: error: cache directory") and err.count("\n") == 1
        )


def test_read_only_cache_dir(
    ws: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    cache = tmp_path / "cache"
    _built(capsys, ws, cache)
    os.chmod(cache, 0o500)
    real_access = os.access
    if os.geteuid() == 0:  # root writes anyway: let the store see what a user would
        monkeypatch.setattr(
            "kinac.rules.cache_files.os.access",
            lambda p, m: False if Path(p) == cache else real_access(p, m),
        )
    try:
        (ws / "twice.kina").write_text(SOURCE.replace("add x x", "mul x x"))
        code, out, err = run(capsys, "build", str(ws), "--cache-dir", str(cache))
        assert code == 0 and "no errors" in out + err
        (warning,) = warnings(err)
        assert "read-only" in warning and "without a cache" in warning
    finally:
        os.chmod(cache, 0o700)
