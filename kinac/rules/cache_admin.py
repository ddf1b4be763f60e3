"""``kinac cache stats|verify|gc|clear``: maintenance of a :class:`~kinac.rules.store.Store`.

Kept apart from the store because no build needs it. Each works on a damaged cache too: the
store quarantines what it cannot read while opening, and these report it.
"""

from __future__ import annotations

import re
import shutil
import sqlite3
from pathlib import Path
from typing import Any

from kinac.rules.cache_files import read_generation, store_folder
from kinac.rules.codec import CodecError, digest
from kinac.rules.disk import Damaged, index_is_foreign
from kinac.rules.store import (
    BLOBS,
    INDEX,
    KEEP_GENERATIONS,
    Store,
    forward_edges,
    recorded_edge_count,
    unseal,
)

QUARANTINE_MARK = ".corrupt-"


class CacheUnusable(Exception):
    """The cache cannot be used at all (its directory is a file, read-only, ...): the message says why."""


def _ready(store: Store) -> tuple[sqlite3.Connection, Any]:
    con, blobs = store._index(), store._values()
    if con is None or blobs is None:
        raise CacheUnusable(store.disabled or f"the cache at {store.directory} cannot be opened")
    return con, blobs


# The names CacheFiles.quarantine gives (with SQLite's side files): only these are removed by
# gc and clear (any name holding ".corrupt-" was: a user's `report.corrupt-draft.txt` too).
_QUARANTINED = re.compile(
    rf"(?:{re.escape(INDEX)}|{re.escape(BLOBS)})\.corrupt-\d{{8}}T\d{{6}}(?:-\d+)?(?:-wal|-shm)?"
)


def quarantined_copies(store: Store) -> list[Path]:
    """Damaged files moved aside in this cache directory (oldest first)."""
    d = store.directory
    if not d.is_dir():
        return []
    return sorted((p for p in d.iterdir() if _QUARANTINED.fullmatch(p.name)), key=lambda p: p.name)


def stats(store: Store) -> dict[str, Any]:
    """Counts and sizes."""
    con, blobs = _ready(store)
    try:
        by_query = dict(
            con.execute("SELECT name, COUNT(*) FROM memo GROUP BY name ORDER BY name").fetchall()
        )
        gen = read_generation(con)
        n_values, value_bytes = len(blobs), blobs.volume()
    except (sqlite3.Error, Damaged) as e:
        store._failed(e, "index")
        return stats(store)
    return {
        "directory": str(store.directory),
        "generation": gen,
        "memos": sum(by_query.values()),
        "values": n_values,
        "value_bytes": value_bytes,
        "index_bytes": (store.directory / INDEX).stat().st_size,
        "size_limit": store.size_limit,
        "memos_by_query": by_query,
        "quarantined": [p.name for p in quarantined_copies(store)],
    }


def verify(store: Store) -> dict[str, Any]:
    """SQLite integrity of the index and the value store, its generation counter, every record
    and value's checksum, and every trace's edges in the reverse-edge table (an edit's cone).

    Damaged files are quarantined (and listed), bad records and values dropped, missing reverse
    edges counted and the table rebuilt from the records."""
    con, blobs = _ready(store)
    for which, check in (("index", con.execute), ("blobs", blobs._sql)):
        try:
            result = check("PRAGMA integrity_check").fetchall()
            if result != [("ok",)]:
                raise sqlite3.DatabaseError(f"database disk image is malformed: {result[0][0]}")
            if which == "index":
                read_generation(con)
        except (sqlite3.Error, Damaged) as e:
            store._failed(e, which)
            con, blobs = _ready(store)
    bad_records = 0
    rows = con.execute("SELECT qid, rec FROM memo").fetchall()
    for qid, rec in rows:
        try:
            unseal(rec)
        except CodecError:
            bad_records += 1
            con.execute("DELETE FROM memo WHERE qid = ?", (qid,))
    missing = len(set(forward_edges(rows)) - set(con.execute("SELECT dep, qid FROM rdep")))
    recorded = con.execute("SELECT v FROM meta WHERE k = 'rdep_n'").fetchone()
    counted = con.execute("SELECT COUNT(*) FROM rdep").fetchone()[0]
    if missing or (rows and recorded_edge_count(recorded[0] if recorded else None) != counted):
        store.rebuild_reverse_edges()
    ok = bad = 0
    for fp in list(blobs.iterkeys()):
        try:
            blob = blobs.get(fp, default=None)
        except (sqlite3.Error, OSError, CodecError):
            blob = None
        if isinstance(blob, bytes) and digest(blob) == fp:
            ok += 1
        else:
            bad += 1
            store._discard(fp)
    return {
        "ok": ok,
        "dropped": bad,
        "records_dropped": bad_records,
        "reverse_edges_missing": missing,
        "quarantined": [str(p) for p in store.quarantined],
    }


