"""Adversarial calls of ``kinac.compile`` on the CPU (bug round 2026-12-02e): what a Python
caller can do to a compiled function that the earlier API tests did not try."""

from __future__ import annotations

import threading
from pathlib import Path

import numpy as np

import kinac

SOURCE = """(module a)
(defn f [(x : (tensor f32 [N])) (y : (tensor f32 [N]))] -> (tensor f32 [N]) (add (mul x y) x))
"""


def _workspace(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "a.kina").write_text(SOURCE)
    return ws


def test_first_calls_from_several_threads(tmp_path: Path) -> None:
    """The first calls of one compiled function from several threads at once (each compiles
    the shape, or waits for the thread that does): every call answers right. Before: the
    threads shared the session's query engine unguarded, and all but one failed with an
    internal ``CycleError: query cycle through lowered`` (and a closed cache's warning)."""
    f = kinac.compile(_workspace(tmp_path), "f", cache_dir=str(tmp_path / "cache"))
    n = 6
    start = threading.Barrier(n)
    errors: list[str] = []
    wrong: list[int] = []

    def call(i: int) -> None:
        x = np.arange(4 + i, dtype=np.float32)  # some share a shape, some compile their own
        y = np.full(4 + i, 2.0, np.float32)
        start.wait()
        try:
            if not np.array_equal(f(x, y), x * y + x):
                wrong.append(i)
        except Exception as e:  # noqa: BLE001 - the test reports every failure
            errors.append(f"{type(e).__name__}: {e}")

    pool = [threading.Thread(target=call, args=(i % 3,)) for i in range(n)]
    for t in pool:
        t.start()
    for t in pool:
        t.join()
    assert errors == [] and wrong == []
