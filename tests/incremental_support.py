"""What the incremental fuzz tests compare after an edit: the build a session serves against a
clean build of the same files (``tests/test_incremental_fuzz.py``, ``tests/test_adversary_incremental.py``).
"""

from __future__ import annotations

from pathlib import Path

from kinac.diag.render import plain_text
from kinac.rules.codec import encode
from kinac.session import Session


def snapshot(sess: Session) -> tuple[bytes, str]:
    """A build's report (canonical bytes) and its diagnostics as plain text."""
    report = sess.build()
    return encode(report), plain_text(sess.diagnostics(report), sess.resolve, sess.source_of)


def after_edit(
    ws: Path, cache: str, live: Session, changed: list[Path], use_live: bool
) -> tuple[tuple[bytes, str], tuple[bytes, str]]:
    """(got, want) after an edit of ``changed``: got from the live session told of the edit
    (``use_live``) or from a fresh session over the same cache (the live one told afterwards, so
    both paths stay in step); want from a clean build without a cache."""
    if use_live:
        live.invalidate_paths(changed)
        got = snapshot(live)
    else:
        fresh = Session(ws, cache_dir=cache)
        got = snapshot(fresh)
        fresh.close()
        live.invalidate_paths(changed)
    clean = Session(ws, no_cache=True)
    want = snapshot(clean)
    clean.close()
    return got, want
