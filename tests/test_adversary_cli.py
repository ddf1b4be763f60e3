"""Adversarial command lines (bug round 2026-12-02e): the process's own state a user's shell
can leave odd, which the earlier CLI tests did not try."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest


@pytest.mark.parametrize("argv", [["check"], ["build", "."], ["cache", "stats", "."]])
def test_a_deleted_working_directory(tmp_path: Path, argv: list[str]) -> None:
    """``kinac check`` in a shell whose directory was deleted (``rm -rf`` from another
    terminal): ``.`` still stats but resolves nowhere; before, an internal error
    (``FileNotFoundError`` from ``Path.resolve``), now a usage error that says what to do."""
    gone = tmp_path / "gone"
    gone.mkdir()
    (gone / "a.kina").write_text("(module a)\n")
    script = (
        "import os, shutil, sys; os.chdir(sys.argv[1]); shutil.rmtree(sys.argv[1]); "
        "from kinac.server.client import main; sys.exit(main(sys.argv[2:]))"
    )
    out = subprocess.run(
        [sys.executable, "-c", script, str(gone), *argv],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env={
            "KINAC_CACHE_DIR": str(tmp_path / "cache"),
            "KINAC_SERVER": "0",
            "PATH": "/usr/bin:/bin",
        },
        cwd=tmp_path,
    )
    assert out.returncode == 2, out.stderr
    assert "internal error" not in out.stderr
    assert "the current directory was deleted" in out.stderr
    assert not (tmp_path / "cache").exists()
