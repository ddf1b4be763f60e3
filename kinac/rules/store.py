"""The on-disk cache: dependency traces (one row per memo) and content-addressed values.

Layout, under the cache directory:

* ``index.db``: SQLite, one row per memo (query name, key, fingerprint, trace, and the
  generation that last wrote it), one row per root summary, and a few settings (the generation
  counter, the code-identity table of :mod:`kinac.rules.codeid`). A commit writes only the memos
  this process computed, in one transaction: the graph is never rewritten whole, and two
  processes (a watch and a build) sharing a cache simply merge their rows. A load reads every
  row's bytes in one query and decodes a record only when the engine asks for it.
* ``blobs/``: values keyed by their fingerprint, which is also their checksum (diskcache, with
  a :class:`SafeDisk` that stores only bytes and refuses pickled rows). Size-limited,
  least-recently-stored eviction; an evicted value is simply recomputed.

Every record carries a checksum; a bad record or value is dropped (with one warning) and
recomputed. Opening the files, quarantining damaged ones and closing them is
:mod:`kinac.rules.cache_files`.
"""

from __future__ import annotations

import sqlite3
from typing import Any

from kinac.rules.cache_files import (
    BLOBS,
    DEFAULT_SIZE_LIMIT,
    FORMAT,
    INDEX,
    SCHEMA,
    VALUE_STORE_ERRORS,
    CacheFiles,
    read_count,
    read_generation,
)
from kinac.rules.codec import CodecError, digest, unpack
from kinac.rules.disk import Damaged, SafeDisk, check_header, damage_kind, seal, unseal
from kinac.rules.query import MISSING as _MISSING

__all__ = [
    "BLOBS",
    "DEFAULT_SIZE_LIMIT",
    "FORMAT",
    "INDEX",
    "SCHEMA",
    "Damaged",
    "SafeDisk",
    "Store",
    "check_header",
    "damage_kind",
    "seal",
    "unseal",
]

KEEP_GENERATIONS = 50
_CONE = (
    "WITH RECURSIVE cone(q) AS (SELECT value FROM json_each(?)"
    " UNION SELECT rdep.qid FROM rdep JOIN cone ON rdep.dep = cone.q)"
    " SELECT cone.q, memo.rec FROM cone LEFT JOIN memo ON memo.qid = cone.q"
)

_RDEP_CHECK = (  # one statement: one snapshot of the table, its count and the memos
    "SELECT (SELECT COUNT(*) FROM rdep), (SELECT v FROM meta WHERE k = 'rdep_n'),"
    " EXISTS (SELECT 1 FROM memo)"
)

_RDEP_BEFORE = (  # what a commit needs to keep the count: the count, and whether it is fresh
    "SELECT (SELECT v FROM meta WHERE k = 'rdep_n'), EXISTS (SELECT 1 FROM memo),"
    " EXISTS (SELECT 1 FROM rdep)"
)


def recorded_edge_count(raw: object) -> int | None:
    """The recorded reverse-edge count, or None if missing or not a count (then the table
    is rebuilt before it is trusted, not the index quarantined: it is derived data)."""
    if raw is None:
        return None
    try:
        return read_count(raw, "reverse-edge count")
    except Damaged:
        return None


def forward_edges(rows: list[tuple[str, bytes]]) -> list[tuple[str, str]]:
    """``(dep, qid)`` for every dependency in the traces of these ``(qid, sealed record)``
    rows: what the reverse-edge table must hold (it may hold more: edges of replaced traces,
    which only widen a cone). Records that do not decode are skipped."""
    out: list[tuple[str, str]] = []
    for qid, raw in rows:
        try:
            deps = unseal(raw)[3]
            out.extend((str(d[0]), qid) for d in deps)
        except (CodecError, IndexError, TypeError, KeyError):
            continue
    return out


