"""A mesh of N devices simulated by N threads of this process: collectives through shared memory.

Why threads: a per-device program is ordinary host code between collectives, and the host
runtime releases the GIL while a compiled entry runs, so N threads run N ranks' segments
concurrently and meet at collectives as NCCL ranks do. Each rank owns its buffers; a collective
copies each rank's send buffer into a shared round (so in-place calls are safe), waits until
every rank of the group has arrived, and computes its own receive buffer from the copies.

NCCL's contract is checked, not assumed: the ranks of a group must call the same collectives in
the same order. A round whose calls differ (kind, reduction, shape or dtype) fails at once; a
rank that waits longer than ``timeout_s`` for a peer (which called a collective over another
axis, or none), or whose peer returned without calling, fails with a report of every rank: what
it waits in and the source span of the step that called it. The first failure stops every rank
(each wait wakes up and unwinds), the threads are daemons and every wait has a timeout, so a
broken program is reported, never a hang.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

import numpy as np

from kinac.errors import KinaError, KinaRuntimeError
from kinac.rt.comm.communicator import (
    CollectivesByKind,
    Tag,
    checked_recv,
    compute,
    dtype_name,
    moved_bytes,
)

T = TypeVar("T")
DEFAULT_TIMEOUT_S = 60.0
_REDUCING = ("all-reduce", "reduce-scatter")


@dataclass
class _Call:
    """One rank's call of a collective: what must match its peers', its data and its source."""

    kind: str
    op: str
    shape: tuple[int, ...]
    dtype: str
    span: str
    rank: int
    data: np.ndarray

    def signature(self) -> tuple[Any, ...]:
        return (self.kind, self.op if self.kind in _REDUCING else "", self.shape, self.dtype)

    def describe(self, axis: str) -> str:
        if self.kind == "barrier":
            what = f"barrier over {axis}"
        else:
            op = f"({self.op})" if self.kind in _REDUCING else ""
            dims = " ".join(map(str, self.shape))
            what = f"{self.kind}{op} over {axis} of {self.dtype}[{dims}]"
        return f"{what} at {self.span}" if self.span else f"{what} (no source span)"


@dataclass
class _Group:
    """The ranks of one communicator (a mesh axis at fixed other coordinates)."""

    axis: str
    members: tuple[int, ...]
    seq: list[int]
    rounds: dict[int, list[_Call | None]] = field(default_factory=dict)
    read: dict[int, int] = field(default_factory=dict)


@dataclass
class _Status:
    state: str  # running, waiting, done, failed
    call: _Call | None = None
    group: _Group | None = None
    seq: int = 0


class _Aborted(KinaRuntimeError):
    """Unwinds a rank after another rank failed (never reported: the first failure is)."""


@dataclass(frozen=True)
class LogEntry:
    """One collective one rank ran: kind, group axis, bytes moved (cost-model count), span,
    and the seconds the rank spent in it (waiting for its peers included)."""

    kind: str
    axis: str
    nbytes: int
    span: str
    seconds: float = 0.0


@dataclass
class CommLog:
    """What each rank ran, for ``kinac run --simulate``'s summary line and for tests."""

    ranks: list[list[LogEntry]] = field(default_factory=list)

    def counts(self, rank: int = 0) -> dict[tuple[str, str], int]:
        """``(kind, axis) -> calls`` on one rank (every rank runs the same SPMD program)."""
        out: dict[tuple[str, str], int] = {}
        for e in self.ranks[rank] if self.ranks else ():
            if e.kind != "barrier":
                out[e.kind, e.axis] = out.get((e.kind, e.axis), 0) + 1
        return out

    def bytes_per_device(self, rank: int = 0) -> int:
        return sum(e.nbytes for e in self.ranks[rank]) if self.ranks else 0

    def seconds_in_collectives(self) -> float:
        """The most any rank spent in collectives (waiting for peers included)."""
        return max((sum(e.seconds for e in r) for r in self.ranks), default=0.0)

    def summary(self) -> str:
        """``2 all-reduce over tp; 1,048,576 bytes moved per device (4,194,304 in all)``."""
        counts = self.counts()
        what = ", ".join(f"{n} {k} over {a}" for (k, a), n in sorted(counts.items())) or "none"
        total = sum(sum(e.nbytes for e in r) for r in self.ranks)
        return (
            f"{sum(counts.values())} collectives per device ({what}); "
            f"{self.bytes_per_device():,} bytes moved per device ({total:,} in all)"
        )


