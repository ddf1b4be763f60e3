"""Low-level safety of the cache files: no pickle, checksummed records, damage classification.

Split from :mod:`kinac.rules.store` so the store reads as policy (what to keep, when to
quarantine) and this as mechanism.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import diskcache

from kinac.rules.codec import CodecError, digest


class SafeDisk(diskcache.Disk):  # type: ignore[misc]
    """A diskcache ``Disk`` that stores only ``str`` keys and ``bytes`` values: never pickle."""

    def put(self, key: Any) -> tuple[Any, bool]:
        if type(key) is not str:
            raise TypeError("kinac cache keys are str")
        return key, True

    def get(self, key: Any, raw: bool) -> Any:
        if not raw:
            raise CodecError("pickled key in cache")
        return key

    def store(self, value: Any, read: bool, key: Any = diskcache.core.UNKNOWN) -> Any:
        if type(value) is not bytes:
            raise TypeError("kinac cache values are bytes")
        return super().store(value, read, key)

    def fetch(self, mode: int, filename: Any, value: Any, read: bool) -> Any:
        if mode not in (diskcache.core.MODE_RAW, diskcache.core.MODE_BINARY):
            raise CodecError("cache entry is not raw bytes")
        return super().fetch(mode, filename, value, read)


class Damaged(Exception):
    """A cache file is not a usable SQLite database (internal: handled by quarantine)."""


class Foreign(Exception):
    """A file at a cache file's name that another program wrote (a user's own ``index.db``
    in a cache directory shared with other files): never moved aside, changed or deleted."""


_OWN_TABLES = frozenset({"memo", "root", "meta", "rdep"})  # every index format's, and no other


def foreign_table(con: Any) -> str | None:
    """A table (or view) of an SQLite database that no kinac index has, or None."""
    names = {
        str(r[0])
        for r in con.execute("SELECT name FROM sqlite_master WHERE type IN ('table', 'view')")
    }
    other = sorted(names - _OWN_TABLES)
    return other[0] if other else None


def index_is_foreign(path: Path) -> bool:
    """Whether ``path`` is an SQLite database of another program (read-only look)."""
    import sqlite3
    from urllib.parse import quote

    if not path.is_file():
        return False
    try:
        con = sqlite3.connect("file:" + quote(os.fsencode(path.resolve())) + "?mode=ro", uri=True)
        try:
            return foreign_table(con) is not None
        finally:
            con.close()
    except sqlite3.Error:
        return False  # not a database at all: a damaged index, kinac's to replace


def damage_kind(e: BaseException) -> str:
    """``damaged`` (quarantine it), ``unusable`` (cache off: read-only, cannot open) or ``other``."""
    if isinstance(e, Damaged):
        return "damaged"
    code = getattr(e, "sqlite_errorcode", None)
    primary = code & 0xFF if isinstance(code, int) else None
    msg = str(e)
    if primary in (11, 26) or "malformed" in msg or "not a database" in msg:  # CORRUPT, NOTADB
        return "damaged"
    if primary in (3, 8, 14, 23) or isinstance(e, PermissionError) or "readonly" in msg:
        return "unusable"  # PERM, READONLY, CANTOPEN, AUTH
    return "other"


def seal(doc: Any) -> bytes:
    """msgpack behind its own checksum: never pickle, never trusted unchecked."""
    import msgpack

    payload = msgpack.packb(doc, use_bin_type=True)
    return digest(payload).encode() + payload


def unseal(raw: Any) -> Any:
    """Inverse of :func:`seal`; raises :class:`CodecError` on anything damaged or foreign."""
    import msgpack

    if not isinstance(raw, bytes) or len(raw) < 32:
        raise CodecError("record is not sealed bytes")
    check, payload = raw[:32], raw[32:]
    if digest(payload).encode() != check:
        raise CodecError("record fails its checksum")
    try:
        return msgpack.unpackb(payload, raw=False, strict_map_key=True)
    except (ValueError, TypeError, msgpack.ExtraData, msgpack.FormatError, msgpack.StackError) as e:
        raise CodecError(f"record does not decode: {e}") from None


def check_header(path: Path) -> None:
    """Cheap damage checks before SQLite opens a file: a directory in its place, or a file
    shorter than its header says (truncated). Damage elsewhere shows when a page is read."""
    if not path.exists():
        return
    if not path.is_file():
        raise Damaged("not a file")
    with open(path, "rb") as f:
        head = f.read(100)
    if len(head) < 100 or not head.startswith(b"SQLite format 3\x00"):
        return  # empty (SQLite starts it) or foreign (SQLite says "not a database")
    page_size = int.from_bytes(head[16:18], "big")
    page_size = 65536 if page_size == 1 else page_size
    pages = int.from_bytes(head[28:32], "big")
    header_valid = head[24:28] == head[92:96]
    wal = Path(f"{path}-wal")
    if wal.exists() and wal.stat().st_size > 0:
        return  # a live WAL: another process may be checkpointing (page 1 is written first)
    if header_valid and pages and path.stat().st_size < pages * page_size:
        raise Damaged(f"truncated: {path.stat().st_size} bytes of {pages * page_size}")


# What diskcache itself writes in a value store's Settings table. diskcache's Cache() applies
# every stored row: ``sqlite_*`` rows are formatted into PRAGMA statements, ``disk_*`` rows
# become keyword arguments of the Disk, and every row becomes an attribute of the Cache. A
# value store written by another program (a ``JSONDisk``'s ``disk_compress_level``) or edited
# by hand was an internal error (``TypeError``), and its file chose what SQL kinac ran.
_KNOWN_SETTINGS = frozenset(
    {
        *("statistics", "tag_index", "eviction_policy", "size_limit", "cull_limit"),
        *("sqlite_auto_vacuum", "sqlite_cache_size", "sqlite_journal_mode", "sqlite_mmap_size"),
        *("sqlite_synchronous", "disk_min_file_size", "disk_pickle_protocol"),
        *("count", "size", "hits", "misses"),
    }
)


def check_value_settings(path: Path) -> None:
    """:class:`Damaged` (quarantined by the caller) unless the value store's Settings rows are
    the ones diskcache writes, each an integer or a plain word: checked before diskcache opens
    the file and applies them (see ``_KNOWN_SETTINGS``)."""
    import re
    import sqlite3
    from urllib.parse import quote

    if not path.is_file():
        return
    uri = "file:" + quote(os.fsencode(path.resolve())) + "?mode=ro"  # bytes: any name
    try:
        con = sqlite3.connect(uri, uri=True, timeout=30)
    except sqlite3.Error:
        return  # cannot open it read-only: diskcache's own open reports what is wrong
    try:
        rows = con.execute("SELECT key, value FROM Settings").fetchall()
    except sqlite3.OperationalError as e:
        if "no such table" in str(e):
            return  # a fresh or foreign file: diskcache creates the table, or SQLite refuses
        raise
    finally:
        con.close()
    for key, value in rows:
        word = isinstance(value, str) and re.fullmatch(r"[A-Za-z-]{1,40}", value) is not None
        if key not in _KNOWN_SETTINGS or not (type(value) is int or word):
            raise Damaged(
                f"its settings are not a kinac value store's: {str(key)[:40]!r} = {value!r:.40}"
            )
