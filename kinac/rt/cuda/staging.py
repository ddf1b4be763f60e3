"""Host inputs of a GPU entry copied in through pinned buffers on a copy stream (issue 17 item 3).

Why: a host (numpy, torch CPU) argument used to become a fresh device tensor filled by a
``cuMemcpyHtoDAsync`` from pageable memory followed by a stream synchronisation, so every call
waited for the previous call's compute and for its own copy before queueing anything. Now:

* each host parameter owns two *slots* (double buffering), each a device buffer of the entry
  and (made at its first use) a page-locked host block from the
  :class:`~kinac.rt.cuda.pinned.PinnedPool`; the calls alternate between the two *turns*;
* a call's first staged input waits, on the host, for the DMA of two calls ago out of this
  turn's pinned blocks, and queues on the copy stream a wait for the *consumed* event of the
  compute two calls ago (which read this turn's device buffers);
* each input is written into its slot's pinned block (a host ``memcpy``, split across threads
  when big: :mod:`~kinac.rt.cuda.staging_copy`), or, when it is an array
  :func:`~kinac.rt.cuda.pinned.pinned_empty` handed out, not copied at all: the DMA reads it
  where it is and the call waits for that DMA before it returns (the caller may refill it);
* ``cuMemcpyHtoDAsync`` per input on the copy stream, then one *copied* event for the call,
  which the compute stream waits for (``cuStreamWaitEvent``: on the device, not the host); the
  compute records one *consumed* event for the call.

So the copy of call k+1 runs on a copy engine while call k computes, and nothing synchronises
the device. The slots alternate between two device addresses per parameter, which the entry
binds as two CUDA graphs. The copy stream gets the greatest priority the driver offers
(``cuCtxGetStreamPriorityRange``).

Per call that is 6 driver calls for one input (one more per further input); they go through
``ctypes.PyDLL`` with pre-built arguments (:mod:`~kinac.rt.cuda.staging_calls`), ~0.2 us of Python each instead of
~1 us through the bindings, and the events are made once per turn, not per call or per input.
The steady state of such a call (the same device arrays, host arrays of the right form) is
:mod:`~kinac.rt.cuda.staging_hot`; there the copies and the compute are two graph launches and
the host's wait a read of a pinned flag (:mod:`~kinac.rt.cuda.staging_graphs`), unless
``KINAC_STAGING_GRAPHS=0`` (or :attr:`HostStager.use_graphs` false) keeps the driver calls.
"""

from __future__ import annotations

import ctypes
import os
import weakref
from collections.abc import Callable
from typing import Any

from kinac.rt.cuda import driver
from kinac.rt.cuda.device import Stream
from kinac.rt.cuda.pinned import PinnedBuffer, PinnedPool, default_pool, handed_out, torch_pinned
from kinac.rt.cuda.staging_calls import Calls, driver_calls, priority_range
from kinac.rt.cuda.staging_copy import HostCopier, default_copier
from kinac.rt.cuda.staging_slots import SLOTS, Param, Turn, close_stager

__all__ = ["SLOTS", "FLAG_STRIDE", "Calls", "HostStager", "Param", "Turn", "priority_range"]

