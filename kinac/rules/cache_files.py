"""The cache's two files kept usable: opened lazily, damage quarantined, closed on demand.

Why a module of its own: :mod:`kinac.rules.store` says *what* the cache holds (memo rows,
summaries, settings, values); this says how its files are kept healthy, whatever they hold.
Damage never stops a build and is reported once. A damaged SQLite file (malformed, truncated,
zeros, random bytes, a directory where the file should be) is *quarantined*: renamed aside to
``<name>.corrupt-<UTC time>`` so nothing is lost, with one warning naming it, and a fresh one
takes its place. A cache that cannot be used at all (its directory is a file, or read-only)
turns caching off for the process, again with one warning. Connections are opened on first
use and released by :meth:`CacheFiles.close` (the next use opens them again).
"""

from __future__ import annotations

import os
import shutil
import sqlite3
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Self

import diskcache

from kinac.rules.disk import (
    Damaged,
    Foreign,
    SafeDisk,
    check_header,
    check_value_settings,
    damage_kind,
    foreign_table,
)

# 5: the index keeps the count of its reverse edges (meta ``rdep_n``), checked before an edit
# trusts them (see Store.load_cone); a format-4 index has none, so it starts afresh.
FORMAT = b"5"
INDEX = "index.db"
BLOBS = "blobs"
DEFAULT_SIZE_LIMIT = 2 * 1024**3
# Values up to this size live in the value store's SQLite rows, not in files of their own:
# an L=32 edit stores five values of 50-300 KB, and a file each (two new directories, an
# open, a write, a close) took twice the CPU of the same rows (1.4 vs 2.8 ms per edit's
# values, reading them back 0.2 vs 0.34 ms). Values stored as files before stay readable.
INLINE_VALUES = 4 * 1024**2
# How long a write waits for another process's lock on the value store (diskcache's default)
# before the cache is turned off for this process (diskcache.Timeout, see Store.save).
VALUE_STORE_WAIT_S = 60.0
INDEX_WAIT_S = 30.0  # the same for the index (SQLite's busy timeout)
# What a read or write of the value store raises when it fails (diskcache's Timeout is no
# sqlite3.Error: a lock held past VALUE_STORE_WAIT_S was an internal error).
VALUE_STORE_ERRORS = (sqlite3.Error, OSError, diskcache.Timeout)
ValueStoreTimeout = diskcache.Timeout  # for callers that do not import diskcache themselves
KEEP_GENERATIONS = 50
SCHEMA = (
    "CREATE TABLE IF NOT EXISTS memo(qid TEXT PRIMARY KEY, name TEXT NOT NULL, rec BLOB NOT NULL,"
    " gen INTEGER NOT NULL) WITHOUT ROWID",
    "CREATE TABLE IF NOT EXISTS root(qid TEXT PRIMARY KEY, rec BLOB NOT NULL) WITHOUT ROWID",
    "CREATE TABLE IF NOT EXISTS meta(k TEXT PRIMARY KEY, v BLOB NOT NULL) WITHOUT ROWID",
    "CREATE TABLE IF NOT EXISTS rdep(dep TEXT NOT NULL, qid TEXT NOT NULL, PRIMARY KEY (dep, qid))"
    " WITHOUT ROWID",
)


# SQLite files this process holds a connection to (path -> how many). Reading such a file's
# header with a plain open()/close() would drop every POSIX lock the process holds on it (a
# close of any descriptor does), so another process's writer could race this one's: "database
# disk image is malformed" or "disk I/O error" with two stores on one cache (kinac.api opens one
# per compiled function) beside another process. A file open here was healthy when first opened.
_OPEN: dict[str, int] = {}
_OPEN_LOCK = threading.Lock()


def _opened(path: Path, delta: int) -> None:
    key = os.path.realpath(path)
    with _OPEN_LOCK:
        n = _OPEN.get(key, 0) + delta
        if n > 0:
            _OPEN[key] = n
        else:
            _OPEN.pop(key, None)


def _check_header(path: Path, settings: bool = False) -> None:
    """:func:`check_header` (and for the value store, :func:`check_value_settings`), skipped
    for a file this process already has open (see ``_OPEN``)."""
    with _OPEN_LOCK:
        if os.path.realpath(path) in _OPEN:
            return
    check_header(path)
    if settings:
        check_value_settings(path)


_HEX = frozenset("0123456789abcdef")


def store_folder(path: Path) -> bool:
    """Whether a folder holds only what diskcache writes for kinac (its SQLite file and the
    two-hex-digit folders of values stored as files): one that holds anything else is a
    user's folder in a cache directory shared with other files (``cache_dir = "."``), which
    kinac never deletes nor moves aside."""
    try:
        with os.scandir(path) as entries:
            for e in entries:
                if e.name in ("cache.db", "cache.db-wal", "cache.db-shm", "cache.db-journal"):
                    continue
                if len(e.name) == 2 and set(e.name) <= _HEX and e.is_dir(follow_symlinks=False):
                    continue
                return False
    except OSError:
        return False
    return True


def _warn_stderr(msg: str) -> None:
    print(f"kinac: warning: {msg}", file=sys.stderr)


