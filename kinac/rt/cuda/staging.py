"""Host inputs of a GPU entry copied in through pinned buffers on a copy stream (issue 17 item 3).

Why: a host (numpy, torch CPU) argument used to become a fresh device tensor filled by a
``cuMemcpyHtoDAsync`` from pageable memory followed by a stream synchronisation, so every call
waited for the previous call's compute and for its own copy before queueing anything. Now:

* each host parameter owns two *slots* (double buffering), each a page-locked host block from
  the :class:`~kinac.rt.cuda.pinned.PinnedPool` and a device buffer of the entry;
* a call writes the array into its slot's pinned block (a host ``memcpy``, the host waiting
  only for that slot's copy two calls ago), queues ``cuMemcpyHtoDAsync`` on the entry's copy
  stream after the event that says the compute two calls ago is done reading the slot's device
  buffer, and records a *copied* event;
* the compute stream waits for the copied events (``cuStreamWaitEvent``: on the device, not the
  host), runs, and records a *consumed* event per slot.

So the copy of call k+1 runs on a copy engine while call k computes, and nothing synchronises
the device. The slots alternate between two device addresses per parameter, which the entry
binds as two CUDA graphs. The copy stream gets the greatest priority the driver offers
(``cuCtxGetStreamPriorityRange``), so kernels queued on it later are scheduled first.
"""

from __future__ import annotations

import weakref
from typing import Any

from kinac.rt.cuda import driver
from kinac.rt.cuda.device import Event, Stream
from kinac.rt.cuda.pinned import PinnedBuffer, PinnedPool, default_pool

SLOTS = 2


def priority_range() -> tuple[int, int]:
    """``(least, greatest)`` stream priorities of the current context (``(0, 0)`` when the
    driver offers none); greatest is the numerically lowest."""
    d = driver.api()
    least, greatest = driver.check("cuCtxGetStreamPriorityRange", d.cuCtxGetStreamPriorityRange())
    return int(least), int(greatest)


class _Slot:
    """One pinned block and one device buffer of a host parameter, with their events."""

    __slots__ = ("host", "dev", "nbytes", "copied", "consumed", "copy_pending", "read_pending")

    def __init__(self, host: PinnedBuffer, dev: int) -> None:
        self.host = host
        self.dev = dev
        self.nbytes = host.nbytes
        self.copied = Event(timing=False)
        self.consumed = Event(timing=False)
        self.copy_pending = False  # a copy out of `host` was queued (wait before rewriting)
        self.read_pending = False  # a compute reading `dev` was queued (wait before copying)


def _close(copy_stream: Stream, slots: list[_Slot]) -> None:
    """Wait for queued copies, then give the pinned blocks back (the pool may hand them out)."""
    try:
        copy_stream.synchronize()
    except Exception:  # noqa: BLE001 - at shutdown the driver may be gone: nothing to wait for
        pass
    for s in slots:
        s.host.free()
        for ev in (s.copied, s.consumed):
            try:
                ev.close()
            except Exception:  # noqa: BLE001
                pass
    try:
        copy_stream.close()
    except Exception:  # noqa: BLE001
        pass


class HostStager:
    """The pinned slots and copy stream of one GPU entry (created on its device)."""

    def __init__(self, alloc_device: Any, pool: PinnedPool | None = None) -> None:
        self.pool = pool if pool is not None else default_pool()
        self._alloc_device = alloc_device  # the entry's allocator: bytes -> device pointer
        _, greatest = priority_range()
        self.priority = greatest
        self.copy_stream = Stream(priority=greatest)
        self._slots: dict[int, list[_Slot]] = {}
        self._all: list[_Slot] = []
        self._turn: dict[int, int] = {}
        self._pending: list[_Slot] = []
        self.copies = 0  # host arrays staged (tests and metrics)
        self.bytes = 0  # bytes copied in
        self._finalizer = weakref.finalize(self, _close, self.copy_stream, self._all)

    def stage(self, i: int, array: Any, shape: tuple[int, ...], np_dtype: str) -> int:
        """Queue the copy of host ``array`` for parameter ``i``; the device address it lands at
        (valid for the compute once :meth:`before_run` has been called)."""
        import numpy as np

        slots = self._slots.get(i)
        if slots is None:
            slots = self._slots[i] = []
            for _ in range(SLOTS):
                host = PinnedBuffer(self.pool, shape, np_dtype)
                slot = _Slot(host, self._alloc_device(host.nbytes))
                slots.append(slot)
                self._all.append(slot)
        k = self._turn.get(i, 0)
        self._turn[i] = (k + 1) % SLOTS
        s = slots[k]
        if s.copy_pending:  # its copy of two calls ago must be done before the block is rewritten
            s.copied.synchronize()
        np.copyto(s.host.array, array, casting="unsafe")
        cs = self.copy_stream
        if s.read_pending:  # the compute of two calls ago must be done reading the device buffer
            cs.wait(s.consumed)
        d = driver.api()
        r = d.cuMemcpyHtoDAsync(s.dev, s.host.ptr, s.nbytes, cs.cu)
        if r[0] != driver.OK:
            driver.fail("cuMemcpyHtoDAsync", r[0])
        s.copied.record(cs)
        s.copy_pending = True
        self._pending.append(s)
        self.copies += 1
        self.bytes += s.nbytes
        return s.dev

    def before_run(self, stream: Stream) -> None:
        """Make ``stream`` (the compute) wait on the device for this call's copies."""
        for s in self._pending:
            stream.wait(s.copied)

    def after_run(self, stream: Stream) -> None:
        """Record on ``stream`` that this call's compute is done with its slots."""
        for s in self._pending:
            s.consumed.record(stream)
            s.read_pending = True
        self._pending.clear()

    def discard(self) -> None:
        """A call that failed before running: forget its pending copies (their slots stay
        valid; the next use of each waits for its copy as usual)."""
        self._pending.clear()

    def pinned_bytes(self) -> int:
        """Bytes of pinned memory this stager holds: its blocks' sizes as the pool accounts them
        (each request rounded up to its size class), so it can be compared with the pool's stats."""
        from kinac.rt.cuda.pinned import size_class

        return sum(size_class(s.host.nbytes) for s in self._all)

    def close(self) -> None:
        """Wait for queued copies and give the pinned blocks back."""
        self._finalizer()