class _World:
    """What the ranks share: the mesh, the groups, every rank's status, the first failure."""

    def __init__(self, shape: tuple[int, ...], axes: tuple[str, ...], timeout_s: float) -> None:
        self.shape, self.axes, self.timeout_s = shape, axes, timeout_s
        self.size = int(np.prod(shape, dtype=np.int64))
        self.cond = threading.Condition()
        self.status = [_Status("running") for _ in range(self.size)]
        self.groups: dict[tuple[Any, ...], _Group] = {}
        self.failure: BaseException | None = None
        self.failed_rank = -1
        self.comm_failure = False  # the failure is a broken collective order, not a rank's error
        self.log: list[list[LogEntry]] = [[] for _ in range(self.size)]

    def group(self, rank: int, axes: tuple[str, ...]) -> _Group:
        """The group of ``rank`` over ``axes``: the ranks sharing its other coordinates, in
        row-major order of their coordinates along ``axes`` (their local ranks)."""
        coords = np.unravel_index(rank, self.shape)
        keep = tuple(i for i, a in enumerate(self.axes) if a not in axes)
        key = (axes, tuple(int(coords[i]) for i in keep))
        with self.cond:
            g = self.groups.get(key)
            if g is None:
                members = tuple(
                    r
                    for r in range(self.size)
                    if all(int(np.unravel_index(r, self.shape)[i]) == int(coords[i]) for i in keep)
                )
                g = _Group(",".join(axes), members, [0] * len(members))
                self.groups[key] = g
            return g

    def _snapshot(self) -> str:
        """One line per rank: what it waits in (and for whom), or that it returned."""
        lines = []
        for r, st in enumerate(self.status):
            if st.state == "waiting" and st.call is not None and st.group is not None:
                g = st.group
                calls = g.rounds.get(st.seq, [])
                missing = [m for c, m in zip(calls, g.members, strict=False) if c is None]
                lines.append(
                    f"  rank {r}: waits in {st.call.describe(g.axis)} (its call #{st.seq + 1} "
                    f"over {g.axis}) for rank{'s' * (len(missing) > 1)} "
                    f"{' '.join(map(str, missing))}"
                )
            elif st.state == "done":
                lines.append(f"  rank {r}: returned (calls nothing more)")
            elif st.state == "failed":
                lines.append(f"  rank {r}: failed")
            else:
                lines.append(f"  rank {r}: running, in no collective")
        return "\n".join(lines)

    def _fail(self, rank: int, headline: str, snapshot: bool = True) -> KinaRuntimeError:
        """The error ``rank`` raises; the first one becomes the simulation's failure."""
        contract = "every rank must call the same collectives in the same order (NCCL's contract)"
        where = f"; the ranks of mesh {list(self.shape)} ({', '.join(self.axes)}):\n"
        err = KinaRuntimeError(
            f"{headline}\n{contract}" + (where + self._snapshot() if snapshot else "")
        )
        if self.failure is None:
            self.failure, self.failed_rank, self.comm_failure = err, rank, True
        self.cond.notify_all()
        return err

    def exchange(self, group: _Group, rank: int, call: _Call) -> list[np.ndarray]:
        """Deposit ``call`` in the group's next round, wait for every member, check that
        they match, and return every member's send (in local rank order)."""
        lr = group.members.index(rank)
        n = len(group.members)
        with self.cond:
            seq = group.seq[lr]
            group.seq[lr] += 1
            calls = group.rounds.setdefault(seq, [None] * n)
            calls[lr] = call
            self.status[rank] = _Status("waiting", call, group, seq)
            self.cond.notify_all()
            deadline = time.monotonic() + self.timeout_s
            while True:
                if self.failure is not None:
                    raise _Aborted(f"rank {rank} stopped: rank {self.failed_rank} failed")
                missing = [m for c, m in zip(calls, group.members, strict=True) if c is None]
                if not missing:
                    break
                # every missing peer returned: none of them can call any more (reported at
                # once; a peer still running or waiting elsewhere is given the timeout)
                gone = [m for m in missing if self.status[m].state == "done"]
                gone = gone if len(gone) == len(missing) else []
                here = call.describe(group.axis)
                if gone:
                    who = ", ".join(map(str, gone))
                    raise self._fail(
                        rank,
                        f"collective mismatch: rank {rank} waits in {here}, but rank{'s' * (len(gone) > 1)} "
                        f"{who} returned without calling it",
                    )
                left = deadline - time.monotonic()
                if left <= 0:
                    who = ", ".join(map(str, missing))
                    raise self._fail(
                        rank,
                        f"collective timeout: rank {rank} waited {self.timeout_s:g} s in {here} "
                        f"for rank{'s' * (len(missing) > 1)} {who}",
                    )
                self.cond.wait(left)
            done = [c for c in calls if c is not None]
            sigs = [c.signature() for c in done]
            if len(set(sigs)) > 1:
                most = max(sigs, key=sigs.count)
                raise self._fail(
                    rank,
                    f"collective mismatch over {group.axis} (ranks "
                    f"{' '.join(map(str, group.members))}): their call #{seq + 1} differs:\n"
                    + "\n".join(
                        f"  rank {c.rank}: {c.describe(group.axis)}"
                        + ("" if sig == most else "  <- differs")
                        for c, sig in zip(done, sigs, strict=True)
                    ),
                    snapshot=False,
                )
            self.status[rank] = _Status("running")
            self.cond.notify_all()
            group.read[seq] = group.read.get(seq, 0) + 1
            if group.read[seq] == n:
                del group.rounds[seq], group.read[seq]
        return [c.data for c in done]

    def finish(self, rank: int, error: BaseException | None) -> None:
        with self.cond:
            self.status[rank] = _Status("done" if error is None else "failed")
            if error is not None and self.failure is None and not isinstance(error, _Aborted):
                self.failure, self.failed_rank = error, rank
            self.cond.notify_all()


