"""In-process callers do not keep the cache's SQLite files open after a build.

Why: the CLI's ``main`` and ``kinac.compile`` run inside other programs (tests, notebooks,
servers); connections left to garbage collection pile up, hold WAL files, and keep a cache
directory from being removed on Windows-like file systems. Checked through ``/proc/self/fd``
with the garbage collector off, so only an explicit close passes.
"""

from __future__ import annotations

import gc
import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from kinac.rules import Database
from kinac.rules.store import Store

WS = Path(__file__).resolve().parent.parent / "workspaces" / "mlp"

pytestmark = pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="needs /proc")


def open_files(under: Path) -> list[str]:
    found = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        if target.startswith(str(under)):
            found.append(target)
    return sorted(found)


@pytest.fixture()
def no_gc() -> Iterator[None]:
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def test_store_and_database_close_and_reopen(tmp_path: Path, no_gc: None) -> None:
    with Store(tmp_path / "c") as store:
        with Database(store) as db:
            store.stage_blob("x" * 32, b"")  # type: ignore[attr-defined]
            db.commit()
            store.load_summaries()  # type: ignore[attr-defined]
            assert open_files(tmp_path / "c")
        assert open_files(tmp_path / "c") == []
        assert store.load_summaries() == {}  # type: ignore[attr-defined]  # reopens on use
    assert open_files(tmp_path / "c") == []


def test_cli_check_and_build_close_the_cache(tmp_path: Path, no_gc: None) -> None:
    from kinac.cli import main

    ws = tmp_path / "ws"
    shutil.copytree(WS, ws, ignore=shutil.ignore_patterns(".kinac-cache"))
    for cmd in ("check", "build", "build"):
        assert main([cmd, str(ws), "--cache-dir", str(tmp_path / "c")]) == 0
        assert open_files(tmp_path / "c") == [], cmd
    assert main(["build", str(ws / "nosuch.kina"), "--cache-dir", str(tmp_path / "c")]) != 0
    assert open_files(tmp_path / "c") == []


def test_compile_closes_the_cache_between_specialisations(tmp_path: Path, no_gc: None) -> None:
    import numpy as np

    import kinac

    ws = tmp_path / "ws"
    shutil.copytree(WS, ws, ignore=shutil.ignore_patterns(".kinac-cache"))
    cache = tmp_path / "c"
    (ws / "free.kina").write_text(
        "(defn twice [(x : (tensor f32 [N]))] -> (tensor f32 [N]) (add x x))\n"
    )
    fn = kinac.compile(ws, "twice", cache_dir=str(cache))
    assert open_files(cache) == []
    for n in (3, 5):  # each new shape is built through the cache, which is closed again
        out = fn(np.ones(n, dtype=np.float32))
        assert np.array_equal(np.asarray(out), np.full(n, 2.0, dtype=np.float32))
        assert open_files(cache) == []
    with pytest.raises(kinac.KinaError):
        kinac.compile(ws, "nosuch", cache_dir=str(cache))
    assert open_files(cache) == []
