"""Adversarial use of the cache's maintenance commands (bug round 2026-12-02e)."""

from __future__ import annotations

from pathlib import Path

import pytest

from kinac.rules import cache_admin
from kinac.session import Session

GOOD = "(module {m})\n(defn {f} [(x : (tensor f32 [4]))] -> (tensor f32 [4]) (add x x))\n"


def _build(ws: Path, cache: Path) -> tuple[int, int]:
    """(queries run, queries reused) of one build in a fresh session."""
    sess = Session(ws, cache_dir=str(cache))
    sess.build()
    ev = sess.db.events
    sess.close()
    return len(ev.executed_events), len(ev.reused_events)


def test_gc_keeps_what_every_build_reuses(tmp_path: Path) -> None:
    """``kinac cache gc`` forgets memos "unused for 50 builds", but it measured when a memo
    was last *written*: a file no edit touched is reused by every build and never rewritten,
    so after 50 edits of another file gc dropped nearly the whole cache (124 of 136 memos of
    the transformer workspace) and the next build was a cold one. Here with 2 generations:
    the untouched file's memos survive, the next build runs nothing; what no build reads any
    more (a deleted file's) is still dropped."""
    ws, cache = tmp_path / "ws", tmp_path / "cache"
    ws.mkdir()
    (ws / "a.kina").write_text(GOOD.format(m="a", f="f"))
    (ws / "b.kina").write_text(GOOD.format(m="b", f="g"))
    (ws / "gone.kina").write_text(GOOD.format(m="gone", f="h"))
    _build(ws, cache)
    (ws / "gone.kina").unlink()
    for i in range(5):  # five edits of a.kina: b.kina's memos keep their first generation
        (ws / "a.kina").write_text(GOOD.format(m="a", f="f") + f"; edit {i}\n")
        _build(ws, cache)
    sess = Session(ws, cache_dir=str(cache))
    assert sess.store is not None
    dropped = cache_admin.gc(sess.store, keep_generations=2)
    sess.close()
    assert dropped["memos_dropped"] > 0  # gone.kina's
    ran, reused = _build(ws, cache)
    assert ran == 0 and reused > 0
    # and what it dropped was dead: an edit of b.kina re-runs only b.kina's queries
    (ws / "b.kina").write_text(GOOD.format(m="b", f="g") + "; edit\n")
    sess = Session(ws, cache_dir=str(cache))
    sess.build()
    files = {str(e.key) for e in sess.db.events.executed_events if e.query == "source_text"}
    sess.close()
    assert files <= {"b.kina"}


def _user_files(d: Path) -> dict[str, str]:
    """The user's own files in a folder used as a cache directory."""
    (d / "meta").mkdir(parents=True)
    (d / "blobs").mkdir()
    files = {
        "meta/notes.txt": "precious notes",
        "blobs/photo.jpg": "precious photo",
        "report.corrupt-draft.txt": "a draft about corrupt data",
        "index.db-journal-notes.txt": "not sqlite's",
    }
    for name, text in files.items():
        (d / name).write_text(text)
    return files


def test_a_cache_directory_that_holds_the_users_files(tmp_path: Path) -> None:
    """``[workspace] cache_dir = "."`` (or ``KINAC_CACHE_DIR`` / ``--cache-dir`` naming a
    folder of one's own): kinac must never delete what it did not write. Before, the first
    build deleted a ``meta/`` folder outright (taken for the index of cache format 2), moved a
    ``blobs/`` folder aside as a "damaged" value store (which ``kinac cache gc`` then
    deleted), and ``gc``/``clear`` deleted any file whose name held ``.corrupt-``."""
    import subprocess
    import sys

    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "a.kina").write_text(GOOD.format(m="a", f="f"))
    (ws / "kina.toml").write_text('[workspace]\nname = "w"\ncache_dir = "."\n')
    files = _user_files(ws)
    results = []
    for argv in (["build"], ["build"], ["cache", "gc"], ["cache", "clear"], ["build"]):
        results.append(
            subprocess.run(
                [sys.executable, "-m", "kinac", *argv, str(ws)],
                capture_output=True,
                text=True,
                timeout=120,
                check=False,
                env={"PATH": "/usr/bin:/bin", "KINAC_SERVER": "0"},
            )
        )
        for name, text in files.items():
            assert (ws / name).read_text() == text, (argv, name)
    assert not list(ws.glob("*.corrupt-2*"))  # nothing of the user's was moved aside
    first = results[0]
    assert first.returncode == 0, first.stderr
    assert "not kinac's" in first.stderr and "blobs" in first.stderr  # said once, plainly
    assert "internal error" not in "".join(r.stderr for r in results)


