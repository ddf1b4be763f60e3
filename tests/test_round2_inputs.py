"""Round 2 of the new-user and random-program findings: command-line and workspace inputs
that were accepted, or reported twice, where a user expects one clear error."""

from __future__ import annotations

from pathlib import Path

import pytest

from kinac.cli import main

IDENTITY = "(defn f [(x : (tensor f32 [N]))] -> (tensor f32 [N]) x)\n"


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    rc = main(list(argv))
    got = capsys.readouterr()
    return rc, got.out + got.err


def test_unreadable_source_says_cannot_read_once(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A source that vanished (a dangling link) said "cannot read `gone.kina`: cannot read it:
    ..." (3225622 removed the same repetition for kina.toml)."""
    (tmp_path / "a.kina").write_text(IDENTITY)
    (tmp_path / "gone.kina").symlink_to(tmp_path / "nowhere.kina")
    rc, text = _run(capsys, "check", str(tmp_path), "--no-cache")
    assert rc == 1
    (line,) = [x for x in text.splitlines() if "K0153" in x]
    assert line == "error[K0153]: cannot read `gone.kina`: No such file or directory", line