class SimComm(CollectivesByKind):
    """One simulated rank's communicator over ``axes`` of the mesh (the world: all of them)."""

    def __init__(self, world: _World, rank: int, axes: tuple[str, ...]) -> None:
        self._world = world
        self._group = world.group(rank, axes)
        self._subs: dict[str, SimComm] = {}
        self.global_rank = rank
        self.axes = axes
        self.axis = ",".join(axes)
        self.rank = self._group.members.index(rank)
        self.size = len(self._group.members)

    def sub(self, axis: str) -> SimComm:
        """The ranks sharing every mesh coordinate but ``axis`` (``ncclCommSplit``); the same
        object on every call, so its calls keep one order."""
        if axis not in self.axes:
            raise KinaRuntimeError(
                f"no mesh axis {axis!r} in this communicator (its axes: {self.axis})"
            )
        if axis not in self._subs:
            axes = (axis,)
            self._subs[axis] = (
                self if axes == self.axes else SimComm(self._world, self.global_rank, axes)
            )
        return self._subs[axis]

    def _run(
        self, kind: str, send: Any, recv: np.ndarray | None, op: str, tag: Tag | None
    ) -> np.ndarray:
        send = np.asarray(send)
        span, recv = checked_recv(kind, send, recv, op, tag, self.size, self.global_rank, self.axis)
        t0 = time.perf_counter()
        call = _Call(
            kind, op, tuple(send.shape), dtype_name(send), span, self.global_rank, np.array(send)
        )
        sends = self._world.exchange(self._group, self.global_rank, call)
        recv[...] = compute(kind, sends, self.rank, op)
        took = time.perf_counter() - t0
        self._world.log[self.global_rank].append(
            LogEntry(kind, self.axis, moved_bytes(kind, send, recv), span, took)
        )
        return recv

    def barrier(self, *, tag: Tag | None = None) -> None:
        empty = np.empty((0,), dtype=np.uint8)
        call = _Call("barrier", "", (), "", tag[1] if tag else "", self.global_rank, empty)
        self._world.exchange(self._group, self.global_rank, call)

    def __repr__(self) -> str:
        return (
            f"<SimComm rank {self.rank}/{self.size} over {self.axis} (global {self.global_rank})>"
        )


def simulate(
    mesh: Any,
    fn: Callable[[SimComm], T],
    timeout_s: float = DEFAULT_TIMEOUT_S,
    log: CommLog | None = None,
) -> list[T]:
    """Run ``fn(comm)`` on every rank of ``mesh`` (anything with ``shape`` and ``axes``, e.g.
    ``kinac.artifacts.sharded.MeshSpec``), one daemon thread each; the results in rank order.

    The first failure of any rank (a broken collective order, an error in ``fn``) is raised
    here after the other ranks stop; ``log`` receives what each rank ran."""
    shape = tuple(int(s) for s in mesh.shape)
    axes = tuple(str(a) for a in mesh.axes)
    if len(shape) != len(axes) or not shape or any(s < 1 for s in shape):
        raise KinaRuntimeError(f"a mesh needs one positive size per axis, got {shape} {axes}")
    world = _World(shape, axes, timeout_s)
    results: list[Any] = [None] * world.size

    def body(rank: int) -> None:
        try:
            results[rank] = fn(SimComm(world, rank, axes))
        except BaseException as e:  # noqa: BLE001 - reported by the caller's thread
            world.finish(rank, e)
        else:
            world.finish(rank, None)

    threads = [
        threading.Thread(target=body, args=(r,), daemon=True, name=f"kinac-sim-rank-{r}")
        for r in range(world.size)
    ]
    for t in threads:
        t.start()
    with world.cond:
        failed_at = None
        while any(s.state not in ("done", "failed") for s in world.status):
            if world.failure is not None:
                failed_at = failed_at or time.monotonic()
                if time.monotonic() - failed_at > timeout_s:
                    break  # a rank still computes: leave its daemon thread behind
            world.cond.wait(0.25)
    if log is not None:
        log.ranks = [list(r) for r in world.log]
    if world.failure is not None:
        err = world.failure
        if world.comm_failure or str(err).startswith("rank "):
            raise err
        # a rank's own error (a runtime check in a segment): its message names the rank
        where = f"simulated rank {world.failed_rank} of mesh {list(shape)}"
        if isinstance(err, KinaError):
            try:
                named = type(err)(f"{where}: {err}")
            except TypeError:
                named = None
            if named is not None:
                raise named from err
        err.add_note(f"(on {where})")
        raise err
    return results


def ranks_of(mesh: Any) -> Sequence[tuple[int, ...]]:
    """Every rank's mesh coordinates, in rank order (row-major)."""
    shape = tuple(int(s) for s in mesh.shape)
    return [tuple(int(c) for c in np.unravel_index(r, shape)) for r in range(int(np.prod(shape)))]
