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

import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from kinac.rules.codec import CodecError, decode, digest, encode, fingerprint, pack
from kinac.rules.events import EventLog
from kinac.rules.query import MISSING as _MISSING
from kinac.rules.query import Query, lookup

K = TypeVar("K")
V = TypeVar("V")



class CycleError(RuntimeError):
    """A query depends on itself: an internal error (stages must detect cycles themselves)."""


@dataclass(slots=True)
class Memo:
    """What the engine knows about one (query, key)."""

    name: str
    key_json: bytes
    fp: str
    deps: list[tuple[str, str]]
    value: Any = _MISSING
    verified_rev: int = -1
    dirty: bool = False  # executed in this process and not yet written to the store


@dataclass(slots=True)
class _Frame:
    qid: str
    deps: list[tuple[str, str]] = field(default_factory=list)


class Database:
    """A query database. ``store`` (optional) makes it persistent across processes.

    ``context`` holds explicit, non-query configuration that input queries may read (the
    workspace root, for instance); it never enters a key.
    """

    def __init__(self, store: Any | None = None, context: dict[str, Any] | None = None) -> None:
        self.store = store
        self.context: dict[str, Any] = dict(context or {})
        self.rev = 0
        self.events = EventLog()
        self._memos: dict[str, Memo] = {}
        self._inputs: dict[str, tuple[Query[Any, Any], Any, Any, str]] = {}  # qid -> (q, key, value, fp)
        self._stack: list[_Frame] = []
        self._active: set[str] = set()
        self._snapshot: dict[str, Any] | None = None

    # ------------------------------------------------------------------ public API

    def get(self, q: Query[K, V], key: K) -> V:
        """The value of ``q`` at ``key``, reusing or recomputing as needed."""
        qid = q.qid(key)
        if q.is_input:
            fp = self._input_fp(qid, q, key)
            value = self._inputs[qid][2]
        else:
            memo = self._ensure(qid, q, key)
            fp = memo.fp
            value = self._value_of(qid, q, key, memo)
        if self._stack:
            self._stack[-1].deps.append((qid, fp))
        return value  # type: ignore[no-any-return]

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

    def commit(self) -> None:
        """Write what this process computed to the store (no-op without one)."""
        if self.store is None:
            return
        dirty = {qid: m for qid, m in self._memos.items() if m.dirty}
        if not dirty:
            return
        self.store.save(dirty)
        for m in dirty.values():
            m.dirty = False

    # ------------------------------------------------------------------ verification

    def _input_fp(self, qid: str, q: Query[Any, Any], key: Any) -> str:
        entry = self._inputs.get(qid)
        if entry is None:
            value = q.fn(self, key)
            entry = (q, key, value, fingerprint(value))
            self._inputs[qid] = entry
            # Inputs are recorded too (without their value), so a new process knows how to
            # re-read each dependency named in a trace.
            known = self._memos.get(qid) or self._load(qid)
            if known is None or known.fp != entry[3]:
                self._memos[qid] = Memo(q.name, encode(key), entry[3], [], None, self.rev, True)
        return entry[3]

    def _ensure(self, qid: str, q: Query[Any, Any], key: Any) -> Memo:
        memo = self._memos.get(qid)
        if memo is None:
            memo = self._load(qid)
        if memo is not None:
            if memo.verified_rev == self.rev:
                return memo
            if qid in self._active:
                raise CycleError(f"query cycle through {q.name}")
            self._active.add(qid)
            try:
                changed = self._first_changed_dep(memo)
            finally:
                self._active.discard(qid)
            if changed is None:
                memo.verified_rev = self.rev
                self.events.reused(q, key)
                return memo
            self.events.why[qid] = changed
        return self._execute(qid, q, key, memo)

    def _first_changed_dep(self, memo: Memo) -> str | None:
        for dep_qid, dep_fp in memo.deps:
            if self._current_fp(dep_qid) != dep_fp:
                return dep_qid
        return None

    def _current_fp(self, dep_qid: str) -> str | None:
        inp = self._inputs.get(dep_qid)
        if inp is not None:
            return inp[3]
        memo = self._memos.get(dep_qid) or self._load(dep_qid)
        if memo is None:
            return None  # an input not read yet this revision, or a forgotten memo
        q = lookup(memo.name)
        if q is None:
            return None
        try:
            key = decode(memo.key_json)
        except CodecError:
            return None
        if q.is_input:
            return self._input_fp(dep_qid, q, key)
        return self._ensure(dep_qid, q, key).fp

    def _execute(self, qid: str, q: Query[Any, Any], key: Any, old: Memo | None) -> Memo:
        if qid in self._active:
            raise CycleError(f"query cycle through {q.name}")
        self._active.add(qid)
        frame = _Frame(qid)
        self._stack.append(frame)
        t0 = time.perf_counter()
        try:
            value = q.fn(self, key)
        finally:
            self._stack.pop()
            self._active.discard(qid)
        blob = pack(value)
        fp = digest(blob)
        memo = Memo(q.name, encode(key), fp, frame.deps, value, self.rev, dirty=q.persist)
        self._memos[qid] = memo
        if self.store is not None and q.persist:
            self.store.stage_blob(fp, blob)
        cutoff = old is not None and old.fp == fp
        self.events.executed(q, key, qid, time.perf_counter() - t0, new=old is None, cutoff=cutoff)
        return memo

    # ------------------------------------------------------------------ persistence

    def _load(self, qid: str) -> Memo | None:
        if self.store is None:
            return None
        if self._snapshot is None:
            self._snapshot = self.store.load_graph()
        rec = self._snapshot.get(qid)
        if rec is None:
            return None
        name, key_json, fp, deps = rec
        memo = Memo(name, key_json, fp, deps)
        self._memos[qid] = memo
        return memo

    def _value_of(self, qid: str, q: Query[Any, Any], key: Any, memo: Memo) -> Any:
        if memo.value is not _MISSING:
            return memo.value
        value = self.store.load_value(memo.fp) if self.store is not None else _MISSING
        if value is _MISSING:
            # Evicted, corrupt or deleted: recompute. A deterministic query gives the same fp.
            self._memos.pop(qid, None)
            self.events.why[qid] = "value missing from cache"
            memo = self._execute(qid, q, key, memo)
            return memo.value
        memo.value = value
        return value

    # ------------------------------------------------------------------ introspection

    def memo_count(self) -> int:
        return len(self._memos)

    def describe(self, qid: str) -> str:
        """``name(key)`` of a memo or input, for ``--why`` chains."""
        inp = self._inputs.get(qid)
        if inp is not None:
            return f"{inp[0].name}({_short(inp[1])})"
        memo = self._memos.get(qid)
        if memo is None and self._snapshot is not None and qid in self._snapshot:
            rec = self._snapshot[qid]
            memo = Memo(rec[0], rec[1], rec[2], rec[3])
        if memo is None:
            return qid[:12]
        try:
            return f"{memo.name}({_short(decode(memo.key_json))})"
        except CodecError:
            return memo.name


def _short(key: Any) -> str:
    text = key if isinstance(key, str) else repr(key)
    return text if len(text) <= 80 else text[:77] + "..."
