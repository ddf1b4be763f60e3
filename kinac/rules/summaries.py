"""Summaries: verify a memo from the inputs it transitively read, without walking its trace.

Why: a fresh process must otherwise load and walk the whole dependency graph to verify a build
after a one-file edit (4,400 memos and 50,000 edges in the 100-file benchmark). A *summary* of a
memo is its record plus every input it transitively read, with the fingerprints seen. If those
inputs still have those fingerprints, the memo's value is unchanged (queries are pure), so it is
green at once, and nothing below it is loaded.

Summaries are kept for each *root* (a memo requested from outside any query, such as ``build``)
and for each derived memo a root reads directly (``file_report`` of every file, each entry): a
no-op build checks one summary; a one-file edit fails the root's summary and the summaries of
the files that read the edited one, and walks only those traces. A summary is rewritten only
when its memo was re-verified through its trace; a summary built above a memo that was itself
verified by summary reuses that summary's inputs instead of descending.

A summary also names the code it depends on: one entry ``code:NAME`` per query with a memo
below it, with that query's code fingerprint (its salt: code identity, tool versions). Inputs
alone cannot say that ``kinac/check/specialise.py`` was edited since (the memos below keep
their old ids), and a no-op build once printed the old result after such an edit.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kinac.rules.codec import CodecError, decode, encode
from kinac.rules.query import REGISTRY, lookup

if TYPE_CHECKING:
    from kinac.rules.engine import Database, Memo

Inputs = dict[str, tuple[str, bytes, str]]  # input qid -> (query name, key json, fingerprint)
CODE_PREFIX = "code:"  # an entry "code:NAME" -> (NAME, b"", the query's code_fp): see below


def targets(db: Database) -> set[str]:
    """Roots and the derived memos they read directly."""
    out = set(db._roots)
    for root in db._roots:
        memo = db._memos.get(root)
        if memo is not None:
            out.update(q for q, _ in memo.deps if q not in db._inputs and q not in db._input_defs)
    return out


def collect(db: Database) -> dict[str, Any]:
    """Summaries to write: for each target verified now, unless verified by its own summary."""
    out: dict[str, Any] = {}
    walk = _InputSets(db)
    for qid in targets(db):
        memo = db._memos.get(qid)
        if memo is None or memo.volatile or memo.verified_rev != db.rev or qid in db._by_summary:
            continue
        if db._cone_rev == db.rev and qid in db._trusted and not memo.dirty:
            if qid not in db._roots:
                continue  # cone mode does not read it; keep the row (a walk replaces it)
            inputs: Inputs | None = dict(db._cone_inputs)  # its stored trace: within the root's
        else:
            inputs = walk.inputs_of(qid, memo)
        if inputs is not None:
            out[qid] = ((memo.name, memo.key_json, memo.fp, memo.deps), inputs)
            db._by_summary[qid] = inputs
    return out


class _InputSets:
    """The inputs below each memo, computed once per memo for all targets of a commit.

    Why: targets share most of their subgraphs (every defn's check reads its file's recursion
    analysis, which reads every defn), so a separate walk per target was quadratic (24 s for a
    1,500-defn file). Here each memo's input set is the union of its dependencies' sets, built
    bottom-up once. Sets are interned and unions memoised by identity, so the many memos whose
    dependencies all read the same inputs share one set and cost O(1) per edge."""

    def __init__(self, db: Database) -> None:
        self.db = db
        self.cone_mode = db._cone_rev == db.rev
        self.sets: dict[str, frozenset[str] | None] = {}  # memo qid -> its inputs (None: unknown)
        self.info: dict[str, tuple[str, bytes, str]] = {}  # input qid -> (name, key json, fp)
        self.interned: dict[frozenset[str], frozenset[str]] = {}
        self.unions: dict[tuple[int, int], frozenset[str]] = {}
        self.cone_set: frozenset[str] | None = None

    def inputs_of(self, qid: str, memo: Memo) -> Inputs | None:
        found = self._set_of(qid, memo)
        if found is None:
            return None
        return {q: self.info[q] for q in sorted(found)}

    def _code_of(self, name: str) -> frozenset[str] | None:
        """The set holding a memo's own code entry (None: its query is gone, so unknown)."""
        code = CODE_PREFIX + name
        if code not in self.info:
            q = lookup(name)
            if q is None:
                return None
            self.info[code] = (name, b"", q.code_fp())
        return self._intern(frozenset((code,)))

    def _intern(self, s: frozenset[str]) -> frozenset[str]:
        return self.interned.setdefault(s, s)

    def _union(self, a: frozenset[str], b: frozenset[str]) -> frozenset[str]:
        key = (id(a), id(b))
        out = self.unions.get(key)
        if out is None:
            out = a if b <= a else b if a <= b else self._intern(a | b)
            self.unions[key] = out
        return out

    def _leaf(self, dep_qid: str) -> frozenset[str] | None | bool:
        """The set of a dependency known without descending, or False to descend into it."""
        db = self.db
        inp = db._inputs.get(dep_qid)
        if inp is not None:
            self.info.setdefault(dep_qid, (inp[0].name, encode(inp[1]), inp[3]))
            return self._intern(frozenset((dep_qid,)))
        known = db._by_summary.get(dep_qid)
        if known is not None:
            for q, entry in known.items():
                self.info.setdefault(q, entry)
            return self._intern(frozenset(known))
        if self.cone_mode and dep_qid in db._trusted and dep_qid not in db._cone:
            if self.cone_set is None:  # unchanged by the edit: its inputs are among the root's
                for q, entry in db._cone_inputs.items():
                    self.info.setdefault(q, entry)
                self.cone_set = self._intern(frozenset(db._cone_inputs))
            return self.cone_set
        return False

    def _set_of(self, qid: str, memo: Memo) -> frozenset[str] | None:
        """Post-order and iterative (a chain of calls is as deep as the program). A frame
        resumes at the dependency it descended into, which is then finished and in ``sets``."""
        sets, db = self.sets, self.db
        if qid in sets:
            return sets[qid]
        stack: list[tuple[str, Memo, int, frozenset[str] | None]] = [
            (qid, memo, 0, self._code_of(memo.name))
        ]
        while stack:
            cur, m, i, acc = stack.pop()
            deps = m.deps
            while acc is not None and i < len(deps):
                dep_qid = deps[i][0]
                if dep_qid in sets:
                    got = sets[dep_qid]
                else:
                    leaf = self._leaf(dep_qid)
                    if leaf is False:
                        dm = db._memos.get(dep_qid)
                        if dm is not None:
                            sets[dep_qid] = None  # in progress: a guard (the graph is acyclic)
                            stack.append((cur, m, i, acc))
                            stack.append((dep_qid, dm, 0, self._code_of(dm.name)))
                            break
                        leaf = None  # part of the trace is not loaded: keep the older summary
                    got = sets[dep_qid] = leaf  # type: ignore[assignment]
                i += 1
                if got is None:
                    acc = None
                elif got is not acc:
                    acc = self._union(acc, got)
            else:
                sets[cur] = acc
                continue
            if acc is None:
                sets[cur] = None
        return sets[qid]