def gc(store: Store, keep_generations: int = KEEP_GENERATIONS) -> dict[str, int]:
    """Forget memos unused for ``keep_generations`` builds, values nothing refers to, and
    quarantined copies of damaged files."""
    con, blobs = _ready(store)
    try:
        gen = read_generation(con)
    except Damaged as e:
        store._failed(e, "index")
        con, blobs = _ready(store)
        gen = 0
    con.execute("BEGIN IMMEDIATE")
    try:  # one transaction: no build commits between what is found used and what goes
        before = con.execute("SELECT COUNT(*) FROM memo").fetchone()[0]
        used = used_memos(con, gen - keep_generations)
        con.executemany(
            "DELETE FROM memo WHERE qid = ?",
            [(q,) for (q,) in con.execute("SELECT qid FROM memo").fetchall() if q not in used],
        )
        con.execute("COMMIT")
    except BaseException:
        con.execute("ROLLBACK")
        raise
    con.execute("DELETE FROM rdep WHERE qid NOT IN (SELECT qid FROM memo)")
    con.execute(  # the count the reverse edges are checked against (store.load_cone)
        "INSERT OR REPLACE INTO meta SELECT 'rdep_n', CAST(CAST(COUNT(*) AS TEXT) AS BLOB) FROM rdep"
    )
    live: set[str] = set()  # the values the kept memos name
    for _qid, rec in con.execute("SELECT qid, rec FROM memo").fetchall():
        try:
            live.add(str(unseal(rec)[2]))
        except (CodecError, IndexError, TypeError):
            pass
    after = con.execute("SELECT COUNT(*) FROM memo").fetchone()[0]
    dropped_values = 0
    for fp in list(blobs.iterkeys()):
        if fp not in live:
            blobs.delete(fp)
            dropped_values += 1
    blobs.cull()
    copies = quarantined_copies(store)
    for p in copies:
        shutil.rmtree(p, ignore_errors=True) if p.is_dir() else p.unlink(missing_ok=True)
    return {
        "memos_dropped": before - after,
        "values_dropped": dropped_values,
        "quarantined_removed": len(copies),
    }


def used_memos(con: sqlite3.Connection, cutoff: int) -> set[str]:
    """Every memo used at generation ``cutoff`` or later: those written since, the roots whose
    summaries were, and everything their traces read (transitively). A memo's generation is
    when it was last *written*, and a memo every build reuses is never rewritten: before, gc
    took "written long ago" for "unused" and dropped every file no edit had touched."""
    records = dict(con.execute("SELECT qid, rec FROM memo").fetchall())
    todo = [q for q, g in con.execute("SELECT qid, gen FROM memo").fetchall() if g >= cutoff]
    for qid, rec in con.execute("SELECT qid, rec FROM root").fetchall():
        try:
            if int(unseal(rec)[2]) >= cutoff:
                todo.append(qid)
        except (CodecError, IndexError, TypeError, ValueError):
            continue  # a damaged summary protects nothing (it is replaced on the next build)
    seen: set[str] = set()
    while todo:
        qid = todo.pop()
        if qid in seen:
            continue
        seen.add(qid)
        rec = records.get(qid)
        if rec is None:
            continue
        try:
            todo.extend(str(d[0]) for d in unseal(rec)[3])
        except (CodecError, IndexError, TypeError):
            continue
    return seen


_SOCKET = re.compile(r"server-[0-9a-f]{16}\.sock")  # kinac.server.address.socket_path's names


def server_sockets(directory: Path) -> list[Path]:
    """The sockets of build servers of this cache (``kinac serve``, ``kinac watch``): a
    server serves from the index it opened, so one left running after ``clear`` went on
    writing to an index no longer in the directory, and every build it did not answer was
    cold. Only sockets of kinac's names are listed."""
    import stat

    out = []
    for p in directory.glob("server-*.sock") if directory.is_dir() else ():
        try:
            if _SOCKET.fullmatch(p.name) and stat.S_ISSOCK(p.lstat().st_mode):
                out.append(p)
        except OSError:
            continue
    return out


def clear(store: Store) -> None:
    """Delete everything kinac keeps in the cache directory (quarantined copies included)."""
    if store.directory.exists() and not store.directory.is_dir():
        raise CacheUnusable(f"cache directory {store.directory} is not a directory")
    store.close()
    folders = [store.directory / BLOBS, store.directory / "meta"]
    index = store.directory / INDEX
    for p in [
        *(
            ()
            if index_is_foreign(index)  # a user's own database: not kinac's to delete
            else (
                index,
                *(store.directory / f"{INDEX}{side}" for side in ("-wal", "-shm", "-journal")),
            )
        ),
        *(f for f in folders if f.is_dir() and store_folder(f)),  # not a user's folders
        *quarantined_copies(store),
        *server_sockets(store.directory),  # its server stops when it sees its socket gone
    ]:
        try:
            shutil.rmtree(p) if p.is_dir() else p.unlink(missing_ok=True)
        except OSError as e:
            raise CacheUnusable(f"cannot clear {p} ({e.strerror or e})") from None