FLAG_STRIDE = 16  # uint32 words between two turns' flags (a cache line each)
# A caller's pinned array (pinned_empty, pin_memory()) of at least this many bytes is DMA'd
# where it is and the call waits for that DMA (the caller may refill it once the call
# returns); a smaller one is copied into the stager's block like any host array.
# KINAC_STAGING_DIRECT_MIN overrides it. 0: always in place, which the H200 measured as the
# faster of the two at every size (docs/measurements/runtime_overlap_2026-12-02c.md).
DIRECT_MIN_BYTES = 0
# A numpy input of at least this many bytes is copied into its pinned block with streaming
# (non-temporal) stores (:mod:`~kinac.rt.cuda.staging_nt`; split across the copier's threads
# from its threshold on) by the steady state, a smaller one by ``numpy.copyto``. None: the
# size from which ``x`` and the two turns' blocks no longer fit the core's L2
# (:func:`stream_min_default`), where the H200 measured the cached copy at 50 us per MiB in
# the loop against 33 alone (docs/measurements/runtime_overlap_2026-12-02c.md).
# KINAC_STAGING_STREAM_MIN overrides it (a huge value: never); KINAC_STAGING_STREAM_WIDTH
# picks the store width (32 or 64 bytes).
STREAM_MIN_BYTES: int | None = None
STREAM_WIDTH = 32
# The steady state's copy graphs (staging_graphs), 2026-12-02c round 3 (the probe's same-run
# A/Bs in docs/measurements/runtime_overlap_2026-12-02c.md, "Round 3"): each input's DMA as
# this many memcpy nodes on parallel branches (pieces of at least DMA_PIECE_MIN bytes, cut at
# 4 KiB; KINAC_STAGING_DMA_PIECES). 1: the H200 measured pieces slower at every size (0.5 MiB
# alone 15.4 / 19.0 / 23.5 us as 1 / 2 / 4 pieces; two streams no better), no second copy
# engine for one host-to-device copy;
DMA_PIECES = 1
DMA_PIECE_MIN = 64 << 10
# whether the copy graph of numpy inputs ends with the flag's copy and *done* (else the host
# asks the driver whether the turn's *copied* event is done when it reuses the block:
# KINAC_STAGING_FLAG=0; measured even: 37.5 vs 37.2 us at 0.5 MiB, 74.5 vs 74.7 at 1 MiB, so
# kept), and whether a copy graph reading a caller's pinned array does: no, the call waits for
# *copied*, recorded right after the DMAs, not for *done* after the flag's copy (a 0.5 MiB
# pinned_empty x 35.9 -> 29.4 us per call against 28.8 for device x; even from 1 MiB; no flag
# write can then land after the wait, so none can race the next call's clear).
# KINAC_STAGING_DIRECT_FLAG=1 keeps the flag there.
COPY_FLAG = True
DIRECT_FLAG = False


def stream_min_default(root: str = "/sys/devices/system/cpu/cpu0/cache") -> int:
    """A third of the calling core's L2 (Linux sysfs; 2 MiB where it cannot be read), plus
    one: from there ``x`` and the two turns' blocks exceed it and a cached copy evicts ``x``
    and the blocks each call (a streaming copy writes around the cache)."""
    l2 = 2 << 20
    try:
        for d in sorted(os.listdir(root)):
            base = os.path.join(root, d)
            with open(os.path.join(base, "level"), encoding="ascii") as f:
                level = f.read().strip()
            with open(os.path.join(base, "type"), encoding="ascii") as f:
                kind = f.read().strip()
            if level == "2" and kind in ("Unified", "Data"):
                with open(os.path.join(base, "size"), encoding="ascii") as f:
                    size = f.read().strip()
                mult = {"K": 1 << 10, "M": 1 << 20}.get(size[-1:], 1)
                l2 = int(size.rstrip("KM")) * mult
                break
    except (OSError, ValueError):
        pass
    return l2 // 3 + 1


_hot: list[Callable[..., Any]] = []  # staging_hot.hot_call, once imported (it imports this)


def _ok(name: str, rc: int) -> None:
    if rc:
        driver.fail(name, rc)


