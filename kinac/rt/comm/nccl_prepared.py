"""Prepared collectives: every check done once when the call is bound, each call NCCL's alone.

Why: issue 13's goal is an eager collective within 10% of NCCL's own call, and on one H200 the
per-layout cache (:mod:`kinac.rt.comm.nccl_plan`) still left ~1 us of Python per call at 1-4
MiB (6.8 against 5.8 us): the key tuple of eleven attribute reads, its hash, the dict lookup,
the stream's type test, the log append. All of it depends only on what the caller already
knows before the loop: the buffers, the stream, the communicator. So a caller who calls the
same collective on the same buffers many times (a training loop's gradient buffer, a
benchmark, a captured graph's body) binds it once:

    ar = comm.prepare("all-reduce", x, r, "sum", stream=s)    # shape, dtype, device, stream,
    for _ in range(n):                                         # communicator, aliasing: checked
        ar()                                                   # one ncclAllReduce, nothing else

:class:`Prepared` is a :class:`functools.partial` of the binding's own function over the
precomputed integers (addresses, count, type and op codes, the communicator handle, the stream
handle), so a call runs no Python frame of kinac's at all: it is the bare nccl4py call line,
argument for argument. It keeps the buffers alive; a destroyed communicator turns it into a
call that raises. It appends no log entry (a loop of calls would grow the log without bound):
``p.entry`` is what one call moves, for a caller that keeps a log.

:class:`LayoutCall` is the same for a sharded per-device program's collective step
(:mod:`kinac.rt.comm.device_run`): the step's send buffer is a new segment output each run, so
the call is bound to the step's *layout* (checked once, at the first run) and each run pays a
comparison of the buffer's shape, strides, dtype and device with it, a receive buffer from the
pool and the NCCL call; a buffer of another layout goes through the checked path.
"""

from __future__ import annotations

import functools
import weakref
from collections.abc import Callable
from typing import Any

from kinac.errors import KinaRuntimeError
from kinac.rt.comm.communicator import Tag
from kinac.rt.comm.nccl_plan import NCCL_TYPE_CODES, Plan, direct, make_plan, stream_handle
from kinac.rt.comm.simulator import LogEntry

KINDS = ("all-reduce", "all-gather", "reduce-scatter", "all-to-all", "barrier")
MAX_STEPS = 4096  # program steps' layout calls a communicator keeps (then it starts afresh)


def kind_name(kind: str, where: str) -> str:
    """``all_reduce`` or ``all-reduce`` -> ``all-reduce``; an unknown kind is refused."""
    name = str(kind).replace("_", "-")
    if name not in KINDS:
        raise KinaRuntimeError(
            f"{where}: no collective {kind!r} to prepare (one of {', '.join(KINDS)})"
        )
    return name


def checked_stream(stream: Any, where: str) -> int:
    """The ``cudaStream_t`` handle of ``stream`` as an int, or a clear error when it is none."""
    try:
        h = stream_handle(stream)
    except (TypeError, ValueError):
        raise KinaRuntimeError(
            f"{where}: {type(stream).__name__} is not a CUDA stream (give a kinac Stream, an "
            "object with __cuda_stream__, or a handle)"
        ) from None
    if type(h) is not int or h < 0:
        raise KinaRuntimeError(f"{where}: {h!r} is not a CUDA stream handle")
    return h


def _dead(why: str, error: type[KinaRuntimeError] = KinaRuntimeError) -> Callable[..., None]:
    def dead(*_: Any) -> None:
        raise error(why)

    return dead


class Prepared(functools.partial):  # type: ignore[type-arg]
    """One collective on bound buffers and stream: calling it is the NCCL call alone.

    Attributes: ``kind``, ``send`` and ``recv`` (the buffers, kept alive), ``stream`` (the
    handle), ``entry`` (the :class:`~kinac.rt.comm.simulator.LogEntry` one call would log)."""

    kind: str
    send: Any
    recv: Any
    stream: int
    entry: LogEntry | None

    def disable(self, why: str, error: type[KinaRuntimeError] = KinaRuntimeError) -> None:
        """Every later call raises ``error(why)`` (the communicator was destroyed or aborted:
        its handle is freed, and NCCL on a freed handle is undefined)."""
        self.__setstate__((_dead(why, error), (), {}, self.__dict__))  # type: ignore[attr-defined]


def _group(
    start: Callable[[], Any],
    end: Callable[[], Any],
    send: Callable[..., Any],
    recv: Callable[..., Any],
    pairs: tuple[tuple[tuple[Any, ...], tuple[Any, ...]], ...],
) -> None:
    """All-to-all's grouped ``send``/``recv`` pairs: the binding's functions looked up and
    every argument computed beforehand (looking them up per call doubled its host cost)."""
    start()
    try:
        for s, r in pairs:
            send(*s)
            recv(*r)
    finally:
        end()


