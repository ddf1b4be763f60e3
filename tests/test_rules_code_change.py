"""An edit to kinac's own code re-runs what that code computed, even when no input changed.

Why: a second ``kinac build`` after editing ``kinac/check/specialise.py`` once said "nothing
re-ran" and printed the old result, because the no-op path compared inputs only. Code identity
is part of every memo id (``Query.salt``), and a fresh process recomputes it from the sources it
runs (cheaply, behind a stamp of their file stats). These tests simulate fresh processes whose
kinac sources are a temporary copy, so no real file is edited.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

import pytest

import kinac.rules.codeid as codeid
from kinac.rules.codeid import KINAC_DIR, CodeIndex
from kinac.rules.query import REGISTRY
from kinac.session import Session

WS = Path(__file__).resolve().parent.parent / "workspaces" / "mlp"
SPECIALISE = Path("check") / "specialise.py"


@pytest.fixture()
def copies(tmp_path: Path) -> tuple[Path, Path]:
    """A copy of the mlp workspace and of kinac's sources (the code the fresh process runs)."""
    ws = tmp_path / "ws"
    shutil.copytree(WS, ws, ignore=shutil.ignore_patterns(".kinac-cache"))
    src = tmp_path / "kinac"
    shutil.copytree(KINAC_DIR, src, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    return ws, src


def fresh_build(monkeypatch: pytest.MonkeyPatch, ws: Path, src: Path) -> set[str]:
    """A build as a new process with kinac's sources at ``src`` would run it: the names of the
    queries it executed."""
    monkeypatch.setattr(codeid, "CODE", CodeIndex(root=src))
    for q in REGISTRY.values():
        monkeypatch.setattr(q, "_salt", None)  # a new process computes every salt again
    sess = Session(ws, cache_dir=str(ws.parent / "cache"))
    try:
        report: Any = sess.build()
    finally:
        sess.close()
    assert report.error_count == 0
    return {e.query for e in sess.db.events.executed_events}


def test_a_code_edit_reruns_its_queries_and_a_noop_reruns_nothing(
    monkeypatch: pytest.MonkeyPatch, copies: tuple[Path, Path]
) -> None:
    ws, src = copies
    assert "entry_graph" in fresh_build(monkeypatch, ws, src)
    assert fresh_build(monkeypatch, ws, src) == set()  # no-op: code and inputs unchanged
    target = src / SPECIALISE
    target.write_text(target.read_text() + "\n# an edit to the specialiser\n")
    again = fresh_build(monkeypatch, ws, src)
    assert {"entry_graph", "check_defn"} <= again
    assert "parse" not in again  # precise: the reader's code did not change
    assert fresh_build(monkeypatch, ws, src) == set()


def test_an_edit_that_keeps_size_and_mtime_is_still_seen(
    monkeypatch: pytest.MonkeyPatch, copies: tuple[Path, Path]
) -> None:
    """``cp -p``, ``rsync -t`` or an editor that restores times: same size, same mtime."""
    ws, src = copies
    target = src / SPECIALISE
    target.write_text(target.read_text() + "\n# version A\n")
    fresh_build(monkeypatch, ws, src)
    before = target.stat()
    target.write_text(target.read_text().replace("# version A", "# version B"))
    os.utime(target, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert target.stat().st_size == before.st_size
    assert target.stat().st_mtime_ns == before.st_mtime_ns
    assert "entry_graph" in fresh_build(monkeypatch, ws, src)


def test_tool_versions_are_read_without_importlib_metadata() -> None:
    """A no-op checks every query's salt, tool versions included: the fast path reads the
    ``.dist-info`` names and agrees with importlib.metadata (which costs ~20 ms to import)."""
    from importlib import metadata

    from kinac.rules.query import _dist_info_version

    tools = {t for q in REGISTRY.values() for t in q.tools} | {"msgpack", "diskcache"}
    assert {"z3-solver", "xdsl", "llvmlite"} <= tools
    for tool in sorted(tools):
        assert _dist_info_version(tool) == metadata.version(tool), tool
    assert _dist_info_version("no-such-distribution-kinac") is None


def test_a_noop_build_imports_no_importlib_metadata(tmp_path: Path) -> None:
    import subprocess
    import sys

    ws = tmp_path / "ws"
    shutil.copytree(WS, ws, ignore=shutil.ignore_patterns(".kinac-cache"))
    build = [sys.executable, "-m", "kinac", "build", str(ws), "--cache-dir", str(tmp_path / "c")]
    subprocess.run(build, check=True, capture_output=True)
    probe = (
        "import sys, runpy; sys.argv = " + repr(["kinac", *build[3:]]) + "\n"
        "try:\n    runpy.run_module('kinac', run_name='__main__')\n"
        "except SystemExit:\n    pass\n"
        "print('importlib.metadata' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", probe], check=True, capture_output=True, text=True)
    assert out.stdout.strip().splitlines()[-1] == "False", out.stderr
