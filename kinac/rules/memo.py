"""What the engine knows about one query, and what it records while one runs.

Split from :mod:`kinac.rules.engine` (the algorithm) so the engine reads as verification and
execution: these are its plain records (a memo, the frame of a running query), its one
internal error, and the lock its public methods hold (one database, several threads).
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Concatenate, ParamSpec, Protocol, TypeVar

from kinac.rules.query import MISSING as _MISSING

__all__ = ["CycleError", "Memo"]


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
    volatile: bool = False  # never stored, re-run each revision (see Database.volatile)


@dataclass(slots=True)
class Frame:
    qid: str
    deps: list[tuple[str, str]] = field(default_factory=list)
    volatile: bool = False


class _Held(Protocol):
    _lock: threading.RLock


S = TypeVar("S", bound=_Held)
P = ParamSpec("P")
R = TypeVar("R")


def locked(fn: Callable[Concatenate[S, P], R]) -> Callable[Concatenate[S, P], R]:
    """Run a public method of the engine's ``Database`` under its re-entrant lock."""

    @functools.wraps(fn)
    def held(self: S, /, *args: P.args, **kwargs: P.kwargs) -> R:
        with self._lock:
            return fn(self, *args, **kwargs)

    return held


def restage(memos: dict[str, Memo], store: Any) -> None:
    """Everything a session holds, to be written again: its store's index was replaced
    under it (:meth:`~kinac.rules.cache_files.CacheFiles.replaced`). Each memo of a stored
    query becomes dirty, its value (if this process holds it) staged; a value it does not
    hold is recomputed by whichever process needs it."""
    from kinac.rules.codec import pack
    from kinac.rules.query import lookup

    for memo in memos.values():
        q = lookup(memo.name)
        if q is None or memo.volatile or (not q.is_input and not q.persist):
            continue
        memo.dirty = True
        if memo.value is not _MISSING and not q.by_trace and not q.is_input:
            store.stage_blob(memo.fp, pack(memo.value))
