"""What a new user and an adversarial tester hit on the paths added since issue 15 (watch, the
build server, the workspace options, run/launch flags): each case failed before its fix.

Every case is in-process and small (well under 2 s): bad input must end as a ``kinac: error:``
line or a diagnostic with a K-code, never an internal error or silence.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from types import SimpleNamespace

import pytest

ROOT = Path(__file__).resolve().parent.parent
MLP = ROOT / "workspaces" / "mlp"


def kinac_here(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    """``kinac ARGS`` in this process: exit code, stdout, stderr (no traceback, no ICE)."""
    from kinac.cli import main

    capsys.readouterr()
    try:
        code = main(list(args))
    except SystemExit as e:  # argparse's usage errors
        code = e.code if isinstance(e.code, int) else 2
    out = capsys.readouterr()
    assert "Traceback" not in out.out + out.err, out.err
    assert "internal error" not in out.out + out.err, out.err
    return code, out.out, out.err


def mlp_copy(dst: Path, toml_extra: str = "", toml: str | None = None) -> Path:
    """The MLP workspace at ``dst`` (no cache), its kina.toml replaced or extended."""
    shutil.copytree(MLP, dst, ignore=shutil.ignore_patterns(".kinac-cache"))
    cfg = dst / "kina.toml"
    cfg.write_text((toml if toml is not None else cfg.read_text()) + toml_extra)
    return dst


# ---------------------------------------------------------------- kinac watch


def test_watch_sees_edits_of_a_workspace_under_a_hidden_directory(tmp_path: Path) -> None:
    """``kinac watch ~/.work/ws`` ignored every save: the filter skipped any path with a
    hidden directory among its last components, the workspace's own ancestors included."""
    from kinac.watch import _relevant

    root = tmp_path / ".hidden" / "ws"
    sess = SimpleNamespace(
        ws=SimpleNamespace(root=root, config_path=root / "kina.toml"),
        cache_dir=root / ".kinac-cache",
    )
    assert _relevant(sess, root / "mlp.kina")
    assert _relevant(sess, root / "kina.toml")
    assert _relevant(sess, root / "models" / "a.kina")
    # inside the workspace, hidden folders, __pycache__ and the cache are still not sources
    assert not _relevant(sess, root / ".git" / "a.kina")
    assert not _relevant(sess, root / "sub" / ".backup" / "a.kina")
    assert not _relevant(sess, root / "__pycache__" / "a.kina")
    assert not _relevant(sess, root / ".kinac-cache" / "x.kina")
    assert not _relevant(sess, root / "notes.txt")
