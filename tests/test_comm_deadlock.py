"""NCCL's contract on the simulator: a rank that calls a different collective, none, or one over
another mesh axis is reported (rank, collective, source span of each), never a hang.

The timeouts are short (0.3 s), so the whole file runs in about a second; each test also
checks that every simulated rank's thread has stopped after the report.
"""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest

from kinac.artifacts.sharded import MeshSpec
from kinac.errors import KinaRuntimeError
from kinac.rt.comm import simulate

LINE = MeshSpec("tp", (4,), ("tp",))
GRID = MeshSpec("grid", (2, 2), ("dp", "tp"))
TIMEOUT = 0.3


def _threads_stop() -> None:
    deadline = time.monotonic() + 2.0
    while time.monotonic() < deadline:
        if not [t for t in threading.enumerate() if t.name.startswith("kinac-sim-rank")]:
            return
        time.sleep(0.01)
    raise AssertionError("simulated ranks still running after the report")


def _report(mesh: MeshSpec, fn: object) -> tuple[str, float]:
    t0 = time.monotonic()
    with pytest.raises(KinaRuntimeError) as e:
        simulate(mesh, fn, timeout_s=TIMEOUT)  # type: ignore[arg-type]
    took = time.monotonic() - t0
    _threads_stop()
    return str(e.value), took


def test_a_rank_calling_a_different_collective() -> None:
    def fn(c: object) -> object:
        x = np.ones((4,), np.float32)
        if c.rank == 2:  # type: ignore[attr-defined]
            return c.all_gather(x, tag=("all-gather", "m.kina:9:3"))  # type: ignore[attr-defined]
        return c.all_reduce(x, tag=("all-reduce", "m.kina:7:5"))  # type: ignore[attr-defined]

    msg, took = _report(LINE, fn)
    assert msg.splitlines()[:5] == [
        "collective mismatch over tp (ranks 0 1 2 3): their call #1 differs:",
        "  rank 0: all-reduce(sum) over tp of f32[4] at m.kina:7:5",
        "  rank 1: all-reduce(sum) over tp of f32[4] at m.kina:7:5",
        "  rank 2: all-gather over tp of f32[4] at m.kina:9:3  <- differs",
        "  rank 3: all-reduce(sum) over tp of f32[4] at m.kina:7:5",
    ]
    assert took < TIMEOUT  # every call arrived: no need to wait


def test_shape_and_dtype_differences_are_mismatches() -> None:
    def fn(c: object) -> object:
        dt = np.float64 if c.rank == 1 else np.float32  # type: ignore[attr-defined]
        n = 5 if c.rank == 3 else 4  # type: ignore[attr-defined]
        return c.all_reduce(np.ones((n,), dt), tag=("all-reduce", "m.kina:2:2"))  # type: ignore[attr-defined]

    msg, _ = _report(LINE, fn)
    assert "  rank 1: all-reduce(sum) over tp of f64[4] at m.kina:2:2  <- differs" in msg
    assert "  rank 3: all-reduce(sum) over tp of f32[5] at m.kina:2:2  <- differs" in msg
    assert "  rank 0: all-reduce(sum) over tp of f32[4] at m.kina:2:2\n" in msg


def test_a_rank_that_returns_without_calling() -> None:
    def fn(c: object) -> object:
        if c.rank == 3:  # type: ignore[attr-defined]
            return None
        return c.all_reduce(np.ones((2,), np.float32), tag=("all-reduce", "m.kina:5:1"))  # type: ignore[attr-defined]

    msg, _ = _report(LINE, fn)
    head = msg.splitlines()[0]
    assert head.startswith("collective mismatch: rank ")
    assert head.endswith(
        "waits in all-reduce(sum) over tp of f32[2] at m.kina:5:1, but rank 3 returned "
        "without calling it"
    )
    assert "  rank 3: returned (calls nothing more)" in msg
    assert (
        "  rank 0: waits in all-reduce(sum) over tp of f32[2] at m.kina:5:1 (its call #1 over tp) for rank 3"
        in msg
    )


def test_a_rank_that_never_calls_is_reported_after_the_timeout() -> None:
    release = threading.Event()

    def fn(c: object) -> object:
        if c.rank == 1:  # type: ignore[attr-defined]
            release.wait(5.0)  # still computing: it has neither called nor returned
            return None
        return c.all_reduce(np.ones((2,), np.float32), tag=("all-reduce", "m.kina:5:1"))  # type: ignore[attr-defined]

    t0 = time.monotonic()
    with pytest.raises(KinaRuntimeError) as e:
        simulate(LINE, fn, timeout_s=TIMEOUT)
    took = time.monotonic() - t0
    release.set()
    _threads_stop()
    msg = str(e.value)
    assert TIMEOUT <= took < 5.0
    assert msg.splitlines()[0].startswith("collective timeout: rank ")
    assert "waited 0.3 s in all-reduce(sum) over tp of f32[2] at m.kina:5:1 for rank 1" in msg
    assert "  rank 1: running, in no collective" in msg


def test_a_rank_calling_over_another_axis() -> None:
    """Rank 0 all-reduces over dp where its peers do over tp, then all call one over the
    world: rank 1 waits for rank 0 over tp, rank 0 for rank 2 over dp, ranks 2 and 3 (whose tp
    round completed) for ranks 0 and 1 over the world. A deadlock, reported at the timeout."""

    def fn(c: object) -> object:
        x = np.ones((2,), np.float32)
        if c.rank == 0:  # type: ignore[attr-defined]
            c.sub("dp").all_reduce(x, tag=("all-reduce", "m.kina:3:9"))  # type: ignore[attr-defined]
        else:
            c.sub("tp").all_reduce(x, tag=("all-reduce", "m.kina:3:4"))  # type: ignore[attr-defined]
        return c.all_reduce(x, tag=("all-reduce", "m.kina:8:2"))  # type: ignore[attr-defined]

    msg, took = _report(GRID, fn)
    assert TIMEOUT <= took < 3.0
    assert msg.splitlines()[0].startswith("collective timeout: rank ")
    lines = msg.splitlines()[-4:]
    assert lines == [
        "  rank 0: waits in all-reduce(sum) over dp of f32[2] at m.kina:3:9 (its call #1 over dp) for rank 2",
        "  rank 1: waits in all-reduce(sum) over tp of f32[2] at m.kina:3:4 (its call #1 over tp) for rank 0",
        "  rank 2: waits in all-reduce(sum) over dp,tp of f32[2] at m.kina:8:2 (its call #1 over dp,tp) for ranks 0 1",
        "  rank 3: waits in all-reduce(sum) over dp,tp of f32[2] at m.kina:8:2 (its call #1 over dp,tp) for ranks 0 1",
    ]


def test_an_error_on_one_rank_stops_the_others() -> None:
    def fn(c: object) -> object:
        if c.rank == 1:  # type: ignore[attr-defined]
            raise KinaRuntimeError("gather index 9 is outside [0, 4)")
        return c.all_reduce(np.ones((2,), np.float32))  # type: ignore[attr-defined]

    msg, took = _report(LINE, fn)
    assert msg == "simulated rank 1 of mesh [4]: gather index 9 is outside [0, 4)"
    assert took < TIMEOUT  # the waiting ranks unwind at once
