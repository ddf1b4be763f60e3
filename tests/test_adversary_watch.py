"""Adversarial edits under ``kinac watch`` (bug round 2026-12-02e): what a user's shell or
editor does to a watched workspace that the earlier watch tests did not try. The watcher's
part is :func:`kinac.watch._relevant` (which changed paths wake it) and the session's is
:meth:`kinac.session.Session.invalidate_paths` (which inputs a batch re-reads); both are
tested here with the paths a watcher reports, and the whole loop once with a real watcher."""

from __future__ import annotations

import os
import shutil
import threading
import time
from pathlib import Path

import pytest

from kinac.session import Session
from kinac.watch import _relevant

GOOD = "(module {m})\n(defn {f} [(x : (tensor f32 [4]))] -> (tensor f32 [4]) (add x x))\n"
BAD = "(module {m})\n(defn {f} [(x : (tensor f32 [4]))] -> (tensor f32 [4]) (add x y))\n"


def _errors(sess: Session) -> list[str]:
    """``file:line`` of each error of a build, sorted."""
    report = sess.build(with_artifacts=False)
    return sorted(f.file for f in report.files for d in f.diagnostics if d.is_error)


def _fresh_errors(ws: Path, tmp_path: Path) -> list[str]:
    return _errors(Session(ws, no_cache=True))


def _batch(sess: Session, *paths: Path) -> None:
    """What ``kinac watch`` does with a batch of changed paths that wake it."""
    woke = [p for p in paths if _relevant(sess, p)]
    assert woke, f"the watcher slept through {paths}"
    sess.invalidate_paths(woke)


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    (root / "sub").mkdir(parents=True)
    (root / "a.kina").write_text(GOOD.format(m="a", f="f"))
    (root / "sub" / "b.kina").write_text(BAD.format(m="b", f="g"))
    return root


def test_a_folder_moved_out_and_back_in(ws: Path, tmp_path: Path) -> None:
    """``mv sub elsewhere``, then ``mv elsewhere sub2`` (a folder's rename reports only the
    folder's path, not its files'): before, the watcher ignored both (no ``.kina`` suffix)
    and kept showing ``sub/b.kina``'s error from a file that was gone."""
    sess = Session(ws, cache_dir=str(tmp_path / "cache"))
    assert _errors(sess) == ["sub/b.kina"]
    away = tmp_path / "away"
    os.rename(ws / "sub", away)
    _batch(sess, ws / "sub")
    assert _errors(sess) == [] == _fresh_errors(ws, tmp_path)
    os.rename(away, ws / "sub2")
    _batch(sess, ws / "sub2")
    assert _errors(sess) == ["sub2/b.kina"] == _fresh_errors(ws, tmp_path)
    sess.close()


def test_a_folder_replaced_by_another_of_the_same_name(ws: Path, tmp_path: Path) -> None:
    """``rm -rf sub; mv other sub`` in one batch: the new ``sub/b.kina`` has the old one's
    path but other text, which the session must re-read (not serve the old text)."""
    sess = Session(ws, cache_dir=str(tmp_path / "cache"))
    assert _errors(sess) == ["sub/b.kina"]
    other = tmp_path / "other"
    other.mkdir()
    (other / "b.kina").write_text(GOOD.format(m="b", f="g"))
    shutil.rmtree(ws / "sub")
    os.rename(other, ws / "sub")
    _batch(sess, ws / "sub")
    assert _errors(sess) == [] == _fresh_errors(ws, tmp_path)
    sess.close()


def test_hidden_and_cache_folders_do_not_wake_the_watcher(ws: Path, tmp_path: Path) -> None:
    """The folder rule above is not a false alarm: a new ``.git`` or ``__pycache__`` folder,
    or a folder that held no source, is no reason to rebuild."""
    sess = Session(ws, cache_dir=str(tmp_path / "cache"))
    _errors(sess)
    for name in (".git", "__pycache__", "node_modules"):
        (ws / name).mkdir()
        assert not _relevant(sess, ws / name)
    assert not _relevant(sess, ws / "gone-folder")  # deleted, and no source was under it
    sess.close()


