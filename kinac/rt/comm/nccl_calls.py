"""The collective calls of :class:`~kinac.rt.comm.nccl.NcclComm`: the eager hot path.

Why its own module: a communicator's lifecycle (NCCL init, split, destroy, the world cache:
:mod:`kinac.rt.comm.nccl`) changes rarely and runs once; these methods run on every
collective, and their cost is what issue 13 measured (kinac's eager all-reduce 23 us per call
on the H200 against 7 us for the bare binding). Each collective looks its call layout up in
the communicator's plans (kind, op, tag, each buffer's shape, strides, dtype and device:
:func:`~kinac.rt.comm.nccl_plan.layout_key`, built inline here because a function call costs
as much as the lookup); a hit is the NCCL call on the buffers' addresses and one append of
the plan's log entry; a miss (a new layout, a numpy or DLPack buffer, a wrong buffer) goes
through :func:`~kinac.rt.comm.nccl_plan.make_plan`'s checks. Nothing here synchronizes,
copies or allocates, except the receive buffer when the caller gives none.

Two forms skip even the lookup (:class:`~kinac.rt.comm.nccl_prepared.PreparedCalls`): ``prepare``
binds a collective to its buffers and stream, checked once (each call is then the binding's
call alone, as the bare nccl4py line), and ``run_step`` binds a program step's
collective to its send buffer's layout. The log, appended to by the eager calls and the steps,
is bounded (:data:`LOG_CAP`, :func:`trim_log`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kinac.rt.comm.communicator import Tag
from kinac.rt.comm.nccl_plan import (
    NCCL_TYPE_CODES,
    Plan,
    buffer_of,
    layout_key,
    stream_handle,
)
from kinac.rt.comm.nccl_prepared import PreparedCalls
from kinac.rt.comm.simulator import LogEntry

LOG_CAP = 1 << 16  # log entries a communicator keeps (trim_log): a bound, not a window


class NcclCalls(PreparedCalls):
    """All-reduce, all-gather, reduce-scatter, all-to-all and the device barrier of a NCCL
    communicator (mixed into :class:`~kinac.rt.comm.nccl.NcclComm`, which sets these)."""

    _lib: Any
    _alloc: Callable[..., Any] | None  # (shape, dtype[, stream=]): a stream when not 0
    _plans: dict[tuple[Any, ...], Plan]
    _token: Any
    _token_ptr: int
    axis: str
    size: int
    global_rank: int
    device: int | None
    log: list[LogEntry]
    plans_made: int

    def _live(self) -> Any:  # pragma: no cover - NcclComm's
        raise NotImplementedError

    def host_barrier(self) -> None:  # pragma: no cover - NcclComm's
        raise NotImplementedError

    def _where(self, kind: str, tag: Tag | None) -> str:
        span = tag[1] if tag else ""
        return f"rank {self.global_rank}: {kind} over {self.axis}" + (f" at {span}" if span else "")

    def _plan(
        self, kind: str, send: Any, recv: Any, op: str, tag: Tag | None, stream: int
    ) -> tuple[Plan, Any, int, int]:
        """The checked call (a cache miss): ``(plan, receive buffer, send address, receive
        address)``, the plan cached when the fast path can read both buffers itself."""
        where = self._where(kind, tag)
        plan, got, s, r, cacheable = self._checked_plan(kind, send, recv, op, where, tag, stream)
        if cacheable:
            try:
                self._plans[layout_key(kind, op, tag, send, recv)] = plan
            except TypeError:  # an unhashable tag: checked every call
                pass
        return plan, got, s, r

    def all_reduce(
        self,
        send: Any,
        recv: Any = None,
        op: str = "sum",
        *,
        stream: Any = None,
        tag: Tag | None = None,
    ) -> Any:
        """``recv`` (allocated when None; ``send`` itself: in place) = the reduction of every
        rank's ``send``: one ``ncclAllReduce`` on ``stream``."""
        if type(stream) is not int:  # kinac's Stream: its int handle; else stream_handle
            h = getattr(stream, "handle", None)
            stream = h if type(h) is int else stream_handle(stream)
        try:
            if recv is None:
                p = self._plans[
                    "all-reduce", op, tag, send.shape, send.strides, send.dtype.name, send.device
                ]
                a: Any = self._alloc  # not None: such plans are made with an allocator
                recv = a(p.shape, p.dtype, stream=stream) if stream else a(p.shape, p.dtype)
            else:
                p = self._plans[
                    "all-reduce",
                    op,
                    tag,
                    send.shape,
                    send.strides,
                    send.dtype.name,
                    send.device,
                    recv.shape,
                    recv.strides,
                    recv.dtype.name,
                    recv.device,
                ]
            s, r = send.ptr, recv.ptr
        except (KeyError, AttributeError, TypeError):
            p, recv, s, r = self._plan("all-reduce", send, recv, op, tag, stream)
        self._lib.all_reduce(s, r, p.count, p.code, p.op, p.comm, stream)
        log = self.log
        log.append(p.entry)
        if len(log) > LOG_CAP:
            trim_log(log)
        return recv

    def all_gather(
        self, send: Any, recv: Any = None, *, stream: Any = None, tag: Tag | None = None
    ) -> Any:
        """Every rank's ``send`` concatenated along axis 0 in rank order: one
        ``ncclAllGather``."""
        if type(stream) is not int:  # kinac's Stream: its int handle; else stream_handle
            h = getattr(stream, "handle", None)
            stream = h if type(h) is int else stream_handle(stream)
        try:
            if recv is None:
                p = self._plans[
                    "all-gather", "sum", tag, send.shape, send.strides, send.dtype.name, send.device
                ]
                a: Any = self._alloc  # not None: such plans are made with an allocator
                recv = a(p.shape, p.dtype, stream=stream) if stream else a(p.shape, p.dtype)
            else:
                p = self._plans[
                    "all-gather",
                    "sum",
                    tag,
                    send.shape,
                    send.strides,
                    send.dtype.name,
                    send.device,
                    recv.shape,
                    recv.strides,
                    recv.dtype.name,
                    recv.device,
                ]
            s, r = send.ptr, recv.ptr
        except (KeyError, AttributeError, TypeError):
            p, recv, s, r = self._plan("all-gather", send, recv, "sum", tag, stream)
        self._lib.all_gather(s, r, p.count, p.code, p.comm, stream)
        log = self.log
        log.append(p.entry)
        if len(log) > LOG_CAP:
            trim_log(log)
        return recv

    def reduce_scatter(
        self,
        send: Any,
        recv: Any = None,
        op: str = "sum",
        *,
        stream: Any = None,
        tag: Tag | None = None,
    ) -> Any:
        """Chunk ``rank`` (along axis 0) of the reduction of every rank's ``send``: one
        ``ncclReduceScatter``."""
        if type(stream) is not int:  # kinac's Stream: its int handle; else stream_handle
            h = getattr(stream, "handle", None)
            stream = h if type(h) is int else stream_handle(stream)
        try:
            if recv is None:
                p = self._plans[
                    "reduce-scatter",
                    op,
                    tag,
                    send.shape,
                    send.strides,
                    send.dtype.name,
                    send.device,
                ]
                a: Any = self._alloc  # not None: such plans are made with an allocator
                recv = a(p.shape, p.dtype, stream=stream) if stream else a(p.shape, p.dtype)
            else:
                p = self._plans[
                    "reduce-scatter",
                    op,
                    tag,
                    send.shape,
                    send.strides,
                    send.dtype.name,
                    send.device,
                    recv.shape,
                    recv.strides,
                    recv.dtype.name,
                    recv.device,
                ]
            s, r = send.ptr, recv.ptr
        except (KeyError, AttributeError, TypeError):
            p, recv, s, r = self._plan("reduce-scatter", send, recv, op, tag, stream)
        self._lib.reduce_scatter(s, r, p.count, p.code, p.op, p.comm, stream)
        log = self.log
        log.append(p.entry)
        if len(log) > LOG_CAP:
            trim_log(log)
        return recv

    def all_to_all(
        self, send: Any, recv: Any = None, *, stream: Any = None, tag: Tag | None = None
    ) -> Any:
        """Chunk ``j`` of ``send`` to rank ``j``, rank ``j``'s chunk into chunk ``j`` of
        ``recv``: one grouped ``ncclSend``/``ncclRecv`` pair per peer."""
        if type(stream) is not int:  # kinac's Stream: its int handle; else stream_handle
            h = getattr(stream, "handle", None)
            stream = h if type(h) is int else stream_handle(stream)
        try:
            if recv is None:
                p = self._plans[
                    "all-to-all", "sum", tag, send.shape, send.strides, send.dtype.name, send.device
                ]
                a: Any = self._alloc  # not None: such plans are made with an allocator
                recv = a(p.shape, p.dtype, stream=stream) if stream else a(p.shape, p.dtype)
            else:
                p = self._plans[
                    "all-to-all",
                    "sum",
                    tag,
                    send.shape,
                    send.strides,
                    send.dtype.name,
                    send.device,
                    recv.shape,
                    recv.strides,
                    recv.dtype.name,
                    recv.device,
                ]
            s, r = send.ptr, recv.ptr
        except (KeyError, AttributeError, TypeError):
            p, recv, s, r = self._plan("all-to-all", send, recv, "sum", tag, stream)
        lib, comm, count, code = self._lib, p.comm, p.count, p.code
        lib.group_start()
        try:
            for j, off in p.peers:
                lib.send(s + off, count, code, j, comm, stream)
                lib.recv(r + off, count, code, j, comm, stream)
        finally:
            lib.group_end()
        log = self.log
        log.append(p.entry)
        if len(log) > LOG_CAP:
            trim_log(log)
        return recv

    def _append(self, entry: LogEntry) -> None:
        """One entry on the log, which stays bounded (:func:`trim_log`)."""
        log = self.log
        log.append(entry)
        if len(log) > LOG_CAP:
            trim_log(log)

    def _barrier_token(self, stream: int) -> int:
        """The device barrier's one-element buffer, allocated once, on the first barrier's
        stream (before: always on stream 0, so the pool could hand the barrier memory that
        work still queued on stream 0 was using, with no order between the two streams)."""
        if self._token is None:
            a: Any = self._alloc
            self._token = a((1,), "int32", stream=stream) if stream else a((1,), "int32")
            self._token_ptr, _, _ = buffer_of(self._token)
        return self._token_ptr

    def barrier(self, *, stream: Any = None, tag: Tag | None = None) -> None:
        """The device barrier: a one-element all-reduce on ``stream`` (work queued after it on
        that stream starts once every rank has queued it; capturable). Without an allocator
        (no device), the rendezvous's host barrier."""
        if self._alloc is None:
            self.host_barrier()
            return
        h = stream_handle(stream)
        p = self._barrier_token(h)
        self._lib.all_reduce(p, p, 1, NCCL_TYPE_CODES["int32"], 0, self._live(), h)


def trim_log(log: list[LogEntry]) -> None:
    """Keep the newest ``LOG_CAP // 2`` entries of a communicator's log, in place (the list is
    shared with its splits). Before, a program calling a communicator directly, in a loop,
    grew its log by one entry per call without bound; a caller that reads a window of the log
    (:func:`kinac.rt.comm.distributed.run_nccl`) trims before it starts, so the window has
    ``LOG_CAP // 2`` entries of room."""
    if len(log) > LOG_CAP // 2:
        del log[: len(log) - LOG_CAP // 2]