class Store(CacheFiles):
    """A persistent cache directory; never raises on bad contents (see the module docstring)."""

    # ------------------------------------------------------------------ the graph

    def load_graph(self) -> dict[str, bytes]:
        """Every known memo: ``qid -> sealed record`` (decode with :func:`decode_record`)."""
        con = self._index()
        if con is None:
            return {}
        try:
            return dict(con.execute("SELECT qid, rec FROM memo").fetchall())
        except sqlite3.Error as e:
            self._failed(e, "index")
            return {}

    def decode_record(
        self, qid: str, raw: bytes
    ) -> tuple[str, bytes, str, list[tuple[str, str]]] | None:
        """``(name, key_json, fp, deps)`` of a stored record, or None (with a warning) if bad."""
        try:
            name, key_json, fp, deps = unseal(raw)
            if not (
                isinstance(name, str)
                and isinstance(key_json, bytes)
                and isinstance(fp, str)
                and isinstance(deps, list)
            ):
                raise TypeError("record fields have the wrong types")
            return name, key_json, fp, deps  # checksummed: deps are [qid, fp] pairs as written
        except (CodecError, ValueError, TypeError) as e:
            self._warn(f"cache record {qid[:12]} is corrupt ({e}); recomputing")
            return None

    def load_record(self, qid: str) -> bytes | None:
        """One memo's sealed record (a small edit reads a few of these, not the whole graph)."""
        con = self._index()
        if con is None:
            return None
        try:
            row = con.execute("SELECT rec FROM memo WHERE qid = ?", (qid,)).fetchone()
        except sqlite3.Error as e:
            self._failed(e, "index")
            return None
        return bytes(row[0]) if row is not None else None

    def load_cone(self, changed: list[str]) -> dict[str, bytes | None] | None:
        """Every memo that transitively read one of ``changed`` (qid -> sealed record), from
        the reverse edges, computed inside SQLite; None if the index cannot say."""
        con = self._index()
        if con is None:
            return None
        import json

        try:
            if not self._reverse_edges_consistent(con):
                return None  # cannot say (the rebuild failed and turned the cache off)
            return dict(con.execute(_CONE, (json.dumps(changed),)).fetchall())
        except (sqlite3.Error, Damaged) as e:
            self._failed(e, "index")
            return None

    def _reverse_edges_consistent(self, con: sqlite3.Connection) -> bool:
        """Check the reverse edges against the count written with them before an edit trusts
        them: a cone computed from a table that lost rows (a hand edit, a damaged page SQLite
        did not notice) misses memos, and a build reusing them is stale. On a mismatch the table
        is rebuilt from the memo records (one warning). One COUNT, on edit builds only: a no-op
        build never reads the reverse edges."""
        have, want, any_memo = con.execute(_RDEP_CHECK).fetchone()
        expected = recorded_edge_count(want)
        if have == expected or (want is None and have == 0 and not any_memo):
            return True
        n = self.rebuild_reverse_edges()
        if n is None:
            return False
        self._warn(
            f"cache index {self.directory / INDEX}: its reverse-dependency table disagrees with "
            f"its records ({have} rows, {expected if expected is not None else 'no count'} "
            f"recorded); rebuilt it from the records ({n} edges)"
        )
        return True

    def rebuild_reverse_edges(self) -> int | None:
        """Recompute the reverse edges (and their count) from the memo records' traces, in one
        transaction; how many, or None if the index failed (then it is quarantined or off).
        A record that does not decode contributes nothing (its memo is recomputed anyway)."""
        con = self._index()
        if con is None:
            return None
        try:
            con.execute("BEGIN IMMEDIATE")
            try:
                edges = set(forward_edges(con.execute("SELECT qid, rec FROM memo").fetchall()))
                con.execute("DELETE FROM rdep")
                con.executemany("INSERT INTO rdep VALUES (?, ?)", sorted(edges))
                con.execute(
                    "INSERT OR REPLACE INTO meta VALUES ('rdep_n', ?)", (str(len(edges)).encode(),)
                )
                con.execute("COMMIT")
            except BaseException:
                con.execute("ROLLBACK")
                raise
        except sqlite3.Error as e:
            self._failed(e, "index")
            return None
        return len(edges)

    def current_gen(self) -> int | None:
        con = self._index()
        try:
            return read_generation(con) if con is not None else None
        except (sqlite3.Error, Damaged) as e:
            self._failed(e, "index")
            return None

    def load_summaries(self) -> dict[str, bytes]:
        """Every stored summary, sealed (see :mod:`kinac.rules.summaries`)."""
        con = self._index()
        if con is None:
            return {}
        try:
            return dict(con.execute("SELECT qid, rec FROM root").fetchall())
        except sqlite3.Error as e:
            self._failed(e, "index")
            return {}

    def decode_summary(self, qid: str, raw: bytes) -> Any:
        """``((name, key_json, fp, deps), inputs, gen)`` of a stored summary, or None if bad."""
        try:
            (name, key_json, fp, deps), inputs, gen = unseal(raw)
            return (
                (str(name), bytes(key_json), str(fp), [(str(q), str(f)) for q, f in deps]),
                {str(k): (str(n), bytes(kj), str(f)) for k, (n, kj, f) in inputs.items()},
                int(gen),
            )
        except (CodecError, ValueError, TypeError, AttributeError) as e:
            self._warn(f"cache summary {qid[:12]} is corrupt ({e}); verifying in full")
            return None

    def load_setting(self, key: str) -> Any:
        """A sealed setting (the code-identity table), or None."""
        con = self._index()
        if con is None:
            return None
        try:
            row = con.execute("SELECT v FROM meta WHERE k = ?", (key,)).fetchone()
            return unseal(row[0]) if row is not None else None
        except sqlite3.Error as e:
            self._failed(e, "index")
        except CodecError:
            pass
        return None

    def save_setting(self, key: str, value: Any) -> None:
        """Write one sealed setting now (a machine fact such as the detected host CPU), without
        starting a generation: it describes the machine, not a build."""
        con = self._index()
        if con is None:
            return
        try:
            con.execute("INSERT OR REPLACE INTO meta VALUES (?, ?)", (key, seal(value)))
        except (sqlite3.Error, ValueError) as e:
            self._failed(e, "index")

    def save(
        self,
        memos: dict[str, Any],
        roots: dict[str, Any] | None = None,
        settings: dict[str, Any] | None = None,
    ) -> None:
        """Write pending values, then these memos (qid -> Memo), summaries and settings."""
        blobs = self._values()
        if blobs is not None and self._pending:
            try:
                with blobs.transact():
                    for fp, blob in self._pending.items():
                        blobs.set(fp, blob)
            except VALUE_STORE_ERRORS as e:
                self._failed(e, "blobs")
        self._pending.clear()
        con = self._index()
        if con is None:
            return
        try:
            con.execute("BEGIN IMMEDIATE")
            try:
                gen = read_generation(con)
                if gen != self.base_gen:  # another process committed since we read: our
                    roots = None  # summaries may describe traces it replaced, so keep theirs
                gen += 1
                was, had_memos, had_edges = con.execute(_RDEP_BEFORE).fetchone()
                con.executemany(
                    "INSERT OR REPLACE INTO memo VALUES (?, ?, ?, ?)",
                    [
                        (qid, m.name, seal([m.name, m.key_json, m.fp, m.deps]), gen)
                        for qid, m in memos.items()
                    ],
                )
                added = max(
                    0,
                    con.executemany(
                        "INSERT OR IGNORE INTO rdep VALUES (?, ?)",
                        [(d, qid) for qid, m in memos.items() for d, _ in m.deps],
                    ).rowcount,  # the edges new to the table: ignored duplicates count 0
                )
                # the count the edges are checked against (_reverse_edges_consistent): kept
                # up to date, started on a fresh index, and never re-derived from a table that
                # lost its count (counting it would bless the damage: the next edit rebuilds)
                recorded = recorded_edge_count(was)
                fresh = was is None and not had_memos and not had_edges
                n_edges = (recorded + added) if recorded is not None else added if fresh else None
                con.executemany(
                    "INSERT OR REPLACE INTO root VALUES (?, ?)",
                    [(qid, seal([*s, gen])) for qid, s in (roots or {}).items()],
                )
                con.executemany(
                    "INSERT OR REPLACE INTO meta VALUES (?, ?)",
                    [
                        ("gen", str(gen).encode()),
                        *([("rdep_n", str(n_edges).encode())] if n_edges is not None else []),
                        *((k, seal(v)) for k, v in (settings or {}).items()),
                    ],
                )
                con.execute("COMMIT")
                self.base_gen = gen
            except BaseException:
                con.execute("ROLLBACK")
                raise
        except (sqlite3.Error, ValueError, Damaged) as e:
            self._failed(e, "index")

    # ------------------------------------------------------------------ values

    def stage_blob(self, fp: str, blob: bytes) -> None:
        """Remember a value to write at the next :meth:`save`."""
        if self.disabled is None:
            self._pending[fp] = blob

    def load_value(self, fp: str) -> Any:
        """The value whose fingerprint is ``fp``, or ``_MISSING`` (with a warning if corrupt)."""
        pending = self._pending.get(fp)
        if pending is not None:
            return unpack(pending)
        blobs = self._values()
        if blobs is None:
            return _MISSING
        try:
            blob = blobs.get(fp, default=None)
        except VALUE_STORE_ERRORS as e:
            self._failed(e, "blobs")
            return _MISSING
        except CodecError as e:
            self._warn(f"cache entry {fp[:12]} unreadable ({e}); recomputing")
            self._discard(fp)
            return _MISSING
        if blob is None:
            return _MISSING
        if not isinstance(blob, bytes) or digest(blob) != fp:
            self._warn(f"cache entry {fp[:12]} is corrupt (checksum mismatch); recomputing")
            self._discard(fp)
            return _MISSING
        try:
            return unpack(blob)
        except CodecError as e:
            self._warn(f"cache entry {fp[:12]} does not decode ({e}); recomputing")
            self._discard(fp)
            return _MISSING

    def _discard(self, fp: str) -> None:
        try:
            if self._blobs is not None:
                self._blobs.delete(fp)
        except VALUE_STORE_ERRORS:
            pass


def _admin() -> Any:
    from kinac.rules import cache_admin

    return cache_admin


Store.stats = lambda self: _admin().stats(self)  # type: ignore[attr-defined]
Store.verify = lambda self: _admin().verify(self)  # type: ignore[attr-defined]
Store.gc = lambda self, keep_generations=KEEP_GENERATIONS: _admin().gc(self, keep_generations)  # type: ignore[attr-defined]
Store.clear = lambda self: _admin().clear(self)  # type: ignore[attr-defined]
