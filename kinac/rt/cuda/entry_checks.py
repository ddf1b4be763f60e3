"""Deferred runtime checks: a GPU entry's status word read back without a host wait.

Why: an entry with a runtime check (gather bounds) writes a status word on the device, and
the immediate check (:meth:`GpuEntry._check_status`) synchronises the stream and copies it
back after every call: a host round trip per call, the one sync left in a training step
besides the loss read. Deferred (:meth:`GpuEntry.defer_checks`), the call queues an
asynchronous copy of the status word into a row of a small ring of page-locked host memory
on the entry's stream, right after its kernels, and records an event. The rows are
inspected, oldest first:

* at the start of the entry's next call, without waiting (rows whose copy is not complete
  yet stay queued);
* at :meth:`GpuEntry.check` (waiting for every queued copy), which the caller runs at its
  synchronisation points: the training driver after each step's loss read and before it
  returns weights;
* when the ring is full (the oldest row is waited for before it is reused).

A failed check raises the same :class:`KinaGpuError` as the immediate one (naming the entry,
the gather kernel and the index), then forgets the rows queued after it: their results
derive from the failed call's.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from typing import Any

from kinac.rt.cuda import driver

RING = 4  # status rows in flight; a fifth call waits for the first's copy
NOT_READY = 600  # CUDA_ERROR_NOT_READY: cuEventQuery on work still queued


def _event() -> Any:
    from kinac.rt.cuda.device import Event

    return Event(timing=False)


def _pinned(rows: int, slots: int) -> Any:
    from kinac.rt.cuda.pinned import PinnedBuffer, default_pool

    return PinnedBuffer(default_pool(), (rows, slots), "int64")


def done(event: Any) -> bool:
    """Whether the work recorded by ``event`` is complete (no wait)."""
    r = driver.api().cuEventQuery(event.cu)
    if r[0] == driver.OK:
        return True
    if int(r[0]) == NOT_READY:
        return False
    driver.fail("cuEventQuery", r[0])
    return False  # fail raises


class DeferredStatus:
    """The ring of pinned status rows and events of one entry (see the module docstring).
    ``event`` and ``host`` are injectable so the bookkeeping is tested without a GPU."""

    def __init__(
        self,
        slots: int,
        *,
        event: Callable[[], Any] | None = None,
        host: Callable[[int, int], Any] | None = None,
    ) -> None:
        self.slots = slots
        self.rows = (host or _pinned)(RING, slots)  # .array [RING, slots] int64, .ptr
        self.events = [(event or _event)() for _ in range(RING)]
        self.pending: deque[int] = deque()
        self.turn = 0
        self.queued = 0  # copies queued (tests and metrics)

    def queue(self, status: int, stream: Any, fail: Callable[[Any], None]) -> None:
        """After a call's kernels on ``stream``: copy the status word ``status`` into the next
        row and record its event (a full ring first inspects its oldest row, waiting)."""
        if len(self.pending) == RING:
            self._inspect(fail, wait=True, limit=1)
        k = self.turn
        self.turn = (k + 1) % RING
        nbytes = 8 * self.slots
        dst = self.rows.ptr + k * nbytes
        d = driver.api()
        driver.check("cuMemcpyDtoHAsync", d.cuMemcpyDtoHAsync(dst, status, nbytes, stream.cu))
        self.events[k].record(stream)
        self.pending.append(k)
        self.queued += 1

    def poll(self, fail: Callable[[Any], None]) -> None:
        """Inspect the rows whose copy is complete, without waiting."""
        self._inspect(fail, wait=False)

    def wait(self, fail: Callable[[Any], None]) -> None:
        """Wait for every queued row and inspect it."""
        self._inspect(fail, wait=True)

    def _inspect(self, fail: Callable[[Any], None], *, wait: bool, limit: int = RING) -> None:
        while self.pending and limit:
            k = self.pending[0]
            if wait:
                self.events[k].synchronize()
            elif not done(self.events[k]):
                return
            self.pending.popleft()
            limit -= 1
            row = self.rows.array[k]
            if row[0]:
                self.pending.clear()  # later calls consumed the failed call's results
                fail(row.copy())
