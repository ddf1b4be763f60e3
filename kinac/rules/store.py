"""The on-disk cache: dependency traces and content-addressed values, on diskcache.

Layout, under the cache directory:

* ``meta/``: one entry, the *graph*: every memo's query name, key, fingerprint and trace,
  written as checksummed canonical JSON. Loading it is one read, so a no-op build in a fresh
  process verifies thousands of memos without touching the value store.
* ``blobs/``: values keyed by their fingerprint, which is also their checksum. Size-limited,
  least-recently-stored eviction; an evicted value is simply recomputed.

Safety: a :class:`SafeDisk` refuses to store or load anything pickled, so a cache file can
never run code. Every read is checked: a truncated, bit-flipped or foreign entry, or a cache
deleted under our feet, is dropped with a warning and the memo is recomputed. Writers merge
their new records into the graph inside one SQLite transaction, so two processes (a watch and
a build) sharing a cache stay correct.
"""

from __future__ import annotations

import os
import shutil
import sqlite3
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import diskcache

from kinac.rules.codec import CodecError, digest, unpack
from kinac.rules.query import MISSING as _MISSING

GRAPH_KEY = "graph"
GEN_KEY = "generation"
ROOT_PREFIX = "root:"
MAGIC = b"KINAC-META-2\n"
DEFAULT_SIZE_LIMIT = 2 * 1024**3
KEEP_GENERATIONS = 50


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


def _warn_stderr(msg: str) -> None:
    print(f"kinac: warning: {msg}", file=sys.stderr)