def group_call(lib: Any, pairs: Any) -> tuple[Any, ...]:
    """The arguments of :func:`_group` for ``lib``."""
    return (lib.group_start, lib.group_end, lib.send, lib.recv, pairs)


def a2a_pairs(
    plan: Plan, s: int, r: int, stream: int
) -> tuple[tuple[tuple[Any, ...], tuple[Any, ...]], ...]:
    """Per peer, the arguments of its ``ncclSend`` and ``ncclRecv``."""
    c, code, comm = plan.count, plan.code, plan.comm
    return tuple(
        ((s + off, c, code, j, comm, stream), (r + off, c, code, j, comm, stream))
        for j, off in plan.peers
    )


def bound(lib: Any, kind: str, plan: Plan, s: int, r: int, stream: int) -> Prepared:
    """The :class:`Prepared` call of ``plan`` on addresses ``s``/``r`` and ``stream``."""
    if kind == "all-reduce":
        return Prepared(lib.all_reduce, s, r, plan.count, plan.code, plan.op, plan.comm, stream)
    if kind == "all-gather":
        return Prepared(lib.all_gather, s, r, plan.count, plan.code, plan.comm, stream)
    if kind == "reduce-scatter":
        args = (s, r, plan.count, plan.code, plan.op, plan.comm, stream)
        return Prepared(lib.reduce_scatter, *args)
    return Prepared(_group, *group_call(lib, a2a_pairs(plan, s, r, stream)))


def bound_barrier(lib: Any, token: int, comm: Any, stream: int) -> Prepared:
    """The device barrier (a one-element in-place int32 all-reduce) bound to ``stream``."""
    return Prepared(lib.all_reduce, token, token, 1, NCCL_TYPE_CODES["int32"], 0, comm, stream)


class LayoutCall:
    """A program step's collective bound to its send buffer's layout (see the module
    docstring): ``call(send) -> recv``, allocated on the bound stream."""

    __slots__ = ("kind", "plan", "layout", "stream", "step", "_fn", "_tail", "_alloc", "_log")
    # _log: the communicator's bounded append (NcclCalls._append)

    def __init__(
        self,
        lib: Any,
        kind: str,
        plan: Plan,
        send: Any,
        stream: int,
        alloc: Callable[..., Any],
        log: Callable[[LogEntry], None],
        step: Any = None,
    ) -> None:
        self.kind, self.plan, self.stream, self.step = kind, plan, stream, step
        self.layout = (send.shape, send.strides, send.dtype, send.device)
        self._alloc, self._log = alloc, log
        self._fn: Any = None
        self._tail: tuple[Any, ...] = ()
        if kind == "all-reduce":
            self._fn, self._tail = lib.all_reduce, (plan.count, plan.code, plan.op, plan.comm)
        elif kind == "all-gather":
            self._fn, self._tail = lib.all_gather, (plan.count, plan.code, plan.comm)
        elif kind == "reduce-scatter":
            self._fn = lib.reduce_scatter
            self._tail = (plan.count, plan.code, plan.op, plan.comm)
        else:
            self._fn, self._tail = lib, ()  # all-to-all: the pairs depend on the addresses

    def matches(self, send: Any) -> bool:
        """Whether ``send`` has the layout checked at bind time."""
        try:
            return (send.shape, send.strides, send.dtype, send.device) == self.layout
        except AttributeError:
            return False

    def __call__(self, send: Any) -> Any:
        """The receive buffer of this step's collective on ``send`` (of the bound layout:
        the caller checks :meth:`matches`)."""
        p, st = self.plan, self.stream
        recv = self._alloc(p.shape, p.dtype, stream=st) if st else self._alloc(p.shape, p.dtype)
        if self._tail:
            self._fn(send.ptr, recv.ptr, *self._tail, st)
        else:
            _group(*group_call(self._fn, a2a_pairs(p, send.ptr, recv.ptr, st)))
        self._log(p.entry)
        return recv


