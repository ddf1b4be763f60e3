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

Damage never stops a build and is reported once. Every record carries a checksum; a bad
record or value is dropped and recomputed. A damaged SQLite file (malformed, truncated, zeros,
random bytes, a directory where the file should be) is *quarantined*: renamed aside to
``<name>.corrupt-<UTC time>`` so nothing is lost, with one warning naming it, and a fresh one
takes its place. A cache that cannot be used at all (its directory is a file, or read-only)
turns caching off for the process, again with one warning.
"""

from __future__ import annotations

import os
import shutil
import sqlite3
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import diskcache

from kinac.rules.codec import CodecError, digest, unpack
from kinac.rules.disk import Damaged, SafeDisk, check_header, damage_kind, seal, unseal
from kinac.rules.query import MISSING as _MISSING

__all__ = [
    "BLOBS",
    "INDEX",
    "Damaged",
    "SafeDisk",
    "Store",
    "check_header",
    "damage_kind",
    "seal",
    "unseal",
]

FORMAT = b"4"
INDEX = "index.db"
BLOBS = "blobs"
DEFAULT_SIZE_LIMIT = 2 * 1024**3
KEEP_GENERATIONS = 50
_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS memo(qid TEXT PRIMARY KEY, name TEXT NOT NULL, rec BLOB NOT NULL,"
    " gen INTEGER NOT NULL) WITHOUT ROWID",
    "CREATE TABLE IF NOT EXISTS root(qid TEXT PRIMARY KEY, rec BLOB NOT NULL) WITHOUT ROWID",
    "CREATE TABLE IF NOT EXISTS meta(k TEXT PRIMARY KEY, v BLOB NOT NULL) WITHOUT ROWID",
    "CREATE TABLE IF NOT EXISTS rdep(dep TEXT NOT NULL, qid TEXT NOT NULL, PRIMARY KEY (dep, qid))"
    " WITHOUT ROWID",
)
_CONE = (
    "WITH RECURSIVE cone(q) AS (SELECT value FROM json_each(?)"
    " UNION SELECT rdep.qid FROM rdep JOIN cone ON rdep.dep = cone.q)"
    " SELECT cone.q, memo.rec FROM cone LEFT JOIN memo ON memo.qid = cone.q"
)


def _warn_stderr(msg: str) -> None:
    print(f"kinac: warning: {msg}", file=sys.stderr)


class Store:
    """A persistent cache directory; never raises on bad contents (see the module docstring)."""

    def __init__(
        self,
        directory: Path,
        size_limit: int = DEFAULT_SIZE_LIMIT,
        warn: Callable[[str], None] = _warn_stderr,
    ) -> None:
        self.directory = Path(directory)
        self.size_limit = size_limit
        self.warn = warn
        self.warnings: list[str] = []
        self.quarantined: list[Path] = []
        self.disabled: str | None = None  # why caching is off for this process, if it is
        self._pending: dict[str, bytes] = {}
        self._con: sqlite3.Connection | None = None
        self._blobs: diskcache.Cache | None = None
        self.base_gen: int | None = None  # the generation this process first read

    # ------------------------------------------------------------------ opening and damage

    def _warn(self, msg: str) -> None:
        self.warnings.append(msg)
        self.warn(msg)

    def _disable(self, why: str) -> None:
        if self.disabled is None:
            self.disabled = why
            self._warn(f"{why}; building without a cache")
        self.close()

    def _usable_dir(self) -> bool:
        if self.disabled is not None:
            return False
        d = self.directory
        if d.exists() and not d.is_dir():
            self._disable(f"cache directory {d} is not a directory")
            return False
        try:
            d.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            self._disable(f"cannot create cache directory {d} ({e.strerror or e})")
            return False
        if not os.access(d, os.W_OK | os.X_OK):
            self._disable(f"cache directory {d} is read-only")
            return False
        return True

    def quarantine(self, path: Path, why: object) -> None:
        """Rename a damaged file (or directory) aside, with its SQLite side files; warn once."""
        self.close()
        stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime())
        dest = path.with_name(f"{path.name}.corrupt-{stamp}")
        n = 1
        while dest.exists():
            n += 1
            dest = path.with_name(f"{path.name}.corrupt-{stamp}-{n}")
        try:
            os.replace(path, dest)
            for side in ("-wal", "-shm"):
                if Path(f"{path}{side}").exists():
                    os.replace(f"{path}{side}", f"{dest}{side}")
        except OSError as e:
            self._disable(f"cache file {path} is damaged ({why}) and cannot be moved aside ({e})")
            return
        self.quarantined.append(dest)
        self._warn(
            f"cache file {path} is damaged ({why}); moved it aside to {dest.name} "
            "and started a fresh one"
        )

    def _index(self) -> sqlite3.Connection | None:
        if self._con is not None:
            return self._con
        if not self._usable_dir():
            return None
        path = self.directory / INDEX
        old = self.directory / "meta"  # the graph of cache format 2: replaced by index.db
        if old.is_dir() and not path.exists():
            shutil.rmtree(old, ignore_errors=True)
        for attempt in (0, 1):
            try:
                self._con = _connect(path)
                if self.base_gen is None:
                    self.base_gen = _gen(self._con)
                return self._con
            except (sqlite3.Error, Damaged, OSError) as e:
                kind = damage_kind(e)
                if kind == "damaged" and attempt == 0:
                    self.quarantine(path, e)
                    if self.disabled is None:
                        continue
                    return None
                self._disable(f"cache index {path} is unusable ({e})")
                return None
        return None

    def _values(self) -> diskcache.Cache | None:
        if self._blobs is not None:
            return self._blobs
        if not self._usable_dir():
            return None
        path = self.directory / BLOBS
        for attempt in (0, 1):
            try:
                if path.exists() and not (path / "cache.db").is_file() and any(path.iterdir()):
                    raise Damaged("its index is missing or not a file")
                check_header(path / "cache.db")
                self._blobs = diskcache.Cache(
                    str(path),
                    disk=SafeDisk,
                    eviction_policy="least-recently-stored",
                    size_limit=self.size_limit,
                    cull_limit=64,
                )
                return self._blobs
            except (sqlite3.Error, Damaged, OSError) as e:
                if damage_kind(e) == "damaged" and attempt == 0:
                    self.quarantine(path, e)
                    if self.disabled is None:
                        continue
                    return None
                self._disable(f"value store {path} is unusable ({e})")
                return None
        return None

    def _failed(self, e: BaseException, which: str) -> None:
        """A read or write failed: quarantine what is damaged, else turn the cache off."""
        if damage_kind(e) == "damaged":
            self.quarantine(self.directory / (INDEX if which == "index" else BLOBS), e)
        else:
            self._disable(f"the cache at {self.directory} failed ({e})")

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Release the SQLite connections now (not at garbage collection). The store stays
        usable: the next read or write opens them again."""
        if self._con is not None:
            try:
                self._con.close()
            except sqlite3.Error:
                pass
        if self._blobs is not None:
            try:
                self._blobs.close()
            except (sqlite3.Error, OSError):
                pass
        self._con = None
        self._blobs = None

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
            return dict(con.execute(_CONE, (json.dumps(changed),)).fetchall())
        except sqlite3.Error as e:
            self._failed(e, "index")
            return None

    def current_gen(self) -> int | None:
        con = self._index()
        try:
            return _gen(con) if con is not None else None
        except sqlite3.Error as e:
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
            except (sqlite3.Error, OSError) as e:
                self._failed(e, "blobs")
        self._pending.clear()
        con = self._index()
        if con is None:
            return
        try:
            con.execute("BEGIN IMMEDIATE")
            try:
                gen = _gen(con)
                if gen != self.base_gen:  # another process committed since we read: our
                    roots = None  # summaries may describe traces it replaced, so keep theirs
                gen += 1
                con.executemany(
                    "INSERT OR REPLACE INTO memo VALUES (?, ?, ?, ?)",
                    [
                        (qid, m.name, seal([m.name, m.key_json, m.fp, m.deps]), gen)
                        for qid, m in memos.items()
                    ],
                )
                con.executemany(
                    "INSERT OR IGNORE INTO rdep VALUES (?, ?)",
                    [(d, qid) for qid, m in memos.items() for d, _ in m.deps],
                )
                con.executemany(
                    "INSERT OR REPLACE INTO root VALUES (?, ?)",
                    [(qid, seal([*s, gen])) for qid, s in (roots or {}).items()],
                )
                con.executemany(
                    "INSERT OR REPLACE INTO meta VALUES (?, ?)",
                    [
                        ("gen", str(gen).encode()),
                        *((k, seal(v)) for k, v in (settings or {}).items()),
                    ],
                )
                con.execute("COMMIT")
                self.base_gen = gen
            except BaseException:
                con.execute("ROLLBACK")
                raise
        except (sqlite3.Error, ValueError) as e:
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
        except (sqlite3.Error, OSError) as e:
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
        except (sqlite3.Error, OSError):
            pass


