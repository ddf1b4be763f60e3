"""The stager's slots and turns (split out of :mod:`~kinac.rt.cuda.staging` on 2026-12-02e, which
had grown past the size guideline): per host parameter its device buffers and pinned blocks, per
turn its events and what is pending on them, and how a stager gives them back.

Why two of each (double buffering): the copy of call k+1 goes into the other turn's slots while
call k's compute reads its own, so copies overlap compute without a device-wide sync.
"""

from __future__ import annotations

from typing import Any

from kinac.rt.cuda.device import Event, Stream
from kinac.rt.cuda.pinned import PinnedBuffer
from kinac.rt.cuda.staging_calls import Calls

SLOTS = 2

__all__ = ["SLOTS", "Param", "Turn", "close_stager"]


class Param:
    """One host parameter's slots: a device buffer per turn (and its call argument), and a
    pinned block per turn, made when a staging copy first needs it."""

    __slots__ = ("i", "shape", "dtype", "nbytes", "n_arg", "dev", "dev_arg", "host", "host_arg")

    def __init__(self, i: int, shape: tuple[int, ...], dtype: Any, c: Calls) -> None:
        import math

        import numpy as np

        self.i = i
        self.shape = shape
        self.dtype = np.dtype(dtype)
        self.nbytes = math.prod(shape) * self.dtype.itemsize
        self.n_arg = c.size(self.nbytes)
        self.dev: list[int] = []
        self.dev_arg: list[Any] = []
        self.host: list[PinnedBuffer | None] = [None] * SLOTS
        self.host_arg: list[Any] = [None] * SLOTS


class Turn:
    """The events of one turn: *copied* (its DMAs are done, on the copy stream), *consumed*
    (its compute is done with the device buffers, on the compute stream) and *done* (the copy
    graph's flag write landed, after its DMAs), with whether each has been recorded since it
    was last waited for."""

    __slots__ = (
        "index", "copied", "consumed", "done", "copied_arg", "consumed_arg", "done_arg",
        "copy_pending", "read_pending", "flagged",
    )  # fmt: skip

    def __init__(self, c: Calls, index: int) -> None:
        self.index = index
        self.copied = Event(timing=False)
        self.consumed = Event(timing=False)
        self.done = Event(timing=False)
        self.copied_arg = c.handle(self.copied.handle)
        self.consumed_arg = c.handle(self.consumed.handle)
        self.done_arg = c.handle(self.done.handle)
        self.copy_pending = False  # DMAs out of this turn's pinned blocks were queued
        self.read_pending = False  # a compute reading this turn's device buffers was queued
        self.flagged = False  # those DMAs were the copy graph's: its flag says when they end


def close_stager(
    copy_stream: Stream, params: dict[int, Param], turns: list[Turn], extra: list[Any]
) -> None:
    """Wait for queued copies, then give the pinned blocks back (the pool may hand them out)
    and destroy the graphs (an executable graph still running is freed when it ends)."""
    try:
        copy_stream.synchronize()
    except Exception:  # noqa: BLE001 - at shutdown the driver may be gone: nothing to wait for
        pass
    for p in params.values():
        for b in p.host:
            if b is not None:
                b.free()
    for x in extra:  # the flag block, and (api, built graph) pairs
        try:
            if isinstance(x, PinnedBuffer):
                x.free()
            else:
                x[0].destroy(x[1].graph, x[1].exec)
        except Exception:  # noqa: BLE001 - at shutdown the driver may be gone
            pass
    for t in turns:
        for ev in (t.copied, t.consumed, t.done):
            try:
                ev.close()
            except Exception:  # noqa: BLE001
                pass
    try:
        copy_stream.close()
    except Exception:  # noqa: BLE001
        pass
