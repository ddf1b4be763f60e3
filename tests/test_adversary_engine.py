"""Adversarial tests of the query engine and its cache (bug round 2026-12-02e): what a user or
tool can do to a :class:`kinac.rules.Database` and its cache directory that the earlier tests
did not try. Each test failed before its fix (docs/release-notes.md, "Bug round, 2026-12-02e").
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

from kinac.rules import Database, input_query, query

RUNS: list[str] = []


@input_query("adv_engine_text")
def _text(db: Database, key: str) -> str:
    return str(db.context["texts"][key])


@query("adv_engine_words")
def _words(db: Database, key: str) -> tuple[str, ...]:
    RUNS.append(f"words:{key}")
    time.sleep(0.01)  # long enough for another thread to enter the engine meanwhile
    return tuple(_text(db, key).split())


@query("adv_engine_count")
def _count(db: Database, key: str) -> int:
    RUNS.append(f"count:{key}")
    return len(_words(db, key))


def _hammer(db: Database, keys: list[str], threads: int = 6) -> tuple[list[object], list[str]]:
    """Every thread asks for every key at once; returns (results, errors)."""
    start = threading.Barrier(threads)
    results: list[object] = []
    errors: list[str] = []

    def work() -> None:
        start.wait()
        try:
            results.append(tuple(_count(db, k) for k in keys))
        except Exception as e:  # noqa: BLE001 - the test reports every failure
            errors.append(f"{type(e).__name__}: {e}")

    pool = [threading.Thread(target=work) for _ in range(threads)]
    for t in pool:
        t.start()
    for t in pool:
        t.join()
    return results, errors


def test_one_database_from_several_threads_at_once(tmp_path: Path) -> None:
    """Several threads asking one database at once (``kinac.compile``'s first calls from a
    thread pool share its session's database): each gets the value, no false query cycle
    (before: ``CycleError: query cycle through ...`` from the shared stack of running
    queries), and each query runs once, not once per thread."""
    from kinac.rules.store import Store

    RUNS.clear()
    texts = {"a": "one two three", "b": "four five"}
    db = Database(Store(tmp_path / "cache"), {"texts": texts})
    results, errors = _hammer(db, ["a", "b"])
    assert errors == []
    assert results == [(3, 2)] * 6
    assert sorted(RUNS) == ["count:a", "count:b", "words:a", "words:b"]
    db.commit()
    db.close()
    # the cache written meanwhile is whole: a fresh process reuses everything
    RUNS.clear()
    fresh = Database(Store(tmp_path / "cache"), {"texts": texts})
    assert (_count(fresh, "a"), _count(fresh, "b")) == (3, 2)
    assert RUNS == []
    fresh.close()


def test_commit_and_close_beside_a_running_query(tmp_path: Path) -> None:
    """One thread commits and closes the store (what ``kinac.compile`` does after each new
    shape) while another is inside a query: the query finishes, its value is stored, no
    "Cannot operate on a closed database" warning turns the cache off."""
    from kinac.rules.store import Store

    RUNS.clear()
    warnings: list[str] = []
    texts = {f"k{i}": "x " * i for i in range(40)}
    store = Store(tmp_path / "cache", warn=warnings.append)
    db = Database(store, {"texts": texts})
    stop = threading.Event()

    def churn() -> None:
        while not stop.is_set():
            db.commit()
            db.close()

    t = threading.Thread(target=churn)
    t.start()
    try:
        got = [_count(db, k) for k in texts]
    finally:
        stop.set()
        t.join()
    db.commit()
    db.close()
    assert got == list(range(40))
    assert warnings == [] and store.disabled is None
    RUNS.clear()
    fresh = Database(Store(tmp_path / "cache"), {"texts": texts})
    assert [_count(fresh, k) for k in texts] == list(range(40))
    assert RUNS == []
    fresh.close()


def _value_store_with(tmp_path: Path, key: str, value: object) -> tuple[Path, list[str]]:
    """A cache whose value store's diskcache Settings table holds one foreign row, and the
    warnings of a build over it (the test values are then read back through it)."""
    import sqlite3

    from kinac.rules.store import Store

    texts = {"a": "one two three"}
    db = Database(Store(tmp_path / "cache"), {"texts": texts})
    assert _count(db, "a") == 3
    db.commit()
    db.close()
    con = sqlite3.connect(tmp_path / "cache" / "blobs" / "cache.db")
    con.execute("INSERT OR REPLACE INTO Settings VALUES (?, ?)", (key, value))
    con.commit()
    con.close()
    warnings: list[str] = []
    RUNS.clear()
    db = Database(Store(tmp_path / "cache", warn=warnings.append), {"texts": texts})
    assert _count(db, "a") == 3  # the build goes on
    db.commit()
    db.close()
    return tmp_path / "cache", warnings


def test_foreign_value_store_settings_are_quarantined(tmp_path: Path) -> None:
    """A value store whose diskcache settings kinac never writes (another program's
    ``JSONDisk`` store: ``disk_compress_level``; a hand edit: an ``sqlite_*`` row, which
    diskcache formats into a PRAGMA statement) is moved aside with one warning and a fresh
    one started; before, the first was an internal ``TypeError`` and the second ran the SQL
    the file held (then turned the cache off on every build)."""
    for i, (key, value) in enumerate(
        [("disk_compress_level", 1), ("sqlite_foo", "1; select 1"), ("_disk", "x")]
    ):
        cache, warnings = _value_store_with(tmp_path / str(i), key, value)
        assert len(warnings) == 1, warnings
        assert "settings are not a kinac value store's" in warnings[0] and key in warnings[0]
        assert "moved it aside" in warnings[0]
        assert [p.name.startswith("blobs.corrupt-") for p in sorted(cache.iterdir())] == [
            False,
            True,
            False,
        ]  # blobs, blobs.corrupt-..., index.db
        # and the fresh store works: a new process reuses everything, silently
        warnings2: list[str] = []
        RUNS.clear()
        from kinac.rules.store import Store

        db = Database(Store(cache, warn=warnings2.append), {"texts": {"a": "one two three"}})
        assert _count(db, "a") == 3
        db.close()
        assert RUNS == [] and warnings2 == []


def test_value_store_own_settings_are_accepted(tmp_path: Path) -> None:
    """The check is not a false alarm: diskcache's own rows, with other values of the same
    kind (a user's bigger size limit, another journal mode), open silently."""
    cache, warnings = _value_store_with(tmp_path, "sqlite_journal_mode", "delete")
    assert warnings == [] and not any(p.name.startswith("blobs.") for p in cache.iterdir())


def test_a_record_tag_never_imports_a_module_without_records() -> None:
    """A value in the cache names its record classes by tag, and the decoder imports the
    tag's kinac module when a fresh process has not loaded it. A crafted or damaged value
    tagged ``__main__.X`` imported ``kinac.__main__``: the command line ran with the
    process's own argv and exited it (``SystemExit`` from inside a cache read). Now only a
    kinac source file that defines ``@record`` classes is imported; in a fresh process a real
    tag of a module not yet loaded still decodes."""
    import subprocess
    import sys

    probe = """
import sys
sys.argv = ["probe", "--version"]
from kinac.rules.codec import CodecError, decode
for tag in ("__main__.X", "__main__.X.Y", "cli.X", "rt.cuda.kernel_timer_child.X"):
    try:
        decode(('{"$t":"%s"}' % tag).encode())
        print("decoded", tag)
    except CodecError:
        print("refused", tag)
assert "kinac.artifacts.host" not in sys.modules
value = decode(b'{"$t":"artifacts.host.BufferSpec","dtype":"f32","name":"x","shape":[4]}')
print(type(value).__name__, value.shape)
print("alive")
"""
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, check=False
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.split("\n") == [
        "refused __main__.X",
        "refused __main__.X.Y",
        "refused cli.X",
        "refused rt.cuda.kernel_timer_child.X",
        "BufferSpec (4,)",
        "alive",
        "",
    ]


def test_strings_with_lone_surrogates_encode() -> None:
    """A name the file system gave back with lone surrogates (not UTF-8) is a value like any
    other: it encodes, decodes to itself, and its bytes are nobody else's; every string that
    encoded before encodes to the same bytes (caches stay valid)."""
    from kinac.rules.codec import decode, encode

    odd = ("n\udcffame.kina", "\ud800", "\ud83d\ude00")  # the last: a pair, as two code points
    for s in odd:
        assert decode(encode(s)) == s
        assert decode(encode((s, {"k": s}))) == (s, {"k": s})
    assert len({encode(s) for s in (*odd, "\U0001f600", "name.kina")}) == 5
    assert encode("café \U0001f600") == b'"caf\xc3\xa9 \xf0\x9f\x98\x80"'
