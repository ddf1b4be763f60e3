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
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kinac.rules.codec import CodecError, decode, encode
from kinac.rules.query import _REGISTRY, lookup

if TYPE_CHECKING:
    from kinac.rules.engine import Database, Memo

Inputs = dict[str, tuple[str, bytes, str]]  # input qid -> (query name, key json, fingerprint)


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
    for qid in targets(db):
        memo = db._memos.get(qid)
        if memo is None or memo.verified_rev != db.rev or qid in db._by_summary:
            continue
        if db._cone_rev == db.rev and qid in db._trusted and not memo.dirty:
            if qid not in db._roots:
                continue  # cone mode does not read it; keep the row (a walk replaces it)
            inputs: Inputs | None = dict(db._cone_inputs)  # its stored trace: within the root's
        else:
            inputs = _inputs_below(db, memo)
        if inputs is not None:
            out[qid] = ((memo.name, memo.key_json, memo.fp, memo.deps), inputs)
            db._by_summary[qid] = inputs
    return out


def _inputs_below(db: Database, memo: Memo) -> Inputs | None:
    inputs: Inputs = {}
    seen: set[str] = set()
    stack = [memo]
    cone_mode, merged = db._cone_rev == db.rev, False
    while stack:
        m = stack.pop()
        for dep_qid, _fp in m.deps:
            if dep_qid in seen:
                continue
            seen.add(dep_qid)
            inp = db._inputs.get(dep_qid)
            if inp is not None:
                inputs[dep_qid] = (inp[0].name, encode(inp[1]), inp[3])
                continue
            known = db._by_summary.get(dep_qid)
            if known is not None:
                inputs.update(known)
                continue
            if cone_mode and dep_qid in db._trusted and dep_qid not in db._cone:
                if not merged:  # unchanged by the edit: its inputs are among the root's
                    inputs.update(db._cone_inputs)
                    merged = True
                continue
            dm = db._memos.get(dep_qid)
            if dm is None:
                return None  # part of the trace is not loaded: keep the older summary
            stack.append(dm)
    return inputs


def _enter_cone(db: Database, root: str, changed: list[str], inputs: Inputs) -> None:
    """Cone mode: a root's summary failed on ``changed`` inputs only, nothing was committed
    since it was written, and nothing since this process last read or wrote the index (so the
    memos it holds in memory are the stored ones), so the traces reachable from the root are
    exactly the ones it summarised. Every memo reachable from it that is outside the cone of ``changed`` (memos
    that transitively read one, from the index's reverse edges) is unchanged: the walk skips
    it without loading it. Only the cone's records are read (one query)."""
    assert db.store is not None
    if any(not q.persist and not q.is_input for q in _REGISTRY.values()):
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
    changed: list[str] = []
    current: Inputs = {}
    for in_qid, (in_name, in_key, in_fp) in inputs.items():
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
    q = lookup(name)
    if q is not None:
        db.events.reused(q, None, qid)
    return memo