def test_a_users_own_index_db_in_the_cache_directory(tmp_path: Path) -> None:
    """A folder of one's own used as the cache directory holds an SQLite ``index.db`` of
    another program: kinac neither writes into it (before: its tables created there, WAL
    mode switched on, and a ``meta`` table with another 'format' row dropped with the
    others), nor moves it aside, nor deletes it (``kinac cache clear`` did)."""
    import sqlite3
    import subprocess
    import sys

    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "a.kina").write_text(GOOD.format(m="a", f="f"))
    (ws / "kina.toml").write_text('[workspace]\nname = "w"\ncache_dir = "."\n')
    con = sqlite3.connect(ws / "index.db")
    con.execute("CREATE TABLE photos(name TEXT)")
    con.execute("CREATE TABLE meta(k TEXT, v BLOB)")
    con.execute("INSERT INTO photos VALUES ('holiday')")
    con.execute("INSERT INTO meta VALUES ('format', 'theirs')")
    con.commit()
    con.close()
    before = (ws / "index.db").read_bytes()
    for argv in (["build"], ["cache", "gc"], ["cache", "clear"], ["check"]):
        out = subprocess.run(
            [sys.executable, "-m", "kinac", *argv, str(ws)],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
            env={"PATH": "/usr/bin:/bin", "KINAC_SERVER": "0"},
        )
        assert "internal error" not in out.stderr, out.stderr
        assert (ws / "index.db").read_bytes() == before, argv
        if argv == ["build"]:
            assert out.returncode == 0 and "is not kinac's" in out.stderr, out.stderr
    assert sorted(p.name for p in ws.iterdir()) == ["a.kina", "index.db", "kina.toml"]


def test_a_cache_deleted_under_a_long_lived_session(tmp_path: Path) -> None:
    """``rm -rf .kinac-cache`` while ``kinac watch`` (or a server, or ``kinac.compile``) runs:
    before, the session went on writing to the index it held open, which no longer had a
    name, and every other process's build was a cold one for as long as it ran. Its next
    commit now writes a fresh cache at the directory's name, with everything it holds."""
    import shutil

    ws, cache = tmp_path / "ws", tmp_path / "cache"
    ws.mkdir()
    (ws / "a.kina").write_text(GOOD.format(m="a", f="f"))
    (ws / "b.kina").write_text(GOOD.format(m="b", f="g"))
    live = Session(ws, cache_dir=str(cache))
    live.build()
    shutil.rmtree(cache)
    (ws / "a.kina").write_text(GOOD.format(m="a", f="f") + "; edit\n")
    live.invalidate_paths([ws / "a.kina"])
    live.build()
    assert (cache / "index.db").is_file()
    ran, reused = _build(ws, cache)
    assert (ran, reused > 0) == (0, True)
    live.close()


