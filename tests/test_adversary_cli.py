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


def test_paths_that_are_not_utf8(tmp_path: Path) -> None:
    """A cache directory or workspace whose name is not UTF-8 (a Latin-1 ``é`` from an old
    archive): before, the command's first step, looking for a build server's socket, died
    with a bare ``UnicodeEncodeError`` traceback (the socket's name hashed the path's text),
    whatever the command; a build without a server worked. Now the build runs, and the next
    one reuses it."""
    import os

    base = os.fsencode(tmp_path)
    ws = base + b"/ws\xe9"
    os.mkdir(ws)
    with open(ws + b"/a.kina", "w") as f:
        f.write("(module a)\n(defn f [(x : f32)] -> f32 (add x x))\n")
    env = {b"KINAC_CACHE_DIR": base + b"/cache\xe9", b"PATH": b"/usr/bin:/bin"}
    runs = [
        subprocess.run(
            [sys.executable.encode(), b"-m", b"kinac", b"build", ws],
            capture_output=True,
            timeout=120,
            check=False,
            env=env,
        )
        for _ in range(2)
    ]
    for out in runs:
        assert out.returncode == 0, out.stderr
        assert (
            b"Traceback" not in out.stderr and b"built 1 file, 0 artifacts: no errors" in out.stderr
        )
    assert b"(0 queries run" in runs[1].stderr, runs[1].stderr  # the cache serves it
    assert os.path.isdir(base + b"/cache\xe9")


def test_a_source_whose_name_is_not_utf8(tmp_path: Path) -> None:
    """``n\\xffame.kina`` beside a good file: before, an internal error (the file list, a
    value of the build, did not encode); now its diagnostics name it, escaped."""
    import os

    ws = os.fsencode(tmp_path) + b"/ws"
    os.mkdir(ws)
    with open(ws + b"/a.kina", "w") as f:
        f.write("(module a)\n(defn f [(x : f32)] -> f32 (add x x))\n")
    with open(ws + b"/n\xffame.kina", "w") as f:
        f.write("(module n)\n(defn g [(x : f32)] -> f32 (add x q))\n")
    out = subprocess.run(
        [sys.executable, "-m", "kinac", "check", os.fsdecode(ws)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env={"KINAC_CACHE_DIR": str(tmp_path / "cache"), "PATH": "/usr/bin:/bin"},
    )
    assert out.returncode == 1, out.stderr
    assert "internal error" not in out.stderr
    assert "--> n\\u{dcff}ame.kina:2:" in out.stdout and "unknown name `q`" in out.stdout


@pytest.mark.parametrize("server", ["0", ""])
def test_a_cache_directory_that_is_a_symlink_loop(tmp_path: Path, server: str) -> None:
    """``KINAC_CACHE_DIR`` (or ``--cache-dir``, or ``cache_dir`` in kina.toml) naming a symlink
    loop: before, a bare ``RuntimeError: Symlink loop`` traceback from the client looking for
    a server (or an internal error without one); now the build runs without a cache, with
    the store's one warning."""
    import os

    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "a.kina").write_text("(module a)\n(defn f [(x : f32)] -> f32 (add x x))\n")
    os.symlink(tmp_path / "loop2", tmp_path / "loop1")
    os.symlink(tmp_path / "loop1", tmp_path / "loop2")
    env = {"PATH": "/usr/bin:/bin", "KINAC_SERVER": server}
    for extra in (
        {"KINAC_CACHE_DIR": str(tmp_path / "loop1")},
        {"KINAC_CACHE_DIR": str(tmp_path / "loop1" / "sub")},
    ):
        out = subprocess.run(
            [sys.executable, "-m", "kinac", "check", str(ws)],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
            env={**env, **extra},
        )
        assert out.returncode == 0, out.stderr
        assert "Traceback" not in out.stderr and "internal error" not in out.stderr
        assert "building without a cache" in out.stderr and "no errors" in out.stderr
