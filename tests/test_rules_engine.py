"""The rule engine on toy queries: memoisation, early cutoff, persistence, corruption, cycles."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest

from kinac.rules import CycleError, Database, input_query, query
from kinac.rules.codec import decode, encode, fingerprint, record
from kinac.rules.store import SafeDisk, Store

WORLD: dict[str, str] = {}


@input_query("test.text")
def text(db: Database, name: str) -> str | None:
    return WORLD.get(name)


@query("test.words")
def words(db: Database, name: str) -> int:
    t = text(db, name)
    return len(t.split()) if t is not None else 0


@query("test.parity")
def parity(db: Database, name: str) -> str:
    return "even" if words(db, name) % 2 == 0 else "odd"


@query("test.summary")
def summary(db: Database, names: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(parity(db, n) for n in names)


@query("test.loop")
def loop(db: Database, n: int) -> int:
    return loop(db, n)


@record
class Pair:
    left: int
    right: tuple[str, ...]


def names(db: Database) -> list[tuple[str, Any]]:
    return db.events.executed_names()


@pytest.fixture(autouse=True)
def world() -> None:
    WORLD.clear()
    WORLD.update({"a": "one two", "b": "three"})


def test_memoised_within_a_revision() -> None:
    db = Database()
    assert summary(db, ("a", "b")) == ("even", "odd")
    first = names(db)
    assert ("test.summary", ("a", "b")) in first
    db.events.clear()
    assert summary(db, ("a", "b")) == ("even", "odd")
    assert names(db) == []


def test_early_cutoff_stops_invalidation() -> None:
    db = Database()
    summary(db, ("a", "b"))
    WORLD["a"] = "four five six seven"  # still even: parity re-runs, summary does not
    db.invalidate()
    db.events.clear()
    assert summary(db, ("a", "b")) == ("even", "odd")
    assert names(db) == [("test.words", "a"), ("test.parity", "a")]


def test_change_propagates() -> None:
    db = Database()
    summary(db, ("a", "b"))
    WORLD["b"] = "x y"
    db.invalidate([(text, "b")])
    db.events.clear()
    assert summary(db, ("a", "b")) == ("even", "even")
    assert names(db) == [("test.words", "b"), ("test.parity", "b"), ("test.summary", ("a", "b"))]


def test_persistent_reuse_in_a_new_process(tmp_path: Path) -> None:
    db = Database(Store(tmp_path))
    summary(db, ("a", "b"))
    db.commit()
    db2 = Database(Store(tmp_path))
    assert summary(db2, ("a", "b")) == ("even", "odd")
    assert names(db2) == []
    # the root's summary (its inputs' fingerprints) proves it unchanged: no graph is even loaded
    assert [e.query for e in db2.events.reused_events] == ["test.summary"]
    assert db2._snapshot is None
    # asking for an inner query verifies it through the graph
    assert parity(db2, "a") == "even" and names(db2) == []


def test_persistent_change_reruns_only_affected(tmp_path: Path) -> None:
    db = Database(Store(tmp_path))
    summary(db, ("a", "b"))
    db.commit()
    WORLD["a"] = "just one"
    db2 = Database(Store(tmp_path))
    assert summary(db2, ("a", "b")) == ("even", "odd")
    assert names(db2) == [("test.words", "a")]  # cut off: still two words
    why = db2.events.chain(db2.events.executed_events[0].qid, db2.describe)
    assert why[0] == "test.words(a)" and why[1] == "test.text(a)"


def _mangle(v: bytes, how: str) -> bytes:
    if how == "truncate":
        return v[: len(v) // 2]
    if how == "bitflip":
        i = len(v) // 2
        return v[:i] + bytes([v[i] ^ 0x40]) + v[i + 1 :]
    return b"\x80\x04pickle"  # foreign


def _corrupt_all(directory: Path, how: str) -> int:
    """Damage every entry of a diskcache directory, in SQLite rows and in value files alike."""
    con = sqlite3.connect(directory / "cache.db")
    rows = con.execute("SELECT rowid, value, filename FROM Cache").fetchall()
    for rowid, value, filename in rows:
        if filename:
            f = directory / filename
            f.write_bytes(_mangle(f.read_bytes(), how))
        else:
            con.execute(
                "UPDATE Cache SET value = ? WHERE rowid = ?", (_mangle(bytes(value), how), rowid)
            )
    con.commit()
    con.close()
    return len(rows)


def _corrupt_blobs(tmp_path: Path, how: str) -> int:
    return _corrupt_all(tmp_path / "blobs", how)


@pytest.mark.parametrize("how", ["truncate", "bitflip"])
def test_corrupt_values_are_recomputed(tmp_path: Path, how: str) -> None:
    db = Database(Store(tmp_path))
    summary(db, ("a", "b"))
    db.commit()
    db.store.close()  # type: ignore[union-attr]
    assert _corrupt_blobs(tmp_path, how) > 0
    warnings: list[str] = []
    db2 = Database(Store(tmp_path, warn=warnings.append))
    assert summary(db2, ("a", "b")) == ("even", "odd")
    assert ("test.summary", ("a", "b")) in names(db2)
    assert any("corrupt" in w or "decode" in w for w in warnings)


def _corrupt_index(path: Path, how: str) -> int:
    """Damage every memo record and root summary of the index (rows stay valid SQLite)."""
    con = sqlite3.connect(path)
    n = 0
    for table in ("memo", "root"):
        for qid, rec in con.execute(f"SELECT qid, rec FROM {table}").fetchall():
            con.execute(
                f"UPDATE {table} SET rec = ? WHERE qid = ?", (_mangle(bytes(rec), how), qid)
            )
            n += 1
    con.commit()
    con.close()
    return n


@pytest.mark.parametrize("how", ["truncate", "bitflip", "foreign"])
def test_corrupt_graph_starts_afresh(tmp_path: Path, how: str) -> None:
    db = Database(Store(tmp_path))
    summary(db, ("a", "b"))
    db.commit()
    db.store.close()  # type: ignore[union-attr]
    assert _corrupt_index(tmp_path / "index.db", how) >= 4  # memos, inputs, root summary
    warnings: list[str] = []
    db2 = Database(Store(tmp_path, warn=warnings.append))
    assert summary(db2, ("a", "b")) == ("even", "odd")
    assert len(names(db2)) == 5 and warnings
    db2.commit()  # and the cache heals
    db3 = Database(Store(tmp_path))
    summary(db3, ("a", "b"))
    assert names(db3) == []


def test_pickled_entries_are_refused(tmp_path: Path) -> None:
    import pickle

    db = Database(Store(tmp_path))
    summary(db, ("a", "b"))
    db.commit()
    db.store.close()  # type: ignore[union-attr]
    con = sqlite3.connect(tmp_path / "blobs" / "cache.db")
    con.execute("UPDATE Cache SET mode = 4, value = ?", (pickle.dumps(("even", "odd")),))
    con.commit()
    con.close()
    warnings: list[str] = []
    db2 = Database(Store(tmp_path, warn=warnings.append))
    assert summary(db2, ("a", "b")) == ("even", "odd")
    assert warnings  # refused, recomputed
    with pytest.raises(TypeError):
        SafeDisk(str(tmp_path / "x")).store({"a": 1}, False)


def test_cache_deleted_between_and_during_builds(tmp_path: Path) -> None:
    import shutil

    db = Database(Store(tmp_path / "c"))
    summary(db, ("a", "b"))
    db.commit()
    shutil.rmtree(tmp_path / "c")
    db2 = Database(Store(tmp_path / "c"))
    assert summary(db2, ("a", "b")) == ("even", "odd")
    shutil.rmtree(tmp_path / "c")  # deleted mid-build, before the commit
    db2.commit()
    db3 = Database(Store(tmp_path / "c"))
    assert summary(db3, ("a", "b")) == ("even", "odd")


def test_cycles_are_internal_errors() -> None:
    with pytest.raises(CycleError):
        loop(Database(), 1)


def test_codec_round_trip_and_canonical() -> None:
    v = (Pair(1, ("x", "y")), {"b": 2, "a": float("-inf")}, b"\x00\xff", None, 1.5, True)
    assert decode(encode(v)) == v
    assert encode({"a": 1, "b": 2}) == encode({"b": 2, "a": 1})
    assert fingerprint(Pair(1, ())) != fingerprint(Pair(2, ()))


def test_gc_and_stats(tmp_path: Path) -> None:
    store = Store(tmp_path)
    db = Database(store)
    summary(db, ("a", "b"))
    db.commit()
    st = store.stats()  # type: ignore[attr-defined]
    assert st["memos"] >= 5 and st["values"] >= 5
    assert store.verify() == {  # type: ignore[attr-defined]
        "ok": st["values"],
        "dropped": 0,
        "records_dropped": 0,
        "reverse_edges_missing": 0,
        "quarantined": [],
    }
    res = store.gc(keep_generations=0)  # type: ignore[attr-defined]
    assert res["memos_dropped"] == 0


@query("test.tokens", by_trace=True)
def tokens(db: Database, name: str) -> tuple[str, ...]:
    t = text(db, name)
    return tuple(t.split()) if t is not None else ()


@query("test.count")
def count(db: Database, name: str) -> int:
    return len(tokens(db, name))


def test_a_by_trace_value_is_fingerprinted_by_its_trace_and_not_stored(tmp_path: Path) -> None:
    """``by_trace``: the fingerprint is a digest of the memo's id and what it read (no
    encoding), the value is never written to the store, a process that needs it recomputes
    it with the same fingerprint, and its reader still cuts off."""
    db = Database(Store(tmp_path))
    assert count(db, "a") == 2
    db.commit()
    memo = next(m for m in db._memos.values() if m.name == "test.tokens")
    assert memo.fp != fingerprint(("one", "two"))
    assert db.store is not None
    from kinac.rules.query import MISSING

    assert db.store.load_value(memo.fp) is MISSING  # never stored
    db2 = Database(Store(tmp_path))
    assert tokens(db2, "a") == ("one", "two")  # needed: recomputed, same fingerprint
    assert names(db2) == [("test.tokens", "a")]
    assert next(m for m in db2._memos.values() if m.name == "test.tokens").fp == memo.fp
    assert db2.events.why[db2.events.executed_events[0].qid] == "value not stored"
    WORLD["a"] = "three four"  # another value, same count: the reader cuts off
    db3 = Database(Store(tmp_path))
    assert count(db3, "a") == 2
    assert names(db3) == [("test.tokens", "a"), ("test.count", "a")]
    db3.commit()
    db3.events.clear()
    db3.invalidate()
    assert count(db3, "a") == 2 and names(db3) == []


def test_adopted_values_are_used_by_fingerprint_instead_of_the_store(tmp_path: Path) -> None:
    """``adopt_values``: a value another database computed is taken, as the same object, for
    a memo of the same fingerprint loaded from the store (``kinac serve``'s start-up build);
    a memo whose fingerprint differs still loads its own."""
    db = Database(Store(tmp_path))
    summary(db, ("a", "b"))
    db.commit()
    other = Database()
    assert summary(other, ("a", "b")) == ("even", "odd")
    mine = next(m.value for m in other._memos.values() if m.name == "test.summary")
    db2 = Database(Store(tmp_path))
    assert db2.adopt_values(other) > 0
    assert db2.store is not None
    db2.store.load_value = None  # type: ignore[method-assign]  # the store is not asked
    assert summary(db2, ("a", "b")) is mine and names(db2) == []
    WORLD["b"] = "three four"
    db3 = Database(Store(tmp_path))
    db3.adopt_values(other)
    assert summary(db3, ("a", "b")) == ("even", "even")  # recomputed, not the adopted value


def test_a_value_equal_to_the_one_it_replaces_is_not_written_again(tmp_path: Path) -> None:
    """Early cutoff: a re-run giving the stored value's fingerprint stages nothing (its value
    is in the store: rewriting it rewrote a file per firewall per edit); a value found missing
    from the store is recomputed and stored again."""
    db = Database(Store(tmp_path))
    assert summary(db, ("a", "b")) == ("even", "odd")
    db.commit()
    staged: list[str] = []
    real = db.store.stage_blob  # type: ignore[union-attr]
    db.store.stage_blob = lambda fp, blob: staged.append(fp) or real(fp, blob)  # type: ignore[func-returns-value,method-assign,union-attr]
    WORLD["a"] = "four five"  # still two words: words("a") re-runs and cuts off
    db.invalidate()
    db.events.clear()
    assert summary(db, ("a", "b")) == ("even", "odd")
    ran = [e for e in db.events.executed_events if e.query == "test.words"]
    assert [e.cutoff for e in ran] == [True] and staged == []
    db.commit()
    fp = fingerprint(2)
    blobs = db.store._values()  # type: ignore[union-attr]
    assert blobs is not None and fp in blobs
    blobs.delete(fp)
    db.store.close()  # type: ignore[union-attr]
    db2 = Database(Store(tmp_path))
    assert words(db2, "a") == 2  # green, but its value is gone: recomputed
    assert ("test.words", "a") in names(db2)
    db2.commit()
    blobs = db2.store._values()  # type: ignore[union-attr]
    assert blobs is not None and fp in blobs  # and stored again
