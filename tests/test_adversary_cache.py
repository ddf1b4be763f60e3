"""Adversarial use of the cache's maintenance commands (bug round 2026-12-02e)."""

from __future__ import annotations

from pathlib import Path

from kinac.rules import cache_admin
from kinac.session import Session

GOOD = "(module {m})\n(defn {f} [(x : (tensor f32 [4]))] -> (tensor f32 [4]) (add x x))\n"


def _build(ws: Path, cache: Path) -> tuple[int, int]:
    """(queries run, queries reused) of one build in a fresh session."""
    sess = Session(ws, cache_dir=str(cache))
    sess.build()
    ev = sess.db.events
    sess.close()
    return len(ev.executed_events), len(ev.reused_events)


def test_gc_keeps_what_every_build_reuses(tmp_path: Path) -> None:
    """``kinac cache gc`` forgets memos "unused for 50 builds", but it measured when a memo
    was last *written*: a file no edit touched is reused by every build and never rewritten,
    so after 50 edits of another file gc dropped nearly the whole cache (124 of 136 memos of
    the transformer workspace) and the next build was a cold one. Here with 2 generations:
    the untouched file's memos survive, the next build runs nothing; what no build reads any
    more (a deleted file's) is still dropped."""
    ws, cache = tmp_path / "ws", tmp_path / "cache"
    ws.mkdir()
    (ws / "a.kina").write_text(GOOD.format(m="a", f="f"))
    (ws / "b.kina").write_text(GOOD.format(m="b", f="g"))
    (ws / "gone.kina").write_text(GOOD.format(m="gone", f="h"))
    _build(ws, cache)
    (ws / "gone.kina").unlink()
    for i in range(5):  # five edits of a.kina: b.kina's memos keep their first generation
        (ws / "a.kina").write_text(GOOD.format(m="a", f="f") + f"; edit {i}\n")
        _build(ws, cache)
    sess = Session(ws, cache_dir=str(cache))
    assert sess.store is not None
    dropped = cache_admin.gc(sess.store, keep_generations=2)
    sess.close()
    assert dropped["memos_dropped"] > 0  # gone.kina's
    ran, reused = _build(ws, cache)
    assert ran == 0 and reused > 0
    # and what it dropped was dead: an edit of b.kina re-runs only b.kina's queries
    (ws / "b.kina").write_text(GOOD.format(m="b", f="g") + "; edit\n")
    sess = Session(ws, cache_dir=str(cache))
    sess.build()
    files = {str(e.key) for e in sess.db.events.executed_events if e.query == "source_text"}
    sess.close()
    assert files <= {"b.kina"}