def _gen(con: sqlite3.Connection) -> int:
    row = con.execute("SELECT v FROM meta WHERE k = 'gen'").fetchone()
    return int(row[0]) if row is not None else 0


def _connect(path: Path) -> sqlite3.Connection:
    """Open (or create) the index; raises on a file that is not a healthy kinac index."""
    check_header(path)
    con = sqlite3.connect(str(path), timeout=30, isolation_level=None, check_same_thread=False)
    try:
        con.execute("PRAGMA journal_mode=WAL")
        con.execute("PRAGMA synchronous=NORMAL")
        for stmt in _SCHEMA:
            con.execute(stmt)
        row = con.execute("SELECT v FROM meta WHERE k = 'format'").fetchone()
        if row is not None and row[0] != FORMAT:  # an older kinac's index: start it afresh
            for table in ("memo", "root", "meta", "rdep"):
                con.execute(f"DROP TABLE IF EXISTS {table}")
            for stmt in _SCHEMA:
                con.execute(stmt)
            row = None
        if row is None:
            con.execute("INSERT OR IGNORE INTO meta VALUES ('format', ?)", (FORMAT,))
    except BaseException:
        con.close()
        raise
    return con


def _admin() -> Any:
    from kinac.rules import cache_admin

    return cache_admin


Store.stats = lambda self: _admin().stats(self)  # type: ignore[attr-defined]
Store.verify = lambda self: _admin().verify(self)  # type: ignore[attr-defined]
Store.gc = lambda self, keep_generations=KEEP_GENERATIONS: _admin().gc(self, keep_generations)  # type: ignore[attr-defined]
Store.clear = lambda self: _admin().clear(self)  # type: ignore[attr-defined]
