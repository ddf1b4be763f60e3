"""A process-group :class:`~kinac.rt.comm.communicator.Communicator` for CPU ranks: collectives
through the rendezvous relay on the master.

Why: ``kinac launch -n N -- kinac run WS ENTRY --distributed`` runs a sharded entry's
per-device program in N real processes (each its own host runtime, as NCCL ranks are their own
processes) without a GPU: the launch, the environment, the unique-id exchange and the failure
handling are then exercised by the same code a NCCL run uses, and the result is checked
against ``--simulate N``. Host arrays only; this is not a fast transport (every send goes to
the master and back), and NCCL replaces it on GPUs.

Semantics are the simulator's, exactly: the master gathers every member's send and computes
each member's receive with :func:`kinac.rt.comm.communicator.compute` (reductions in rank
order, f16/bf16 accumulated in f32 and rounded once), so a distributed CPU run is
bit-identical to ``--simulate``. The contract checks are the simulator's too (a round whose
calls differ is reported with every rank's call and span; a peer that returned without
calling; a timeout naming the missing ranks), plus what only processes have: a rank that died.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from kinac.errors import KinaRuntimeError
from kinac.rt.comm.communicator import (
    CollectivesByKind,
    Tag,
    checked_recv,
    compute,
    dtype_name,
    moved_bytes,
)
from kinac.rt.comm.rendezvous import Combine, DistEnv, RendezvousClient, join
from kinac.rt.comm.simulator import LogEntry

_KINDS = ("all-reduce", "all-gather", "reduce-scatter", "all-to-all")


def _combine(heads: list[dict[str, Any]], datas: list[bytes]) -> list[tuple[dict[str, Any], bytes]]:
    """On the master: every member's receive from every member's send (the simulator's rule)."""
    h0 = heads[0]
    dt = np.dtype(str(h0["np"]))
    shape = tuple(int(s) for s in h0["shape"])
    sends = [np.frombuffer(d, dtype=dt).reshape(shape) for d in datas]
    out = []
    for lr in range(len(heads)):
        got = np.ascontiguousarray(compute(str(h0["kind"]), sends, lr, str(h0.get("op", "sum"))))
        out.append(({"ok": True}, got.tobytes()))
    return out


COMBINE: dict[str, Combine] = dict.fromkeys(_KINDS, _combine)


class TcpComm(CollectivesByKind):
    """One process's communicator over ``axes`` of a mesh whose ranks are processes."""

    def __init__(
        self,
        client: RendezvousClient,
        shape: tuple[int, ...],
        axes: tuple[str, ...],
        sub_axes: tuple[str, ...] | None = None,
        log: list[LogEntry] | None = None,
    ) -> None:
        n = int(np.prod(shape, dtype=np.int64))
        if n != client.size:
            raise KinaRuntimeError(
                f"mesh {list(shape)} ({', '.join(axes)}) has {n} devices but WORLD_SIZE is "
                f"{client.size}"
            )
        self.client, self.shape, self.mesh_axes = client, shape, axes
        self.axes = axes if sub_axes is None else sub_axes
        self.axis = ",".join(self.axes)
        self.global_rank = client.rank
        coords = np.unravel_index(client.rank, shape)
        keep = [i for i, a in enumerate(axes) if a not in self.axes]
        self.members = tuple(
            r
            for r in range(n)
            if all(int(np.unravel_index(r, shape)[i]) == int(coords[i]) for i in keep)
        )
        self.group = f"{self.axis}@" + ",".join(str(int(coords[i])) for i in keep)
        self.rank = self.members.index(client.rank)
        self.size = len(self.members)
        self.log: list[LogEntry] = [] if log is None else log
        self._subs: dict[str, TcpComm] = {}

    def sub(self, axis: str) -> TcpComm:
        """The ranks sharing every mesh coordinate but ``axis`` (``ncclCommSplit``)."""
        if axis not in self.axes:
            raise KinaRuntimeError(
                f"no mesh axis {axis!r} in this communicator (its axes: {self.axis})"
            )
        if (axis,) == self.axes:
            return self
        if axis not in self._subs:
            self._subs[axis] = TcpComm(self.client, self.shape, self.mesh_axes, (axis,), self.log)
        return self._subs[axis]

    def _run(
        self, kind: str, send: Any, recv: np.ndarray | None, op: str, tag: Tag | None
    ) -> np.ndarray:
        # rank 0 kept: ascontiguousarray makes a 0-d send [1], which a 0-d receive buffer
        # (a rank-0 weight's gradient, all-reduced in place by a launched trainer) refused
        send = np.ascontiguousarray(send).reshape(np.shape(send))
        span, recv = checked_recv(kind, send, recv, op, tag, self.size, self.global_rank, self.axis)
        t0 = time.perf_counter()
        head = {
            "kind": kind,
            "op": op,
            "axis": self.axis,
            "shape": list(send.shape),
            "dtype": dtype_name(send),
            "np": send.dtype.str,
            "span": span,
        }
        nbytes = moved_bytes(kind, send, recv)
        _, got = self.client.round(self.group, self.members, head, send.tobytes())
        recv[...] = np.frombuffer(got, dtype=send.dtype).reshape(recv.shape)
        self.log.append(LogEntry(kind, self.axis, nbytes, span, time.perf_counter() - t0))
        return recv

    def barrier(self, *, tag: Tag | None = None) -> None:
        span = tag[1] if tag else ""
        head = {"kind": "barrier", "axis": self.axis, "span": span}
        self.client.round(self.group, self.members, head)

    def __repr__(self) -> str:
        return (
            f"<TcpComm rank {self.rank}/{self.size} over {self.axis} (global {self.global_rank})>"
        )


_CLIENT: RendezvousClient | None = None


def process_client(env: DistEnv | None = None) -> RendezvousClient:
    """This process's rendezvous connection, made once (every mesh's communicators share it;
    closed at exit, saying goodbye so that a clean exit is not reported as a death)."""
    global _CLIENT
    if _CLIENT is None:
        import atexit

        env = env or DistEnv.from_env()
        if env is None:
            raise KinaRuntimeError("not launched: WORLD_SIZE is not set")
        _CLIENT = join(env, combine=COMBINE)
        atexit.register(close_process_client)
    return _CLIENT


def close_process_client() -> None:
    global _CLIENT
    if _CLIENT is not None:
        client, _CLIENT = _CLIENT, None
        client.close()


def world(shape: tuple[int, ...], axes: tuple[str, ...], env: DistEnv | None = None) -> TcpComm:
    """The world communicator of a mesh over this process group."""
    return TcpComm(process_client(env), shape, axes)
