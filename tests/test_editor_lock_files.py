"""An editor's lock or backup file named like a source (Emacs's ``.#a.kina``, a dangling symlink
to ``user@host.pid:time``) is not a source: it failed the build with K0153 (cannot read it), and
``kinac watch`` rebuilt on each. Hidden files are skipped as hidden folders are."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from kinac.pipeline_support import list_sources
from kinac.session import Session
from kinac.watch import _relevant

GOOD = "(module a)\n(defn f [(x : (tensor f32 [4]))] -> (tensor f32 [4]) (add x x))\n"


def _ws(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    (root / "sub").mkdir(parents=True)
    (root / "a.kina").write_text(GOOD)
    os.symlink("user@host.1234:1733130000", root / ".#a.kina")  # what Emacs leaves: dangling
    os.symlink("user@host.1234:1733130000", root / "sub" / ".#b.kina")
    (root / "sub" / ".hidden.kina").write_text("(this is not Kina")
    return root


def test_hidden_files_are_not_sources(tmp_path: Path) -> None:
    assert list_sources(_ws(tmp_path)) == ("a.kina",)


def test_kinac_check_passes_beside_an_emacs_lock_file(tmp_path: Path) -> None:
    ws = _ws(tmp_path)
    got = subprocess.run(
        [sys.executable, "-m", "kinac", "check", str(ws), "--no-cache"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert got.returncode == 0, got.stdout + got.stderr
    assert "K0153" not in got.stdout + got.stderr


def test_the_lock_file_does_not_wake_the_watcher(tmp_path: Path) -> None:
    ws = _ws(tmp_path)
    sess = Session(ws, cache_dir=str(tmp_path / "cache"))
    try:
        sess.build(with_artifacts=False)
        assert not _relevant(sess, ws / ".#a.kina")
        assert not _relevant(sess, ws / "sub" / ".#b.kina")
        assert _relevant(sess, ws / "a.kina")
    finally:
        sess.close()