def test_sources_read_through_symlinks(ws: Path, tmp_path: Path) -> None:
    """A source that is a symlink: to another source (editing the target changes both) and
    to a file outside the workspace (``ln -sfn`` points it elsewhere). Before, the watcher
    re-read neither link: it showed the old target's errors after the link was re-pointed,
    and missed the error a linked copy of an edited file gained."""
    ext = tmp_path / "ext"
    ext.mkdir()
    (ext / "e1.kina").write_text(BAD.format(m="e", f="h"))
    (ext / "e2.kina").write_text(GOOD.format(m="e", f="h"))
    (ws / "e.kina").symlink_to(ext / "e1.kina")
    (ws / "c.kina").symlink_to("a.kina")
    sess = Session(ws, cache_dir=str(tmp_path / "cache"))
    assert _errors(sess) == ["e.kina", "sub/b.kina"]
    tmp_link = ws / "e.kina.tmp"  # ln -sfn: a new link renamed over the old one
    tmp_link.symlink_to(ext / "e2.kina")
    os.replace(tmp_link, ws / "e.kina")
    _batch(sess, ws / "e.kina")
    assert _errors(sess) == ["sub/b.kina"] == _fresh_errors(ws, tmp_path)
    (ws / "a.kina").write_text(BAD.format(m="a", f="f"))
    _batch(sess, ws / "a.kina")
    assert _errors(sess) == ["a.kina", "c.kina", "sub/b.kina"] == _fresh_errors(ws, tmp_path)
    # a save that changed nothing re-reads the links and re-runs no query
    sess.db.events.clear()
    _batch(sess, ws / "sub" / "b.kina")
    _errors(sess)
    assert sess.db.events.executed_events == []
    # a folder's move re-reads every input, and re-runs only what reads the file list: the
    # list, and each remaining file's index (whose imports resolve against it), cut off
    os.rename(ws / "sub", tmp_path / "away")
    _batch(sess, ws / "sub")
    _errors(sess)
    ran = sorted((e.query, str(e.key), e.cutoff) for e in sess.db.events.executed_events)
    assert ran == [
        ("file_index", "a.kina", True),
        ("file_index", "c.kina", True),
        ("file_index", "e.kina", True),
        ("source_files", "()", False),
    ]
    sess.close()


def test_watch_sees_a_folder_moved_out(
    ws: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The whole loop with the real watcher: the folder's move redraws "no errors"."""
    from kinac.watch import watch

    sess = Session(ws, cache_dir=str(tmp_path / "cache"))
    stop = threading.Event()
    t = threading.Thread(target=watch, args=(sess, stop), daemon=True)
    t.start()
    out = ""

    def until(text: str) -> None:
        nonlocal out
        deadline = time.time() + 30
        while time.time() < deadline:
            out += capsys.readouterr().out
            if text in out:
                return
            time.sleep(0.05)
        raise AssertionError(f"watch never printed {text!r}: {out!r}")

    until("1 error")
    time.sleep(0.3)
    os.rename(ws / "sub", tmp_path / "away")
    until("no errors")
    stop.set()
    t.join(timeout=10)
    assert not t.is_alive()


TOML = '[workspace]\nname = "w"\n\n[[entry]]\nname = "e"\ndefn = "f"\ndims = {{ N = {n} }}\n'


def test_a_kina_toml_created_or_deleted_while_watching(tmp_path: Path) -> None:
    """A folder watched without ``kina.toml`` gains one (``kinac init``, a checkout): before,
    the watcher read it as a source and never as the configuration, so an entry with a bad
    dim was no error until the watch restarted. Deleting it again reads the folder as one
    without (before: "kina.toml: cannot read it: No such file or directory" on every save,
    which no fresh build says)."""
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "a.kina").write_text(GOOD.format(m="a", f="f"))
    sess = Session(ws, cache_dir=str(tmp_path / "cache"))
    assert _errors(sess) == [] and sess.config_errors() == []
    (ws / "kina.toml").write_text(TOML.format(n=-4))
    _batch(sess, ws / "kina.toml")
    fresh = Session(ws, no_cache=True)
    assert sess.config_errors() == fresh.config_errors() != []
    (ws / "kina.toml").unlink()
    _batch(sess, ws / "kina.toml")
    assert sess.config_errors() == [] == Session(ws, no_cache=True).config_errors()
    assert _errors(sess) == []
    sess.close()
