"""Query definitions: what a stage registers with the engine.

A query is a pure function ``(db, key) -> value`` with a name, a code version, and the tools
whose versions are part of its identity; the source it runs is found from the import graph
(:mod:`kinac.rules.codeid`), not listed. Input queries are
the only ones allowed to read the world (files, directory listings); the engine re-reads them
when told that the world changed.

The identity of a memo (``qid``) covers the query name, its version, the hash of its code, the
versions of kinac and of its tools, and the canonical key: an upgrade of any of them can never
serve a stale artifact, and no absolute path ever enters a key.
"""

from __future__ import annotations

import hashlib
import os
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any, Generic, TypeVar

from kinac.rules.codec import CODEC_VERSION, digest, encode

K = TypeVar("K")
V = TypeVar("V")

REGISTRY: dict[str, Query[Any, Any]] = {}
MISSING: Any = object()  # "no value": distinct from every legitimate value, None included
_KINAC_DIR = Path(__file__).resolve().parent.parent


@cache
def tool_version(dist: str) -> str:
    """Installed version of a distribution (``z3-solver``), or ``none``; read once per process."""
    if dist == "kinac":
        from kinac import __version__

        return __version__
    found = _dist_info_version(dist)
    if found is not None:
        return found
    from importlib import metadata  # ~20 ms to import: only for what the fast path misses

    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return "none"


def _normal(name: str) -> str:
    return re.sub(r"[-_.]+", "_", name).lower()


def _dist_info_version(dist: str) -> str | None:
    """The version in the name of the first ``NAME-VERSION.dist-info`` on ``sys.path`` (the
    layout every installer writes), as :func:`importlib.metadata.version` finds it, without
    importing that module: a no-op build checks the salts (tool versions included) of every
    query in its summary (summaries.py), and the import alone was most of a no-op's time."""
    want = _normal(dist)
    for entry in sys.path:
        try:
            names = os.listdir(entry or ".")
        except OSError:
            continue
        for n in names:
            if n.endswith(".dist-info"):
                name, sep, version = n[: -len(".dist-info")].partition("-")
                if sep and _normal(name) == want:
                    return version
            elif n.endswith(".egg-info") and _normal(n.partition("-")[0]) == want:
                return None  # a legacy layout: let importlib.metadata read it
    return None


@cache
def code_hash(package: str) -> str:
    """Hash of the sources of ``kinac/<package>`` (a package dir or a module file), read lazily.

    Part of a query's identity, so editing a stage's code invalidates that stage's memos even
    without a version bump.
    """
    h = hashlib.blake2b(digest_size=16)
    base = _KINAC_DIR / package
    files = sorted(base.rglob("*.py")) if base.is_dir() else [base.with_suffix(".py")]
    for f in files:
        if f.exists():
            h.update(f.relative_to(_KINAC_DIR).as_posix().encode())
            h.update(f.read_bytes())
    return h.hexdigest()


def code_identity(q: Query[Any, Any]) -> str:
    """Hash of every kinac source running ``q`` may execute, read from the import graph
    (:mod:`kinac.rules.codeid`); other queries it calls are its dependencies, not its code."""
    from kinac.rules.codeid import CODE

    skip = [(r.fn.__module__, r.fn.__name__) for r in REGISTRY.values()]
    return CODE.identity(q.fn.__module__, q.fn.__name__, skip)


@dataclass(eq=False)
class Query(Generic[K, V]):
    """A registered query. Use :func:`query` or :func:`input_query` to make one."""

    name: str
    fn: Callable[[Any, K], V]
    version: int = 1
    stage: str = "derived"
    tools: tuple[str, ...] = ()
    code: tuple[str, ...] = ()  # extra packages (data files, say); the import graph needs none
    is_input: bool = False
    persist: bool = True
    by_trace: bool = False  # fingerprint from its trace, value not stored (see query())
    _salt: str | None = field(default=None, repr=False)
    _code_fp: tuple[str, str] | None = field(default=None, repr=False)  # (salt, its digest)

    def salt(self) -> str:
        """Everything but the key that goes into a memo's identity (computed once)."""
        if self._salt is None:
            parts = [
                self.name,
                str(self.version),
                "kinac=" + tool_version("kinac"),
                f"codec={CODEC_VERSION}",
                *(f"{t}={tool_version(t)}" for t in self.tools),
                "code=" + code_identity(self),
                *(f"{c}:{code_hash(c)}" for c in self.code),
            ]
            self._salt = "|".join(parts)
        return self._salt

    def qid(self, key: K) -> str:
        """The memo id of this query at ``key``."""
        return self.qid_of_json(encode(key))

    def qid_of_json(self, key_json: bytes) -> str:
        """The memo id at an encoded key. A stored memo whose id differs was computed by other
        code (its id holds the salt of its time): it must not be reused."""
        return digest(self.salt().encode() + b"\x00" + key_json)

    def code_fp(self) -> str:
        """Fingerprint of this query's code (its salt), recorded in summaries (summaries.py)."""
        salt = self.salt()
        if self._code_fp is None or self._code_fp[0] is not salt:
            self._code_fp = (salt, digest(salt.encode()))
        return self._code_fp[1]

    def __call__(self, db: Any, key: K) -> V:
        return db.get(self, key)


def _register(q: Query[Any, Any]) -> None:
    prev = REGISTRY.get(q.name)
    if prev is not None and prev.fn.__qualname__ != q.fn.__qualname__:
        raise ValueError(f"query name {q.name!r} registered twice")
    REGISTRY[q.name] = q


def query(
    name: str,
    *,
    version: int = 1,
    stage: str = "derived",
    tools: tuple[str, ...] = (),
    code: tuple[str, ...] = (),
    persist: bool = True,
    by_trace: bool = False,
) -> Callable[[Callable[[Any, K], V]], Query[K, V]]:
    """Register a derived query: a pure function of the queries it calls through ``db``.

    ``by_trace``: the value's fingerprint is a digest of the memo's id and the fingerprints it
    read (its trace), not of the value's encoding, and the value is not written to the store
    (a process that needs it and finds it absent recomputes it: the same trace gives the same
    fingerprint). For a big value that changes whenever its inputs do, so that early cutoff
    on it would almost never fire (a file's parse: its spans move with any edit) while
    encoding it costs most of what computing it does (a 32-layer model's parse: ~300 KB of
    JSON per edit). Its readers must be the firewalls that cut off instead."""

    def wrap(fn: Callable[[Any, K], V]) -> Query[K, V]:
        q: Query[K, V] = Query(name, fn, version, stage, tools, code, False, persist, by_trace)
        _register(q)
        return q

    return wrap


def input_query(
    name: str, *, stage: str = "input"
) -> Callable[[Callable[[Any, K], V]], Query[K, V]]:
    """Register an input query: the only kind that may read files or the environment."""

    def wrap(fn: Callable[[Any, K], V]) -> Query[K, V]:
        q: Query[K, V] = Query(name, fn, 1, stage, (), (), True, False)
        _register(q)
        return q

    return wrap


def lookup(name: str) -> Query[Any, Any] | None:
    """The registered query called ``name`` (used to re-run a dependency named in the cache)."""
    return REGISTRY.get(name)
