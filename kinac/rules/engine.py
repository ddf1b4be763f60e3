"""The incremental engine: memoised queries, dependency traces, early cutoff, persistence.

The algorithm is Salsa's "red-green" verification, made persistent like rustc's incremental
cache:

* Executing a query records, in call order, every query it read and the fingerprint it saw.
* To reuse a memo, the engine checks each recorded dependency in order: an input is re-read,
  a derived dependency is itself verified (recursively) or re-executed. If every fingerprint
  still matches, the memo is green: reused without running, and without even loading its value
  unless somebody needs it.
* If a re-executed query returns a value with the same fingerprint as before, its dependents
  still see an unchanged fingerprint: invalidation stops there (early cutoff).

Within one process (``kinac watch``) each memo is verified at most once per revision; a file
change bumps the revision. Across processes, traces and values come from a :class:`Store`.
"""

from __future__ import annotations

import threading
import time
import weakref
from collections.abc import Iterable
from typing import Any, TypeVar

from kinac.rules import summaries
from kinac.rules.codec import CodecError, decode, digest, encode, fingerprint, pack
from kinac.rules.events import EventLog
from kinac.rules.memo import CycleError, Frame, Memo, locked, restage
from kinac.rules.query import MISSING as _MISSING
from kinac.rules.query import Query, lookup

LAZY_LOADS = 256  # memo records fetched one by one before the whole graph is read at once
K = TypeVar("K")
V = TypeVar("V")