class HostStager:
    """The pinned slots and copy stream of one GPU entry (created on its device).

    The entry's general path calls :meth:`stage` per host argument, :meth:`before_run` before
    its launches and :meth:`after_run` after (or :meth:`discard` when the call failed before
    running); its steady state is :meth:`hot_call`."""

    # The turn calls of staging_hot's bound call count themselves once (one host array, one
    # graph call, its bytes): the counters below add them (fewer attribute writes per call).
    turn_calls = 0
    turn_bytes = 0
    _copies = _bytes = _hot = _graph = 0

    @property
    def copies(self) -> int:  # host arrays staged (tests and metrics)
        return self._copies + self.turn_calls

    @copies.setter
    def copies(self, v: int) -> None:
        self._copies = v - self.turn_calls

    @property
    def bytes(self) -> int:  # bytes copied in
        return self._bytes + self.turn_bytes

    @bytes.setter
    def bytes(self, v: int) -> None:
        self._bytes = v - self.turn_bytes

    @property
    def hot_calls(self) -> int:  # calls that took hot_call
        return self._hot + self.turn_calls

    @hot_calls.setter
    def hot_calls(self, v: int) -> None:
        self._hot = v - self.turn_calls

    @property
    def graph_calls(self) -> int:  # steady-state calls made of two graph launches
        return self._graph + self.turn_calls

    @graph_calls.setter
    def graph_calls(self, v: int) -> None:
        self._graph = v - self.turn_calls

    def __init__(
        self,
        alloc_device: Any,
        pool: PinnedPool | None = None,
        *,
        calls: Calls | None = None,
        copier: HostCopier | None = None,
        graphs: Any = None,
    ) -> None:
        if pool is None and os.environ.get("KINAC_STAGING_WC") == "1":
            from kinac.rt.cuda.pinned import write_combined_pool

            pool = write_combined_pool()  # the staging blocks (the host only writes them)
        self.pool = pool if pool is not None else default_pool()
        self.calls = calls if calls is not None else driver_calls()
        self.copier = copier if copier is not None else default_copier()
        self._alloc_device = alloc_device  # the entry's allocator: bytes -> device pointer
        _, greatest = priority_range()
        self.priority = greatest
        self.copy_stream = Stream(priority=greatest)
        self.cs_arg = self.calls.handle(self.copy_stream.handle)
        self.params: dict[int, Param] = {}
        self.turns = [Turn(self.calls, j) for j in range(SLOTS)]
        self.turn = 0
        self._pending: list[int] = []  # params staged by the current call
        self._direct = False  # the current call DMAs from a caller's pinned array
        env = os.environ.get("KINAC_STAGING_DIRECT_MIN")
        self.direct_min = int(env) if env else DIRECT_MIN_BYTES  # see DIRECT_MIN_BYTES
        env = os.environ.get("KINAC_STAGING_STREAM_MIN")
        least = STREAM_MIN_BYTES if STREAM_MIN_BYTES is not None else stream_min_default()
        self.stream_min = int(env) if env else least  # see STREAM_MIN_BYTES
        env = os.environ.get("KINAC_STAGING_STREAM_WIDTH")
        self.stream_width = int(env) if env else STREAM_WIDTH
        env = os.environ.get("KINAC_STAGING_DMA_PIECES")
        self.dma_pieces = max(1, int(env)) if env else DMA_PIECES  # see DMA_PIECES
        self.copy_flag = os.environ.get("KINAC_STAGING_FLAG", "1" if COPY_FLAG else "0") != "0"
        env = os.environ.get("KINAC_STAGING_DIRECT_FLAG")
        self.direct_flag = env != "0" if env else DIRECT_FLAG  # see COPY_FLAG, DIRECT_FLAG
        # 2026-12-02e (docs/runtime.md, "Host-input calls from page-locked memory"): a caller's
        # pinned array's DMA queued first in the bound call (staging_direct; off: steady_call, the
        # path before), as driver calls rather than the copy graph (the H200 measured them
        # 2-4% faster a call on two hosts), and a torch tensor's pinnedness remembered per
        # storage (pinned.torch_pinned: off, the H200 measured is_pinned() no slower)
        self.early_dma = os.environ.get("KINAC_STAGING_EARLY_DMA", "1") != "0"
        self.direct_by_calls = os.environ.get("KINAC_STAGING_DIRECT_CALLS", "1") != "0"
        self.pin_cache = os.environ.get("KINAC_STAGING_PIN_CACHE", "0") == "1"
        self.streamed = 0  # host arrays copied with streaming stores
        self.staged_positions: tuple[int, ...] = ()  # the last general call's host params
        self.copies = 0  # host arrays staged (tests and metrics)
        self.bytes = 0  # bytes copied in
        self.direct = 0  # of those, copied straight from a pinned_empty array
        self.hot_calls = 0  # calls that took hot_call
        self.memo: list[Any] = [None]  # staging_hot's memo, in a box weak references empty
        # the steady state's graphs (staging_graphs): the builder (None: driver calls only)
        if graphs is None and os.environ.get("KINAC_STAGING_GRAPHS", "1") != "0":
            from kinac.rt.cuda.staging_graphs import native_graphs

            graphs = native_graphs()
        self.graphs = graphs
        self.use_graphs = graphs is not None  # the bench's switch (same-run A/B)
        self.graph_calls = 0  # steady-state calls made of two graph launches
        # the compute as the wrapper graph (else as driver calls after the copy graph: the
        # bench's A/B, KINAC_STAGING_WRAPPER=0), and the calls made that way
        self.compute_wrapper = os.environ.get("KINAC_STAGING_WRAPPER", "1") != "0"
        self.hybrid_calls = 0
        self.graph_error: str | None = None  # why a graph could not be built (the last)
        self.flags: Any = None  # per turn a uint32 the copy graph sets (pinned, host-read)
        self._one = self._flag_ptr = 0  # a device word holding 1 (the flags' source); flags
        self._copy_built: dict[tuple[int, tuple[int, ...], int, bool], Any] = {}
        self._compute_built: dict[tuple[int, int], tuple[Any, Any]] = {}
        self._direct_built: dict[Any, Any] = {}  # copy graphs reading a caller's pinned arrays
        self._extra: list[Any] = []  # what close_stager frees: the flag block, built graphs
        if not _hot:
            from kinac.rt.cuda.staging_hot import hot_call

            _hot.append(hot_call)
        self._finalizer = weakref.finalize(
            self, close_stager, self.copy_stream, self.params, self.turns, self._extra
        )

    # ---- the general path --------------------------------------------------------------------
    def param(self, i: int, shape: tuple[int, ...], np_dtype: str) -> Param:
        """Parameter ``i``'s slots (made at its first host array)."""
        p = self.params.get(i)
        if p is None:
            p = Param(i, shape, np_dtype, self.calls)
            devs = [self._alloc_device(p.nbytes) for _ in range(SLOTS)]
            p.dev, p.dev_arg = devs, [self.calls.dev(d) for d in devs]
            self.params[i] = p
        return p

    def arg(self, stream: Stream) -> Any:
        """``stream`` as the calls take it."""
        return stream.cvp if self.calls.native else stream.handle

    def begin(self, t: Turn) -> None:
        """Before a call's first DMA into turn ``t``'s slots: the host waits for the turn's
        DMAs of two calls ago (its pinned blocks are rewritten next), the copy stream for the
        compute of two calls ago (its device buffers are)."""
        self.begin_host(t)
        self.begin_device(t)

    def begin_host(self, t: Turn) -> None:
        """The host's half of :meth:`begin`: no driver call when the copy graph's flag says
        the turn's DMAs are done; else a wait on *done* (the flag's write then has landed, so
        clearing it cannot race it) or, after driver-call DMAs or a copy graph without the flag,
        a query of *copied* (one driver call, no wait when done) and a wait on it if not."""
        if t.copy_pending:
            if t.flagged:
                if not self.flags[t.index * FLAG_STRIDE]:
                    _ok("cuEventSynchronize", self.calls.sync(t.done_arg))
            elif self.calls.query is None or self.calls.query(t.copied_arg):
                _ok("cuEventSynchronize", self.calls.sync(t.copied_arg))
            t.copy_pending = t.flagged = False

    def begin_device(self, t: Turn) -> None:
        """The device's half of :meth:`begin` (the copy graph has it as its first node)."""
        if t.read_pending:
            c = self.calls
            _ok("cuStreamWaitEvent", c.wait(self.cs_arg, t.consumed_arg, c.zero))
            t.read_pending = False

    def fill(self, p: Param, array: Any, j: int) -> Any:
        """The source argument of ``p``'s DMA in turn ``j``: a ``pinned_empty`` array of the
        parameter's exact form where it is, else turn ``j``'s pinned block, ``array`` copied
        into it (cast to the parameter's dtype)."""
        ptr, n = handed_out(array)
        if (
            ptr
            and n == p.nbytes >= self.direct_min
            and array.dtype == p.dtype
            and array.shape == p.shape
        ):
            self._direct = True
            self.direct += 1
            return self.calls.handle(ptr)
        self.copier(self.block(p, j).array, array)
        return p.host_arg[j]

    def fill_torch(self, p: Param, t: Any, j: int) -> Any:
        """:meth:`fill` for a contiguous CPU torch tensor of the parameter's exact form (the
        caller checked it): a pinned one (``pin_memory()``) is DMA'd where it is, as a
        ``pinned_empty`` array; another is copied into the pinned block."""
        ptr = t.data_ptr()
        if p.nbytes >= self.direct_min and torch_pinned(t, self.pin_cache):
            self._direct = True
            self.direct += 1
            return self.calls.handle(ptr)
        blk = self.block(p, j)
        if p.nbytes >= self.copier.min_bytes:
            self.copier(blk.array, t.numpy())
        elif p.nbytes:
            ctypes.memmove(blk.ptr, ptr, p.nbytes)
        return p.host_arg[j]

    def block(self, p: Param, j: int) -> PinnedBuffer:
        """``p``'s pinned block of turn ``j`` (made at its first use)."""
        blk = p.host[j]
        if blk is None:
            blk = p.host[j] = PinnedBuffer(self.pool, p.shape, p.dtype)
            p.host_arg[j] = self.calls.handle(blk.ptr)
        return blk

    def stage(self, i: int, array: Any, shape: tuple[int, ...], np_dtype: str) -> int:
        """Queue the copy of host ``array`` for parameter ``i``; the device address it lands at
        (valid for the compute once :meth:`before_run` has been called)."""
        p = self.param(i, shape, np_dtype)
        j = self.turn
        if not self._pending:
            self.begin(self.turns[j])
        src = self.fill(p, array, j)
        self._pending.append(i)
        c = self.calls
        _ok("cuMemcpyHtoDAsync", c.copy(p.dev_arg[j], src, p.n_arg, self.cs_arg))
        self.copies += 1
        self.bytes += p.nbytes
        return p.dev[j]

    def before_run(self, stream: Stream) -> None:
        """Make ``stream`` (the compute) wait on the device for this call's copies."""
        if not self._pending:
            return
        c, t = self.calls, self.turns[self.turn]
        _ok("cuEventRecord", c.record(t.copied_arg, self.cs_arg))
        t.copy_pending = True
        _ok("cuStreamWaitEvent", c.wait(self.arg(stream), t.copied_arg, c.zero))
        self.staged_positions = tuple(sorted(self._pending))

    def after_run(self, stream: Stream) -> None:
        """Record on ``stream`` that this call's compute is done with its slots; when a DMA
        read a caller's pinned array, wait for it (the caller may refill the array next)."""
        if not self._pending:
            return
        c, t = self.calls, self.turns[self.turn]
        if not t.copy_pending:  # staged, but before_run was skipped: order it now
            self.before_run(stream)
        _ok("cuEventRecord", c.record(t.consumed_arg, self.arg(stream)))
        t.read_pending = True
        self.end(t)

    def end(self, t: Turn) -> None:
        """The call is queued: wait for a caller's pinned array to be read, next turn."""
        if self._direct:
            _ok("cuEventSynchronize", self.calls.sync(t.copied_arg))
            t.copy_pending = False
            self._direct = False
        self._pending.clear()
        self.turn = (self.turn + 1) % SLOTS

    def discard(self) -> None:
        """A call that failed before running: wait for the DMAs it queued (so its pinned blocks
        and the caller's arrays are free again) and forget them; the turn is used again."""
        if not self._pending:
            return
        c, t = self.calls, self.turns[self.turn]
        _ok("cuEventRecord", c.record(t.copied_arg, self.cs_arg))
        _ok("cuEventSynchronize", c.sync(t.copied_arg))
        t.copy_pending = False
        self._direct = False
        self._pending.clear()

    def hot_call(self, entry: Any, arrays: tuple[Any, ...]) -> Any:
        """The steady state of a call with host arguments, or None (the general path):
        :func:`kinac.rt.cuda.staging_hot.hot_call`."""
        return _hot[0](self, entry, arrays)

    def bind_hot(self, entry: Any, arrays: tuple[Any, ...]) -> Callable[..., Any] | None:
        """The steady state bound for ``kinac.compile``'s memo, or None:
        :func:`kinac.rt.cuda.staging_bound.bind`."""
        from kinac.rt.cuda.staging_bound import bind

        return bind(self, entry, arrays)

    # ---- accounting ------------------------------------------------------------------------------
    def pinned_bytes(self) -> int:
        """Bytes of pinned memory this stager holds: its blocks' sizes as the pool accounts them
        (each request rounded up to its size class), so it can be compared with the pool's stats;
        the copy graphs' flags (one 4 KiB block) included."""
        from kinac.rt.cuda.pinned import size_class

        blocks = [b for p in self.params.values() for b in p.host if b]
        blocks += [x for x in self._extra if isinstance(x, PinnedBuffer)]
        return sum(size_class(b.nbytes) for b in blocks)

    def device_buffers(self) -> list[int]:
        """Every slot's device address (two per host parameter)."""
        return [d for p in self.params.values() for d in p.dev]

    def close(self) -> None:
        """Wait for queued copies and give the pinned blocks back (the steady state's memo
        goes first: a call bound to this stager takes the entry's path from now on)."""
        self.memo[0] = None
        self._finalizer()
