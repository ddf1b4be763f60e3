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