class CacheFiles:
    """A cache directory's index (SQLite) and value store (diskcache), opened when first used."""

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
        self._ino: tuple[int, int] | None = None  # the open index file's (device, inode)
        self._inst: object = None  # the index's own instance id (meta 'instance')
        self._swapped = False  # reopened another index than the one it had (see replaced)

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
        if old.is_dir() and not path.exists() and store_folder(old):  # not a user's `meta/`
            shutil.rmtree(old, ignore_errors=True)
        for attempt in (0, 1):
            try:
                self._con = _connect(path)
                _opened(path, 1)
                inst = self._con.execute("SELECT v FROM meta WHERE k = 'instance'").fetchone()
                if self._inst is not None and inst != self._inst:  # not the index it had
                    self._swapped, self.base_gen = True, None
                self._ino, self._inst = _identity(path), inst
                if self.base_gen is None:
                    self.base_gen = read_generation(self._con)
                return self._con
            except Foreign as e:
                self._disable(
                    f"cache index {path} is not kinac's ({e}; left as it is); give kinac a "
                    "cache directory of its own"
                )
                return None
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
        if path.is_dir() and not store_folder(path):  # never moved aside, nor written into
            self._disable(
                f"cache directory {self.directory} holds a folder `{BLOBS}` that is not kinac's "
                "value store (left as it is); give kinac a cache directory of its own"
            )
            return None
        for attempt in (0, 1):
            try:
                if path.exists() and not (path / "cache.db").is_file() and any(path.iterdir()):
                    raise Damaged("its index is missing or not a file")
                _check_header(path / "cache.db", settings=True)
                self._blobs = diskcache.Cache(
                    str(path),
                    timeout=VALUE_STORE_WAIT_S,
                    disk=SafeDisk,
                    eviction_policy="least-recently-stored",
                    size_limit=self.size_limit,
                    cull_limit=64,
                    disk_min_file_size=INLINE_VALUES,
                )
                _opened(path / "cache.db", 1)
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
        elif isinstance(e, diskcache.Timeout):  # it says nothing itself
            self._disable(
                f"the value store {self.directory / BLOBS} stayed locked by another process "
                f"for {VALUE_STORE_WAIT_S:g} s"
            )
        else:
            self._disable(f"the cache at {self.directory} failed ({e})")

    def __enter__(self) -> Self:
        """``with Store(...) as s``: ``s`` is typed as the subclass (a :class:`Store`), not as
        :class:`CacheFiles`, so its memo methods type-check."""
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def replaced(self) -> bool:
        """Whether the index this process holds open (or held, and reopened since) is no
        longer the one at its name (the cache directory deleted, ``kinac cache clear``, a
        quarantine by another process); if so, its files are closed and forgotten, so the
        next use opens (or starts) the one there, and the caller writes all it holds: a
        long-lived session (``kinac watch``, a server, ``kinac.compile``) wrote on into a
        file nobody else could see, and every other build was a cold one."""
        if self._con is not None and _identity(self.directory / INDEX) != self._ino:
            self.close()  # the next use opens the one at the name (noted as swapped there)
            self._swapped, self.base_gen = True, None
        swapped, self._swapped = self._swapped, False
        return swapped

    def close(self) -> None:
        """Release the SQLite connections now (not at garbage collection). The store stays
        usable: the next read or write opens them again."""
        if self._con is not None:
            try:
                self._con.close()
            except sqlite3.Error:
                pass
            _opened(self.directory / INDEX, -1)
        if self._blobs is not None:
            try:
                self._blobs.close()
            except (sqlite3.Error, OSError):
                pass
            _opened(self.directory / BLOBS / "cache.db", -1)
        self._con = None
        self._blobs = None


def _identity(path: Path) -> tuple[int, int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_dev, st.st_ino


MAX_GEN = 2**62  # a generation is stored as an SQLite INTEGER (64-bit) in every memo row


def read_generation(con: sqlite3.Connection) -> int:
    """The generation counter; :class:`Damaged` if it is not a count (a hand-edited or damaged
    index: quarantined and started afresh, never an internal error)."""
    row = con.execute("SELECT v FROM meta WHERE k = 'gen'").fetchone()
    return read_count(row[0], "generation counter") if row is not None else 0


def read_count(raw: object, what: str) -> int:
    """A non-negative count stored as decimal text (bytes or str), else :class:`Damaged`."""
    text = raw.decode("ascii", "replace") if isinstance(raw, bytes) else str(raw)
    if len(text) > 19 or not (text.isascii() and text.isdigit()) or int(text) >= MAX_GEN:
        raise Damaged(f"its {what} is {text[:24]!r}, not a count")
    return int(text)


def _connect(path: Path) -> sqlite3.Connection:
    """Open (or create) the index; raises on a file that is not a healthy kinac index."""
    _check_header(path)
    con = sqlite3.connect(
        str(path), timeout=INDEX_WAIT_S, isolation_level=None, check_same_thread=False
    )
    try:
        other = foreign_table(con)  # before anything is written to it (WAL mode included)
        if other is not None:
            raise Foreign(f"an SQLite database of another program, with a table {other!r}")
        con.execute("PRAGMA journal_mode=WAL")
        con.execute("PRAGMA synchronous=NORMAL")
        for stmt in SCHEMA:
            con.execute(stmt)
        row = con.execute("SELECT v FROM meta WHERE k = 'format'").fetchone()
        if row is not None and row[0] != FORMAT:  # an older kinac's index: start it afresh
            for table in ("memo", "root", "meta", "rdep"):
                con.execute(f"DROP TABLE IF EXISTS {table}")
            for stmt in SCHEMA:
                con.execute(stmt)
            row = None
        if row is None:
            con.execute("INSERT OR IGNORE INTO meta VALUES ('format', ?)", (FORMAT,))
        if con.execute("SELECT 1 FROM meta WHERE k = 'instance'").fetchone() is None:
            # which index this is, for CacheFiles.replaced: a file deleted and made again at
            # the same name may get the same inode once no process holds the old one open
            con.execute("INSERT OR IGNORE INTO meta VALUES ('instance', ?)", (os.urandom(8),))
    except BaseException:
        con.close()
        raise
    return con
