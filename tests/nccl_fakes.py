"""A fake of nccl4py's low-level ``nccl.bindings.nccl`` for the CPU tests of the NCCL backend.

Why this shape: the backend (kinac/rt/comm/nccl.py) hands NCCL raw addresses, element counts,
``ncclDataType_t``/``ncclRedOp_t`` codes and stream handles. This fake reads the same raw
addresses (numpy buffers on the host stand in for device memory), so a wrong count, offset,
dtype code or op code gives a wrong result, and computes each collective with the threaded
simulator of kinac.rt.comm (one fake per rank, each holding its simulator rank). Its
``comm_split`` learns the group from every rank's (colour, key), as NCCL does, and checks it
is a mesh axis's group. Every call is recorded in ``calls``.
"""

from __future__ import annotations

import ctypes
from typing import Any

import numpy as np
import pytest

from kinac.rt.comm.nccl import NCCL_OP_CODES, NCCL_TYPE_CODES
from kinac.rt.cuda import driver

CODE_DTYPES = {c: np.dtype("uint16" if n == "bfloat16" else n) for n, c in NCCL_TYPE_CODES.items()}
OP_NAMES = {c: n for n, c in NCCL_OP_CODES.items()}


def array_at(ptr: int, count: int, code: int) -> np.ndarray:
    """``count`` elements of type ``code`` at host address ``ptr`` (a view, writable)."""
    dt = CODE_DTYPES[code]
    if count == 0:
        return np.empty(0, dt)
    buf = (ctypes.c_char * (count * dt.itemsize)).from_address(ptr)
    return np.frombuffer(buf, dtype=dt)  # type: ignore[call-overload]


class Handle:
    """A fake ``ncclComm_t``: the simulator's communicator of the group (None: no data moves)."""

    def __init__(self, sim: Any, members: tuple[int, ...] = ()) -> None:
        self.sim, self.members = sim, members


class FakeLib:
    """One rank's ``nccl.bindings.nccl`` (see the module docstring)."""

    def __init__(self, sim: Any = None, mesh: Any = None, uid: bytes = bytes(range(128))) -> None:
        self.sim, self.mesh, self.uid = sim, mesh, uid
        self.calls: list[tuple[Any, ...]] = []
        self._group: list[tuple[str, int, int, int, int]] | None = None
        self._last_comm: Any = None

    def get_unique_id(self) -> bytes:
        self.calls.append(("get_unique_id",))
        return self.uid

    def comm_init_rank_scalable(self, n: int, rank: int, nids: int, ids: Any, cfg: int) -> Handle:
        self.calls.append(("init", n, rank, nids, bytes(ids), cfg))
        return Handle(self.sim, tuple(range(n)))

    def comm_split(self, comm: Handle, colour: int, key: int, cfg: int) -> Handle:
        self.calls.append(("split", colour, key))
        if comm.sim is None:
            return Handle(None)
        me = comm.sim.global_rank
        every = comm.sim.all_gather(np.array([[colour, key, me]], np.int64))
        members = tuple(
            int(g) for c, k, g in sorted(every.tolist(), key=lambda t: t[1]) if c == colour
        )
        shape, axes = tuple(self.mesh.shape), tuple(self.mesh.axes)
        mine = [int(c) for c in np.unravel_index(me, shape)]
        for i, a in enumerate(axes):  # the axis whose group, ordered along it, this is
            group = []
            for j in range(shape[i]):
                c = list(mine)
                c[i] = j
                group.append(int(np.ravel_multi_index(c, shape)))
            if tuple(group) == members:
                return Handle(comm.sim.sub(a), members)
        raise AssertionError(f"split into {members}: not a mesh axis's group")

    def comm_destroy(self, comm: Handle) -> None:
        self.calls.append(("destroy", comm.members))

    def all_reduce(self, s: int, r: int, n: int, dt: int, op: int, comm: Handle, st: int) -> None:
        self.calls.append(("all_reduce", s, r, n, dt, op, st))
        send = array_at(s, n, dt).copy()
        comm.sim.all_reduce(send, array_at(r, n, dt), OP_NAMES[op])

    def all_gather(self, s: int, r: int, n: int, dt: int, comm: Handle, st: int) -> None:
        self.calls.append(("all_gather", s, r, n, dt, st))
        send = array_at(s, n, dt).copy()
        comm.sim.all_gather(send, array_at(r, n * comm.sim.size, dt))

    def reduce_scatter(
        self, s: int, r: int, n: int, dt: int, op: int, comm: Handle, st: int
    ) -> None:
        self.calls.append(("reduce_scatter", s, r, n, dt, op, st))
        send = array_at(s, n * comm.sim.size, dt).copy()
        comm.sim.reduce_scatter(send, array_at(r, n, dt), OP_NAMES[op])

    def group_start(self) -> None:
        self.calls.append(("group_start",))
        self._group = []

    def send(self, s: int, n: int, dt: int, peer: int, comm: Handle, st: int) -> None:
        self.calls.append(("send", s, n, dt, peer, st))
        self._last_comm = comm
        assert self._group is not None, "send outside a group"
        self._group.append(("send", s, n, dt, peer))

    def recv(self, r: int, n: int, dt: int, peer: int, comm: Handle, st: int) -> None:
        self.calls.append(("recv", r, n, dt, peer, st))
        assert self._group is not None, "recv outside a group"
        self._group.append(("recv", r, n, dt, peer))

    def group_end(self) -> None:
        """The grouped sends and receives, run as one all-to-all: the sends must be the
        consecutive chunks of one buffer in peer order (the receives likewise)."""
        self.calls.append(("group_end",))
        ops, self._group = self._group or [], None
        sends = [o for o in ops if o[0] == "send"]
        recvs = [o for o in ops if o[0] == "recv"]
        if not sends:
            return
        _, s0, n, dt, _ = sends[0]
        step = n * CODE_DTYPES[dt].itemsize
        assert [o[4] for o in sends] == list(range(len(sends))), "sends not in peer order"
        assert [o[1] for o in sends] == [s0 + j * step for j in range(len(sends))]
        r0 = recvs[0][1]
        assert [o[1] for o in recvs] == [r0 + j * step for j in range(len(recvs))]
        comm = self._last_comm
        send = array_at(s0, n * len(sends), dt).copy()
        comm.sim.all_to_all(send, array_at(r0, n * len(recvs), dt))


def no_driver(monkeypatch: pytest.MonkeyPatch) -> None:
    """Any CUDA driver call (a synchronisation, a copy, an allocation) fails the test."""

    def refuse(*_: Any, **__: Any) -> Any:
        raise AssertionError("the CUDA driver was called")

    for name in ("api", "init", "libcuda"):
        monkeypatch.setattr(driver, name, refuse)