class PreparedCalls:
    """:meth:`prepare` and :meth:`run_step` of :class:`~kinac.rt.comm.nccl.NcclComm` (mixed
    into :class:`~kinac.rt.comm.nccl_calls.NcclCalls`, which sets these)."""

    _lib: Any
    _alloc: Callable[..., Any] | None
    _prepared: weakref.WeakSet[Prepared]
    _steps: dict[int, LayoutCall]
    axis: str
    size: int
    device: int | None
    log: list[LogEntry]
    plans_made: int

    def _live(self) -> Any:  # pragma: no cover - NcclComm's
        raise NotImplementedError

    def _where(self, kind: str, tag: Tag | None) -> str:  # pragma: no cover - NcclCalls'
        raise NotImplementedError

    def _append(self, entry: LogEntry) -> None:  # pragma: no cover - NcclCalls'
        raise NotImplementedError

    def _barrier_token(self, stream: int) -> int:  # pragma: no cover - NcclCalls'
        raise NotImplementedError

    def host_barrier(self) -> None:  # pragma: no cover - NcclComm's
        raise NotImplementedError

    def _checked_plan(
        self, kind: str, send: Any, recv: Any, op: str, where: str, tag: Tag | None, stream: int
    ) -> tuple[Plan, Any, int, int, bool]:
        """:func:`~kinac.rt.comm.nccl_plan.make_plan` over this communicator (counted in
        ``plans_made``): ``(plan, receive buffer, send address, receive address, cacheable)``.
        One place for the checked path of :meth:`prepare`, :meth:`run_step`'s first run and
        the eager calls' cache miss; never on a per-call fast path."""
        got = make_plan(
            kind,
            send,
            recv,
            op,
            where=where,
            size=self.size,
            comm=self._live(),
            axis=self.axis,
            span=tag[1] if tag else "",
            alloc=self._alloc,
            device=self.device,
            stream=stream,
        )
        self.plans_made += 1
        return got

    def prepare(
        self,
        kind: str,
        send: Any = None,
        recv: Any = None,
        op: str = "sum",
        *,
        stream: Any = None,
        tag: Tag | None = None,
    ) -> Prepared:
        """``kind`` (``all-reduce``, ``all-gather``, ``reduce-scatter``, ``all-to-all``,
        ``barrier``) bound to these buffers and ``stream``, checked now (shapes, dtypes, the
        buffers' GPU, contiguity, their overlap, the stream, the communicator being alive):
        calling the result is the NCCL call alone (:mod:`kinac.rt.comm.nccl_prepared`). A
        ``recv`` of None is allocated now, once (``p.recv``)."""
        name = kind_name(kind, self._where(f"prepared {kind}", tag))
        where = self._where(f"prepared {name}", tag)
        comm = self._live()
        h = checked_stream(stream, where)
        if name == "barrier":
            if send is not None or recv is not None:
                raise KinaRuntimeError(f"{where}: a barrier takes no buffers")
            if self._alloc is None:  # no device: the rendezvous's barrier
                p = Prepared(self.host_barrier)
            else:
                p = bound_barrier(self._lib, self._barrier_token(h), comm, h)
            entry = None
        else:
            if send is None:
                raise KinaRuntimeError(f"{where}: no send buffer")
            if name in ("all-gather", "all-to-all") and op != "sum":
                raise KinaRuntimeError(f"{where}: {name} takes no reduction (got {op!r})")
            plan, recv, s, r, _ = self._checked_plan(name, send, recv, op, where, tag, h)
            p = bound(self._lib, name, plan, s, r, h)
            entry = plan.entry
        p.kind, p.send, p.recv, p.stream, p.entry = name, send, recv, h, entry
        self._prepared.add(p)
        return p

    def run_step(
        self, kind: str, send: Any, op: str, stream: int, tag: Tag | None, key: Any
    ) -> Any:
        """A per-device program step's collective on ``send`` (receive allocated), through
        the step's :class:`~kinac.rt.comm.nccl_prepared.LayoutCall` (``key``: the step
        record): checked at its first run, later runs of the same layout pay a layout
        comparison, the allocation and the NCCL call. Numpy buffers (the CPU tests' fake
        device) take the eager path."""
        call = self._steps.get(id(key))
        if call is not None and call.step is key and call.stream == stream and call.matches(send):
            return call(send)
        if not direct(send):
            method = getattr(self, kind.replace("-", "_"))
            kw = {"op": op} if kind in ("all-reduce", "reduce-scatter") else {}
            return method(send, stream=stream, tag=tag, **kw)
        where = self._where(kind, tag)
        plan, recv, s, r, _ = self._checked_plan(kind, send, None, op, where, tag, stream)
        alloc: Any = self._alloc  # not None: make_plan allocated the receive buffer with it
        if len(self._steps) >= MAX_STEPS:  # each holds its step record (so its id stays
            self._steps.clear()  # unique): programs built and dropped must not pile up
        self._steps[id(key)] = LayoutCall(
            self._lib, kind, plan, send, stream, alloc, self._append, key
        )
        bound(self._lib, kind, plan, s, r, stream)()
        self._append(plan.entry)
        return recv