def _enter_cone(db: Database, root: str, changed: list[str], inputs: Inputs) -> None:
    """Cone mode: a root's summary failed on ``changed`` inputs only, nothing was committed
    since it was written, and nothing since this process last read or wrote the index (so the
    memos it holds in memory are the stored ones), so the traces reachable from the root are
    exactly the ones it summarised. Every memo reachable from it that is outside the cone of ``changed`` (memos
    that transitively read one, from the index's reverse edges) is unchanged: the walk skips
    it without loading it. Only the cone's records are read (one query)."""
    assert db.store is not None
    if any(not q.persist and not q.is_input for q in REGISTRY.values()):
        return  # unstored memos have no reverse edges: the cone could miss them
    cone = db.store.load_cone(changed)
    if cone is None:
        return
    db._cone = cone
    db._cone_rev = db.rev
    db._cone_inputs = inputs
    db._trusted = {root}


def verify(db: Database, qid: str, root: bool = False) -> Memo | None:
    """The memo, marked verified, if its stored summary still holds; else None (walk its trace).

    For a ``root`` whose summary fails only because some inputs changed, cone mode starts."""
    from kinac.rules.engine import Memo

    if db._summary_tried.get(qid) == db.rev:
        return None
    db._summary_tried[qid] = db.rev
    if db._summary_rows is None:
        db._summary_rows = db.store.load_summaries() if db.store is not None else {}
    raw = db._summary_rows.get(qid)
    if raw is None or db.store is None:
        return None
    summary = db.store.decode_summary(qid, raw)
    if summary is None:
        return None
    (name, key_json, fp, deps), inputs, gen = summary
    target_q = lookup(name)
    if (
        target_q is None
        or target_q.qid_of_json(key_json) != qid
        or CODE_PREFIX + name not in inputs
    ):
        return None  # older code computed it (or an older kinac wrote it without code entries)
    changed: list[str] = []
    current: Inputs = {}
    for in_qid, (in_name, in_key, in_fp) in inputs.items():
        if in_qid.startswith(CODE_PREFIX):
            code_q = lookup(in_name)
            if code_q is None or code_q.code_fp() != in_fp:
                return None  # the code changed: walk the trace (no cone: no edges name code)
            current[in_qid] = (in_name, in_key, in_fp)
            continue
        inp = db._inputs.get(in_qid)
        if inp is None:
            q = lookup(in_name)
            if q is None or not q.is_input:
                return None
            try:
                key = decode(in_key)
            except CodecError:
                return None
            now = db._input_fp(in_qid, q, key)
        else:
            now = inp[3]
        if now != in_fp:
            if not root:
                return None
            changed.append(in_qid)  # a root reads all: the changed ones seed the cone
        current[in_qid] = (in_name, in_key, now)
    if changed:
        if gen == db.store.current_gen() == db.store.base_gen:  # see _enter_cone
            _enter_cone(db, qid, changed, current)
        return None
    memo = db._memos.get(qid)
    if memo is None or memo.fp != fp:
        memo = Memo(name, key_json, fp, deps)
        db._memos[qid] = memo
    memo.verified_rev = db.rev
    db._by_summary[qid] = inputs
    db.events.reused(target_q, None, qid)
    return memo