class Store:
    """A persistent cache directory. Open it with :meth:`open`; never raises on bad contents."""

    def __init__(self, directory: Path, size_limit: int = DEFAULT_SIZE_LIMIT,
                 warn: Callable[[str], None] = _warn_stderr) -> None:
        self.directory = Path(directory)
        self.size_limit = size_limit
        self.warn = warn
        self._pending: dict[str, bytes] = {}
        self._meta: diskcache.Cache | None = None
        self._blobs: diskcache.Cache | None = None
        self.warnings: list[str] = []
        self._gen = -1  # generation of the graph as loaded by this process
        self._loaded: dict[str, Any] | None = None

    # ------------------------------------------------------------------ opening

    def _open(self) -> tuple[diskcache.Cache, diskcache.Cache]:
        if self._meta is not None and self._blobs is not None:
            return self._meta, self._blobs
        try:
            self._meta, self._blobs = self._open_caches()
        except (sqlite3.Error, OSError, CodecError, TypeError) as e:
            self._warn(f"cache at {self.directory} is unreadable ({e}); starting it afresh")
            shutil.rmtree(self.directory, ignore_errors=True)
            self._meta, self._blobs = self._open_caches()
        return self._meta, self._blobs

    def _open_caches(self) -> tuple[diskcache.Cache, diskcache.Cache]:
        meta = diskcache.Cache(str(self.directory / "meta"), disk=SafeDisk,
                               eviction_policy="none", size_limit=2**40)
        blobs = diskcache.Cache(str(self.directory / "blobs"), disk=SafeDisk,
                                eviction_policy="least-recently-stored",
                                size_limit=self.size_limit, cull_limit=64)
        return meta, blobs

    def close(self) -> None:
        for c in (self._meta, self._blobs):
            if c is not None:
                c.close()
        self._meta = self._blobs = None

    def _warn(self, msg: str) -> None:
        self.warnings.append(msg)
        self.warn(msg)

    # ------------------------------------------------------------------ the graph

    def _read_graph(self, meta: diskcache.Cache) -> tuple[int, dict[str, Any]]:
        raw = meta.get(GRAPH_KEY, default=None)
        if raw is None:
            return 0, {}
        doc = _unseal(raw)
        gen = int(doc[0])
        records: dict[str, Any] = doc[1]  # qid -> [name, key_json, fp, deps, gen]
        if not isinstance(records, dict):
            raise CodecError("graph entry has the wrong shape")
        return gen, records

    def load_graph(self) -> dict[str, Any]:
        """Every known memo: ``qid -> [name, key_json, fp, deps, gen]``; empty if none or corrupt."""
        try:
            meta, _ = self._open()
            self._gen, records = self._read_graph(meta)
        except (sqlite3.Error, OSError, CodecError, ValueError, KeyError, TypeError) as e:
            self._warn(f"dependency graph in cache is corrupt ({e}); rebuilding from scratch")
            self._gen = -1
            return {}
        self._loaded = records
        return records

    def load_root(self, qid: str) -> Any:
        """A root's summary (see ``Database._root_summaries``), or None."""
        try:
            meta, _ = self._open()
            raw = meta.get(ROOT_PREFIX + qid, default=None)
            if raw is None:
                return None
            record, inputs = _unseal(raw)
            return (tuple(record), {k: tuple(v) for k, v in inputs.items()})
        except (sqlite3.Error, OSError, CodecError, ValueError, KeyError, TypeError) as e:
            self._warn(f"cache summary {qid[:12]} is corrupt ({e}); verifying in full")
            return None

    def save(self, memos: dict[str, Any], roots: dict[str, Any] | None = None) -> None:
        """Write pending blobs, then merge ``memos`` (qid -> Memo) into the graph atomically."""
        try:
            meta, blobs = self._open()
            if self._pending:
                with blobs.transact():
                    for fp, blob in self._pending.items():
                        blobs.set(fp, blob)
                self._pending.clear()
            with meta.transact():
                gen = self._current_gen(meta)
                if self._loaded is not None and gen == self._gen:
                    records = self._loaded  # nobody wrote since we read it: no need to re-read
                else:
                    try:
                        gen, records = self._read_graph(meta)
                    except (CodecError, ValueError, KeyError, TypeError) as e:
                        self._warn(f"dependency graph in cache is corrupt ({e}); replacing it")
                        gen, records = 0, {}
                gen += 1
                for qid, m in memos.items():
                    records[qid] = [m.name, m.key_json, m.fp, m.deps, gen]
                meta.set(GRAPH_KEY, _seal([gen, records]))
                meta.set(GEN_KEY, str(gen).encode())
                for qid, summary in (roots or {}).items():
                    meta.set(ROOT_PREFIX + qid, _seal(summary))
                self._gen, self._loaded = gen, records
        except (sqlite3.Error, OSError) as e:
            self._warn(f"could not write the cache at {self.directory} ({e}); results not saved")

    def _current_gen(self, meta: diskcache.Cache) -> int:
        raw = meta.get(GEN_KEY, default=None)
        try:
            return int(raw) if isinstance(raw, bytes) else 0
        except ValueError:
            return -2

    # ------------------------------------------------------------------ values

    def stage_blob(self, fp: str, blob: bytes) -> None:
        """Remember a value to write at the next :meth:`save`."""
        self._pending[fp] = blob

    def load_value(self, fp: str) -> Any:
        """The value whose fingerprint is ``fp``, or ``_MISSING`` (with a warning if corrupt)."""
        pending = self._pending.get(fp)
        if pending is not None:
            return unpack(pending)
        try:
            _, blobs = self._open()
            blob = blobs.get(fp, default=None)
        except (sqlite3.Error, OSError, CodecError) as e:
            self._warn(f"cache entry {fp[:12]} unreadable ({e}); recomputing")
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
            _, blobs = self._open()
            blobs.delete(fp)
        except (sqlite3.Error, OSError):
            pass

    # ------------------------------------------------------------------ maintenance

    def stats(self) -> dict[str, Any]:
        """Counts and sizes, for ``kinac cache stats``."""
        meta, blobs = self._open()
        gen, records = self._read_graph(meta)
        by_query: dict[str, int] = {}
        for name, *_ in records.values():
            by_query[name] = by_query.get(name, 0) + 1
        return {
            "directory": str(self.directory),
            "generation": gen,
            "memos": len(records),
            "values": len(blobs),
            "value_bytes": blobs.volume(),
            "graph_bytes": meta.volume(),
            "size_limit": self.size_limit,
            "memos_by_query": dict(sorted(by_query.items())),
        }

    def verify(self) -> dict[str, int]:
        """Check every stored value against its checksum; drop the bad ones."""
        _, blobs = self._open()
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
                self._discard(fp)
        return {"ok": ok, "dropped": bad}

    def gc(self, keep_generations: int = KEEP_GENERATIONS) -> dict[str, int]:
        """Forget memos unused for ``keep_generations`` builds and values nothing refers to."""
        meta, blobs = self._open()
        with meta.transact():
            gen, records = self._read_graph(meta)
            kept = {q: r for q, r in records.items() if r[4] >= gen - keep_generations}
            meta.set(GRAPH_KEY, _seal([gen, kept]))
            self._loaded = None
        live = {r[2] for r in kept.values()}
        dropped_values = 0
        for fp in list(blobs.iterkeys()):
            if fp not in live:
                blobs.delete(fp)
                dropped_values += 1
        blobs.cull()
        return {"memos_dropped": len(records) - len(kept), "values_dropped": dropped_values}

    def clear(self) -> None:
        """Delete everything in the cache directory."""
        self.close()
        shutil.rmtree(self.directory, ignore_errors=True)
        os.makedirs(self.directory, exist_ok=True)


def _seal(doc: Any) -> bytes:
    """msgpack with a magic header and a checksum: never pickle, never trusted unchecked."""
    import msgpack

    payload = msgpack.packb(doc, use_bin_type=True)
    return MAGIC + digest(payload).encode() + payload


def _unseal(raw: Any) -> Any:
    import msgpack

    if not isinstance(raw, bytes) or not raw.startswith(MAGIC):
        raise CodecError("entry has a foreign header")
    body = raw[len(MAGIC):]
    check, payload = body[:32], body[32:]
    if digest(payload).encode() != check:
        raise CodecError("entry fails its checksum")
    try:
        return msgpack.unpackb(payload, raw=False, strict_map_key=True)
    except (ValueError, TypeError, msgpack.ExtraData, msgpack.FormatError, msgpack.StackError) as e:
        raise CodecError(f"entry does not decode: {e}") from None
