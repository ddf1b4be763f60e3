"""Deferred gather-bounds checks (``GpuEntry.defer_checks``, ``kinac.rt.cuda.entry_checks``).

A driverless entry (memory in host RAM, the kernel a Python function) with a status word: an
"index" outside ``[0, N)`` in its input makes the kernel write the gather's failure into the
status word, as the generated gather kernels do. Checked: the immediate check (the default)
fails the very call; deferred, the call returns and the failure is raised, with the same
message, at the entry's next call (when the status copy is complete) or at ``check()``
(waiting for it), never lost; rows are reused past the ring's size.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
import pytest
from test_determinism_gpu_fake import FakeDriver, N, _tensor, _view
from test_train_gpu_step import FakeGraph, _map_entry

from kinac.artifacts.gpu import GpuLaunch, GpuStep
from kinac.rt.cuda import driver, entry_checks, graph
from kinac.rt.cuda.entry import GpuEntry
from kinac.rt.cuda.entry_support import GATHER_OOB, KinaGpuError

SLOTS = 5


class EventDriver(FakeDriver):
    """The fake driver plus ``cuEventQuery``: an event is complete once the test says so."""

    def cuEventQuery(self, ev: Any) -> tuple[int]:  # noqa: N802
        return (0 if ev.ready else entry_checks.NOT_READY,)


class FakeEvent:
    def __init__(self) -> None:
        self.ready = True
        self.waits = 0

    @property
    def cu(self) -> FakeEvent:
        return self

    def record(self, stream: Any) -> None:
        pass

    def synchronize(self) -> None:
        self.waits += 1
        self.ready = True


class Rows:
    def __init__(self, rows: int, slots: int) -> None:
        self.array = np.zeros((rows, slots), np.int64)
        self.ptr = self.array.ctypes.data


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(driver, "_api", EventDriver())
    monkeypatch.setattr(driver, "OK", 0)
    monkeypatch.setattr(graph, "capture", FakeGraph)
    monkeypatch.setattr(entry_checks, "_event", FakeEvent)
    monkeypatch.setattr(entry_checks, "_pinned", Rows)


def _gather_entry() -> GpuEntry:
    """out = x + 1, where x's values are "indices" into [0, N): a value outside writes the
    gather failure (code, step, position, value, bound) into the status word."""
    launch = GpuLaunch("k_gather", 1, 128, ("param0", "out0", "status"))
    step = GpuStep("k0_gather", "map", "kernel", "f32", (N,), ("param0",), "out0", (launch,),
                   aux=(N,))  # fmt: skip
    e = _map_entry((step,))
    e.lowered = dataclasses.replace(e.lowered, status_slots=SLOTS)
    e.status = e.resource.allocate(8 * SLOTS)
    st = np.ctypeslib.as_array((np.ctypeslib.ctypes.c_int64 * SLOTS).from_address(e.status))  # type: ignore[attr-defined]

    def bind(key: tuple[int, ...]) -> Any:
        x, out = (p or e._staging(pos) for pos, p in enumerate(key))

        def seq(stream: Any) -> None:
            st[:] = 0  # the launch sequence's memset of the status word
            e.runs += 1  # type: ignore[attr-defined]
            v = _view(x)
            _view(out)[:] = v + 1
            bad = np.flatnonzero((v < 0) | (v >= N))
            if bad.size:
                st[:] = (GATHER_OOB, 0, bad[0], int(v[bad[0]]), N)

        return seq, [seq]

    e._bind = bind  # type: ignore[method-assign]
    return e


MESSAGE = (
    r"e: gather index 99 at position \[3\] of the index tensor is outside \[0, " + str(N) + r"\)"
)


def test_immediate_check_fails_the_call(fake: None) -> None:
    e = _gather_entry()
    good = _tensor(e.resource, np.zeros(N, np.float32))
    bad_values = np.zeros(N, np.float32)
    bad_values[3] = 99
    bad = _tensor(e.resource, bad_values)
    e(good)
    with pytest.raises(KinaGpuError, match=MESSAGE + r" \(kernel k0_gather\)"):
        e(bad)
    assert e._deferred is None


def test_deferred_check_reports_at_the_next_call_or_check(fake: None) -> None:
    e = _gather_entry()
    e.defer_checks()
    assert e._deferred is not None
    good = _tensor(e.resource, np.zeros(N, np.float32))
    bad_values = np.zeros(N, np.float32)
    bad_values[3] = 99
    bad = _tensor(e.resource, bad_values)
    for _ in range(2 * entry_checks.RING + 1):  # rows reused past the ring, nothing reported
        e(good)
    e.check()
    assert e._deferred.queued == 2 * entry_checks.RING + 1 and not e._deferred.pending
    # the bad call returns; the next call, its copy being complete, reports it (named alike)
    e(bad)
    with pytest.raises(KinaGpuError, match=MESSAGE):
        e(good)
    assert not e._deferred.pending
    e(good)  # reported once; the entry goes on
    e.check()
    # the copy not yet complete at the next call: that call goes on, check() waits, reports
    e(bad)
    for ev in e._deferred.events:
        ev.ready = False
    e(good)
    assert len(e._deferred.pending) == 2
    with pytest.raises(KinaGpuError, match=MESSAGE):
        e.check()
    assert not e._deferred.pending  # the call after the bad one is forgotten with it
    # out= calls (the training step's) defer alike
    out = _tensor(e.resource, np.zeros(N, np.float32))
    e(bad, out=(out,))
    with pytest.raises(KinaGpuError, match=MESSAGE):
        e.check()
    e.defer_checks(False)
    with pytest.raises(KinaGpuError, match=MESSAGE):
        e(bad)


def _no_gpu() -> bool:
    from kinac.rt import cuda

    return not cuda.available()


@pytest.mark.gpu
@pytest.mark.skipif(_no_gpu(), reason="no CUDA GPU")
def test_gpu_deferred_gather_check(tmp_path: Any) -> None:
    """On the GPU: cross-entropy's gather of a target outside [0, V) fails the plain call
    at once; deferred, the call returns, and ``check()`` (or the next call) reports it."""
    from pathlib import Path

    import kinac
    from kinac.train.optim import specialised

    std = Path(kinac.__file__).parent / "std"
    ce = kinac.compile(std / "loss.kina", "cross-entropy", target="cuda", cache_dir=str(tmp_path))
    x = np.zeros((3, 4), np.float32)
    good, bad = np.array([0, 1, 2], np.int32), np.array([0, 7, 2], np.int32)
    with pytest.raises(kinac.KinaRuntimeError, match="gather index -1"):
        ce(x, bad)
    e = specialised(ce, (x, good), {})
    e.defer_checks()
    assert e._deferred is not None
    e(x, good)
    e.check()
    e(x, bad)  # returns: its status copy is queued
    with pytest.raises(KinaGpuError, match="gather index -1"):
        e.check()
    e(x, bad)
    with pytest.raises(KinaGpuError, match="gather index -1"):
        for _ in range(8):  # the next calls report it once its copy is in (at the latest: check)
            e(x, good)
        e.check()
    e(x, good)
    e.check()