def test_gc_beside_a_build_that_commits(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``kinac cache gc`` while another process commits: what gc found used and what it
    deletes are one snapshot, so a memo the build commits meanwhile is never deleted (the
    build is made to commit exactly between the two)."""
    import threading
    import time

    from kinac.rules import Database
    from kinac.rules.store import Store

    ws, cache = tmp_path / "ws", tmp_path / "cache"
    ws.mkdir()
    (ws / "a.kina").write_text(GOOD.format(m="a", f="f"))
    _build(ws, cache)
    real = cache_admin.used_memos
    done: list[str] = []

    def commit_elsewhere() -> None:
        other = Database(Store(cache))
        from kinac.rules.engine import Memo

        other._memos["late-memo"] = Memo("late", b'"k"', "0" * 32, [], dirty=True)
        other.commit()
        other.close()
        done.append("committed")

    def used_then_a_commit(con: object, cutoff: int) -> set[str]:
        found = real(con, cutoff)  # type: ignore[arg-type]
        t = threading.Thread(target=commit_elsewhere)
        t.start()
        t.join(0.5)  # a build committing now: before, it did, and gc deleted its memo
        return found

    monkeypatch.setattr(cache_admin, "used_memos", used_then_a_commit)
    store = Store(cache)
    cache_admin.gc(store, keep_generations=0)
    store.close()
    deadline = time.monotonic() + 30
    while not done and time.monotonic() < deadline:
        time.sleep(0.05)
    store = Store(cache)
    assert done == ["committed"] and store.load_record("late-memo") is not None
    store.close()


def test_a_cache_deleted_while_a_session_had_it_closed(tmp_path: Path) -> None:
    """As above, for a session that closes the cache between builds (``kinac.compile`` does,
    after each new shape): the cache it reopens is not the one it knew, so it writes
    everything it holds there too (before: only what the next build ran)."""
    import shutil

    ws, cache = tmp_path / "ws", tmp_path / "cache"
    ws.mkdir()
    (ws / "a.kina").write_text(GOOD.format(m="a", f="f"))
    (ws / "b.kina").write_text(GOOD.format(m="b", f="g"))
    live = Session(ws, cache_dir=str(cache))
    live.build()
    live.db.close()
    shutil.rmtree(cache)
    (ws / "a.kina").write_text(GOOD.format(m="a", f="f") + "; edit\n")
    live.invalidate_paths([ws / "a.kina"])
    live.build()
    live.close()
    ran, reused = _build(ws, cache)
    assert (ran, reused > 0) == (0, True)


def test_a_value_store_locked_by_another_process(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another process holds the value store's write lock past the wait (a process stopped
    with Ctrl-Z mid-commit, a hung NFS client): diskcache raises its own ``Timeout``, which is
    no ``sqlite3.Error``, and the build ended in an internal error. Now the build finishes
    and the cache is turned off for the process with one warning that says why."""
    import sqlite3

    from kinac.rules import cache_files

    ws, cache = tmp_path / "ws", tmp_path / "cache"
    ws.mkdir()
    (ws / "a.kina").write_text(GOOD.format(m="a", f="f"))
    _build(ws, cache)
    monkeypatch.setattr(cache_files, "VALUE_STORE_WAIT_S", 0.2)
    warnings: list[str] = []
    sess = Session(ws, cache_dir=str(cache))
    assert sess.store is not None
    sess.store.warn = warnings.append
    sess.build()
    assert sess.store._values() is not None  # open before the other process takes its lock
    holder = sqlite3.connect(cache / "blobs" / "cache.db", isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")  # the other process's write lock, held
    try:
        (ws / "a.kina").write_text(GOOD.format(m="a", f="f").replace("add", "mul"))
        sess.invalidate_paths([ws / "a.kina"])
        report = sess.build()
        sess.close()
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert report.error_count == 0
    assert len(warnings) == 1 and "locked" in warnings[0], warnings


def test_cache_gc_while_another_process_holds_the_locks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """``kinac cache gc`` while another process holds the value store's or the index's write
    lock past the wait: an internal error before (diskcache's ``Timeout``, SQLite's "database
    is locked"); now one ``kinac: error:`` that says which file is locked, exit 1."""
    import sqlite3

    from kinac import cli
    from kinac.rules import cache_files

    ws, cache = tmp_path / "ws", tmp_path / "cache"
    ws.mkdir()
    (ws / "a.kina").write_text(GOOD.format(m="a", f="f"))
    _build(ws, cache)
    monkeypatch.setattr(cache_files, "VALUE_STORE_WAIT_S", 0.2)
    monkeypatch.setattr(cache_files, "INDEX_WAIT_S", 0.2)
    for locked in ("blobs/cache.db", "index.db"):
        holder = sqlite3.connect(cache / locked, isolation_level=None)
        holder.execute("BEGIN IMMEDIATE")
        try:
            code = cli.main(["cache", "gc", str(ws), "--cache-dir", str(cache)])
        finally:
            holder.execute("ROLLBACK")
            holder.close()
        err = capsys.readouterr().err
        assert code == 1, err
        assert "internal error" not in err and "locked" in err, err