class Database:
    """A query database. ``store`` (optional) makes it persistent across processes.

    ``context`` holds explicit, non-query configuration that input queries may read (the
    workspace root, for instance); it never enters a key.

    One database may be used from several threads (``kinac.compile``'s first calls from a
    thread pool share one): each public method holds the database's re-entrant lock, so the
    threads' queries run one at a time and a value computed by one is reused by the others.
    The running queries' stack is the database's, not a thread's: before the lock, a second
    thread saw the first one's running query as a cycle, and a commit met a changing table.
    """

    def __init__(self, store: Any | None = None, context: dict[str, Any] | None = None) -> None:
        self.store = store
        self.context: dict[str, Any] = dict(context or {})
        self.rev = 0
        self.events = EventLog()
        self._memos: dict[str, Memo] = {}
        # qid -> (query, key, value, fingerprint) of each input read in this revision
        self._inputs: dict[str, tuple[Query[Any, Any], Any, Any, str]] = {}
        self._stack: list[Frame] = []
        self._active: set[str] = set()
        self._snapshot: dict[str, Any] | None = None
        self._input_defs: dict[str, tuple[Query[Any, Any], Any]] = {}  # survives invalidation
        self._roots: set[str] = set()  # memos requested from outside any query
        self._summary_rows: dict[str, bytes] | None = None  # stored summaries (see summaries.py)
        self._summary_tried: dict[str, int] = {}  # qid -> revision its summary was tried
        self._by_summary: dict[str, Any] = {}  # qid -> inputs, for memos verified by summary
        self._lazy_loads = 0
        self._cone: dict[str, bytes | None] = {}  # cone mode (summaries.py), for _cone_rev
        self._cone_rev = -1
        self._cone_inputs: dict[str, Any] = {}
        self._trusted: set[str] = set()  # reached from the root through stored traces
        self._code_seeded = store is None
        # Values known by fingerprint before the store is asked (:meth:`adopt_values`).
        self._known_values: dict[str, Any] = {}
        self._lock = threading.RLock()

    # ------------------------------------------------------------------ public API

    def get(self, q: Query[K, V], key: K) -> V:
        """The value of ``q`` at ``key``, reusing or recomputing as needed."""
        with self._lock:
            return self._get(q, key)

    def _get(self, q: Query[K, V], key: K) -> V:
        if not self._code_seeded:
            self._seed_code()
        qid = q.qid(key)
        if q.is_input:
            fp = self._input_fp(qid, q, key)
            value = self._inputs[qid][2]
        else:
            if not self._stack:
                self._roots.add(qid)
                if self.store is not None:
                    summaries.verify(self, qid, root=True)
            memo = self._ensure(qid, q, key)
            fp = memo.fp
            value = self._value_of(qid, q, key, memo)
            if memo.volatile and self._stack:
                self._stack[-1].volatile = True
        if self._stack:
            self._stack[-1].deps.append((qid, fp))
        return value  # type: ignore[no-any-return]

    def volatile(self) -> None:
        """Mark the running query's value as depending on something outside its inputs (the
        solver's wall-clock safety net fired): it and every query that reads it are kept for
        this revision only, never written to the store nor summarised."""
        if self._stack:
            self._stack[-1].volatile = True

    @locked
    def invalidate(self, inputs: Iterable[tuple[Query[Any, Any], Any]] | None = None) -> None:
        """Tell the engine the world changed: these inputs (or all, with ``None``) must be re-read.

        Starts a new revision; memos are re-verified lazily on the next ``get``.
        """
        if inputs is None:
            self._inputs.clear()
        else:
            for q, key in inputs:
                self._inputs.pop(q.qid(key), None)
        self.rev += 1
        self._by_summary.clear()

    @locked
    def commit(self) -> None:
        """Write what this process computed to the store (no-op without one)."""
        if self.store is None:
            return
        from kinac.rules.codeid import CODE

        replaced = getattr(self.store, "replaced", None)  # (a test's store may lack it)
        if replaced is not None and replaced():  # the cache was deleted under this session
            restage(self._memos, self.store)
        dirty = {qid: m for qid, m in self._memos.items() if m.dirty}
        settings: dict[str, Any] = {}
        if CODE.ids_changed:  # saved even by a build that ran nothing, or every process redoes it
            settings["code_ids"] = CODE.export_ids()
        if CODE.files_changed:
            settings["code_files"] = CODE.export_files()
        if not dirty and not settings:
            return
        if dirty:  # inputs too (rewritten, so gc keeps them): a trace names them by qid
            for qid, (q, key, _, fp) in self._inputs.items():
                dirty.setdefault(qid, Memo(q.name, encode(key), fp, []))
        self.store.save(dirty, summaries.collect(self), settings)
        self._summary_rows = None  # re-read on the next revision: they were just rewritten
        CODE.ids_changed = CODE.files_changed = False
        for m in dirty.values():
            m.dirty = False

    @locked
    def adopt_values(self, other: Database) -> int:
        """Take the values ``other`` computed, by fingerprint, as values this database would
        otherwise load from its store: a memo whose fingerprint is one of them gets that object
        (same fingerprint, same value: the fingerprint is the digest of its encoding, or of a
        trace that determines it), neither read nor decoded, and shares its parts with
        ``other``'s values by identity. ``kinac serve`` adopts the values of the build it makes
        at start without the cache (kinac.server.warm.warm_workspace). How many were taken."""
        for m in other._memos.values():
            if m.value is not _MISSING and not m.volatile:
                self._known_values.setdefault(m.fp, m.value)
        return len(self._known_values)

    @locked
    def close(self) -> None:
        """Release the store's files (a later ``get`` or ``commit`` opens them again); callers
        that run in-process (the CLI's ``main``, ``kinac.compile``) close after each build."""
        if self.store is not None:
            self.store.close()

    def __enter__(self) -> Database:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _seed_code(self) -> None:
        """Adopt the store's code-identity table before any memo id is computed: the installed
        kinac is then verified by a few stat calls, once per process (see codeid)."""
        from kinac.rules.codeid import CODE

        self._code_seeded = True
        store = self.store
        if store is not None:
            ref = weakref.ref(store)  # CODE is process-wide: it must not keep the store open

            def files() -> Any:
                live = ref()
                return live.load_setting("code_files") if live is not None else None

            CODE.seed(store.load_setting("code_ids"), files)

    # ------------------------------------------------------------------ verification

    def _input_fp(self, qid: str, q: Query[Any, Any], key: Any) -> str:
        entry = self._inputs.get(qid)
        if entry is None:
            value = q.fn(self, key)
            entry = (q, key, value, fingerprint(value))
            self._inputs[qid] = entry
            self._input_defs[qid] = (q, key)
            # Inputs are recorded too (at commit, without their value), so a new process knows
            # how to re-read each dependency named in a trace.
        return entry[3]

    def _ensure(self, qid: str, q: Query[Any, Any], key: Any) -> Memo:
        memo = self._memos.get(qid)
        if memo is None:
            memo = self._load(qid)
        if memo is not None and memo.volatile and memo.verified_rev != self.rev:
            return self._execute(qid, q, key, memo)
        if memo is not None and memo.verified_rev != self.rev and self._cone_green(qid):
            memo.verified_rev = self.rev
            self.events.reused(q, key, qid)
            return memo
        if memo is not None and (
            memo.verified_rev == self.rev or self._still_green(qid, q, key, memo)
        ):
            return memo
        return self._execute(qid, q, key, memo)

    def _still_green(self, qid: str, q: Query[Any, Any], key: Any, memo: Memo) -> bool:
        """Verify a memo against its trace; on success it is marked verified for this revision,
        else the dependency that changed is recorded for ``--why``."""
        if memo.volatile:
            return False
        if qid in self._active:
            raise CycleError(f"query cycle through {q.name}")
        self._active.add(qid)
        try:
            changed = self._first_changed_dep(memo, qid)
        finally:
            self._active.discard(qid)
        if changed is None:
            memo.verified_rev = self.rev
            self.events.reused(q, key, qid)
            return True
        self.events.why[qid] = changed
        return False

    def _cone_green(self, qid: str) -> bool:
        """In cone mode: reached from the root through stored traces, and outside the cone."""
        return self._cone_rev == self.rev and qid in self._trusted and qid not in self._cone

    def _first_changed_dep(self, memo: Memo, qid: str) -> str | None:
        deps = memo.deps
        if self._cone_rev == self.rev and qid in self._trusted and not memo.dirty:
            cone, trusted = self._cone, self._trusted  # a stored trace of a trusted memo
            for dep_qid, _ in deps:
                trusted.add(dep_qid)
            for dep_qid, dep_fp in deps:
                if dep_qid in cone and self._current_fp(dep_qid) != dep_fp:
                    return dep_qid
            return None
        for dep_qid, dep_fp in deps:
            if self._current_fp(dep_qid) != dep_fp:
                return dep_qid
        return None

    def _current_fp(self, dep_qid: str) -> str | None:
        """The dependency's fingerprint now: verified (or re-run) without decoding its key
        unless it has to run. This is the hot loop of a no-op build."""
        inp = self._inputs.get(dep_qid)
        if inp is not None:
            return inp[3]
        known = self._input_defs.get(dep_qid)
        if known is not None:
            return self._input_fp(dep_qid, known[0], known[1])
        memo = self._memos.get(dep_qid)
        if memo is not None and memo.verified_rev == self.rev:
            return memo.fp
        if self.store is not None:
            by_summary = summaries.verify(self, dep_qid)
            if by_summary is not None:
                return by_summary.fp
        memo = memo or self._load(dep_qid)
        if memo is None:
            return None  # a forgotten memo: its dependent must re-run
        if memo.verified_rev == self.rev:
            return memo.fp
        q = lookup(memo.name)
        if q is None:
            return None
        if not q.is_input and q.qid_of_json(memo.key_json) != dep_qid:
            return None  # computed by older code: its dependent re-runs, calling the new id
        if not q.is_input and self._still_green(dep_qid, q, None, memo):
            return memo.fp
        try:
            key = decode(memo.key_json)
        except CodecError:
            return None
        if q.is_input:
            return self._input_fp(dep_qid, q, key)
        return self._execute(dep_qid, q, key, memo).fp

    def _execute(
        self, qid: str, q: Query[Any, Any], key: Any, old: Memo | None, missing: bool = False
    ) -> Memo:
        """Run ``q`` at ``key``; ``missing``: ``old``'s value is not in the store (recomputed
        to be stored again)."""
        if qid in self._active:
            raise CycleError(f"query cycle through {q.name}")
        self._active.add(qid)
        frame = Frame(qid)
        self._stack.append(frame)
        t0 = time.perf_counter()
        try:
            value = q.fn(self, key)
        finally:
            self._stack.pop()
            self._active.discard(qid)
        persist = q.persist and not frame.volatile
        if q.by_trace:  # the fingerprint of what it read: nothing encoded (query(by_trace=))
            fp = digest("\0".join(["trace", qid, *(f"{d} {f}" for d, f in frame.deps)]).encode())
        else:
            blob = pack(value)
            fp = digest(blob)
            # a value equal to the one it replaces (early cutoff) is stored already: writing
            # it again rewrote its file (a firewall's signature, 76 KB, on every L=32 edit)
            if self.store is not None and persist and (missing or not _stored(old, fp)):
                self.store.stage_blob(fp, blob)
        memo = Memo(q.name, encode(key), fp, frame.deps, value, self.rev, persist, frame.volatile)
        self._memos[qid] = memo
        cutoff = old is not None and old.fp == fp
        self.events.executed(q, key, qid, time.perf_counter() - t0, new=old is None, cutoff=cutoff)
        return memo

    # ------------------------------------------------------------------ persistence

    def _load(self, qid: str) -> Memo | None:
        if self.store is None:
            return None
        if self._cone_rev == self.rev and qid in self._cone:
            raw = self._cone[qid]
        elif self._snapshot is None and self._lazy_loads < LAZY_LOADS:
            self._lazy_loads += 1  # a small edit touches a few memos: fetch them one by one
            raw = self.store.load_record(qid)
        else:
            if self._snapshot is None:
                self._snapshot = self.store.load_graph()
            raw = self._snapshot.get(qid)
        if raw is None:
            return None
        rec = self.store.decode_record(qid, raw)
        if rec is None:
            if self._snapshot is not None:
                del self._snapshot[qid]
            return None
        memo = Memo(*rec)
        self._memos[qid] = memo
        return memo

    def _value_of(self, qid: str, q: Query[Any, Any], key: Any, memo: Memo) -> Any:
        if memo.value is not _MISSING:
            return memo.value
        value = self._known_values.get(memo.fp, _MISSING)
        if value is _MISSING and self.store is not None:
            value = self.store.load_value(memo.fp)
        if value is _MISSING:
            # Evicted, corrupt or deleted (or never stored: by_trace): recompute. A deterministic
            # query gives the same fp.
            self._memos.pop(qid, None)
            self.events.why[qid] = "value not stored" if q.by_trace else "value missing from cache"
            memo = self._execute(qid, q, key, memo, missing=True)
            return memo.value
        memo.value = value
        return value

    # ------------------------------------------------------------------ introspection

    def describe(self, qid: str) -> str:
        """``name(key)`` of a memo or input, for ``--why`` chains."""
        inp = self._inputs.get(qid)
        if inp is not None:
            return f"{inp[0].name}({_short(inp[1])})"
        memo = self._memos.get(qid)
        if memo is None and self._snapshot is not None and qid in self._snapshot:
            memo = self._load(qid)
        if memo is None:
            return qid[:12]
        try:
            return f"{memo.name}({_short(decode(memo.key_json))})"
        except CodecError:
            return memo.name


def _stored(old: Memo | None, fp: str) -> bool:
    """Whether the previous memo's value, stored with its record (or staged for this commit),
    is the value of fingerprint ``fp``. Not a volatile memo's: it was never stored."""
    return old is not None and old.fp == fp and not old.volatile


def _short(key: Any) -> str:
    text = key if isinstance(key, str) else repr(key)
    return text if len(text) <= 80 else text[:77] + "..."
