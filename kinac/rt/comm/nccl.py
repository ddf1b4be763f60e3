"""The :class:`~kinac.rt.comm.communicator.Communicator` over NCCL, through nccl4py.

Why nccl4py (``pip install 'kinac[cu13]'``): the issue asks for the engine everyone trusts
(NCCL) through a maintained binding, no home-made transport. One process per GPU; rank 0 makes
NCCL's unique id and the rendezvous (:mod:`kinac.rt.comm.rendezvous`) hands it to every rank;
``ncclCommInitRank`` then builds the world communicator, once per mesh (cached), and
``sub(axis)`` is ``ncclCommSplit`` with the rank's other coordinates as colour and its
coordinate along the axis as key (cached too: every later call of the same axis reuses it).
Collectives are enqueued on the caller's stream with the device buffers themselves (DLPack or
CUDA array interface objects: kinac's CUDA tensors), so an entry's collectives are captured in
its CUDA graph like its kernels, and kinac adds no copy.

nccl4py is imported lazily here and only here (``tests/test_layers.py``: one module per heavy
dependency). NOT RUN ON A GPU YET: no machine with several GPUs was lent while this was
written; the names used from nccl4py (``nccl.core.Communicator.init/split/allreduce/
allgather/reduce_scatter/alltoall``, ``get_unique_id``, ``NcclRedOp``) are those of its
documentation, and the tests drive this module with a fake ``nccl.core`` (docs/distributed.md).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from kinac.errors import KinaRuntimeError
from kinac.rt.comm.communicator import REDUCE_OPS, Tag, recv_shape

# Kina dtype -> ncclDataType_t name (NCCL has no bool: it travels as uint8)
NCCL_DTYPES = {
    "f64": "float64",
    "f32": "float32",
    "f16": "float16",
    "bf16": "bfloat16",
    "i64": "int64",
    "i32": "int32",
    "i8": "int8",
    "u8": "uint8",
    "bool": "uint8",
}
# our reduction name -> ncclRedOp_t member
NCCL_OPS = {"sum": "SUM", "prod": "PROD", "max": "MAX", "min": "MIN", "avg": "AVG"}
assert tuple(NCCL_OPS) == REDUCE_OPS


def nccl_core() -> Any:
    """nccl4py's ``nccl.core``, or a clear error saying how to get it."""
    try:
        import nccl.core as core  # type: ignore[import-not-found]
    except ImportError:
        raise KinaRuntimeError(
            "the NCCL backend needs nccl4py: pip install 'kinac[cu13]' (nccl4py[cu13]) on a "
            "machine with NVIDIA GPUs"
        ) from None
    return core


def _dtype_of(buf: Any) -> str:
    """The Kina dtype name of a buffer (kinac CUDA tensor, numpy, anything with ``dtype``)."""
    name = getattr(getattr(buf, "dtype", None), "name", str(getattr(buf, "dtype", "?")))
    return {
        "float64": "f64",
        "float32": "f32",
        "float16": "f16",
        "bfloat16": "bf16",
        "uint16": "bf16",  # the host convention: uint16 means bf16
        "int64": "i64",
        "int32": "i32",
        "int8": "i8",
        "uint8": "u8",
        "bool": "bool",
    }.get(name, name)


def uid_to_bytes(uid: Any) -> bytes:
    """NCCL's unique id as its 128 bytes, whatever nccl4py wraps it in."""
    for attr in ("as_bytes", "to_bytes", "tobytes"):
        f = getattr(uid, attr, None)
        if callable(f):
            return bytes(f())
    return bytes(uid)


def uid_from_bytes(core: Any, data: bytes) -> Any:
    """The unique id object nccl4py's ``Communicator.init`` takes, from the 128 bytes."""
    cls = getattr(core, "UniqueId", None)
    for attr in ("from_bytes", "frombytes"):
        f = getattr(cls, attr, None)
        if callable(f):
            return f(data)
    return cls(data) if cls is not None else data


class NcclComm:
    """One GPU rank's communicator over ``axes`` of a mesh (the world: all of them)."""

    def __init__(
        self,
        core: Any,
        comm: Any,
        shape: tuple[int, ...],
        mesh_axes: tuple[str, ...],
        axes: tuple[str, ...],
        global_rank: int,
        alloc: Callable[[tuple[int, ...], Any], Any] | None = None,
        barrier: Callable[[], None] | None = None,
    ) -> None:
        self._core, self._comm = core, comm
        self.shape, self.mesh_axes, self.axes = shape, mesh_axes, axes
        self.axis = ",".join(axes)
        self.global_rank = global_rank
        coords = [int(c) for c in np.unravel_index(global_rank, shape)]
        along = [i for i, a in enumerate(mesh_axes) if a in axes]
        self.rank = int(np.ravel_multi_index([coords[i] for i in along], [shape[i] for i in along]))
        self.size = int(np.prod([shape[i] for i in along], dtype=np.int64))
        self._alloc, self._barrier = alloc, barrier
        self._subs: dict[str, NcclComm] = {}

    def split_key(self, axis: str) -> tuple[int, int]:
        """``(colour, key)`` of ``ncclCommSplit`` for ``axis``: the ranks sharing every other
        coordinate share a colour (their row-major index); the key orders them along the axis."""
        coords = [int(c) for c in np.unravel_index(self.global_rank, self.shape)]
        i = self.mesh_axes.index(axis)
        others = [j for j in range(len(self.shape)) if j != i]
        colour = (
            int(np.ravel_multi_index([coords[j] for j in others], [self.shape[j] for j in others]))
            if others
            else 0
        )
        return colour, coords[i]

    def sub(self, axis: str) -> NcclComm:
        """``ncclCommSplit`` by mesh coordinate, made once per axis (a collective call: every
        rank of this communicator splits in the same order, as the program's steps do)."""
        if axis not in self.axes:
            raise KinaRuntimeError(
                f"no mesh axis {axis!r} in this communicator (its axes: {self.axis})"
            )
        if (axis,) == self.axes:
            return self
        if axis not in self._subs:
            colour, key = self.split_key(axis)
            comm = self._comm.split(colour, key)
            self._subs[axis] = NcclComm(
                self._core,
                comm,
                self.shape,
                self.mesh_axes,
                (axis,),
                self.global_rank,
                self._alloc,
                self._barrier,
            )
        return self._subs[axis]

    def _bufs(self, kind: str, send: Any, recv: Any, op: str, tag: Tag | None) -> tuple[Any, Any]:
        span = tag[1] if tag else ""
        where = f"rank {self.global_rank}: {kind} over {self.axis}" + (
            f" at {span}" if span else ""
        )
        if op not in NCCL_OPS:
            raise KinaRuntimeError(
                f"{where}: unknown reduction {op!r} (one of {', '.join(NCCL_OPS)})"
            )
        dt = _dtype_of(send)
        if dt not in NCCL_DTYPES:
            raise KinaRuntimeError(
                f"{where}: NCCL has no {dt} type (it has {', '.join(NCCL_DTYPES)})"
            )
        if dt == "bool" and kind in ("all-reduce", "reduce-scatter") and op in ("prod", "avg"):
            raise KinaRuntimeError(f"{where}: reduction {op!r} is not defined on bool buffers")
        shape = recv_shape(kind, tuple(int(d) for d in send.shape), self.size)
        if isinstance(shape, str):
            raise KinaRuntimeError(f"{where}: {shape}")
        if recv is None:
            if self._alloc is None:
                raise KinaRuntimeError(f"{where}: the NCCL backend needs a receive buffer")
            recv = self._alloc(shape, send.dtype)
        elif tuple(int(d) for d in recv.shape) != shape or _dtype_of(recv) != dt:
            raise KinaRuntimeError(
                f"{where}: the receive buffer is {_dtype_of(recv)}{list(recv.shape)}, "
                f"expected {dt}{list(shape)}"
            )
        return send, recv

    def _op(self, op: str) -> Any:
        return getattr(self._core.NcclRedOp, NCCL_OPS[op])

    def all_reduce(
        self,
        send: Any,
        recv: Any = None,
        op: str = "sum",
        *,
        stream: Any = None,
        tag: Tag | None = None,
    ) -> Any:
        send, recv = self._bufs("all-reduce", send, recv, op, tag)
        self._comm.allreduce(send, recv, self._op(op), stream=stream)
        return recv

    def all_gather(
        self, send: Any, recv: Any = None, *, stream: Any = None, tag: Tag | None = None
    ) -> Any:
        send, recv = self._bufs("all-gather", send, recv, "sum", tag)
        self._comm.allgather(send, recv, stream=stream)
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
        send, recv = self._bufs("reduce-scatter", send, recv, op, tag)
        self._comm.reduce_scatter(send, recv, self._op(op), stream=stream)
        return recv

    def all_to_all(
        self, send: Any, recv: Any = None, *, stream: Any = None, tag: Tag | None = None
    ) -> Any:
        send, recv = self._bufs("all-to-all", send, recv, "sum", tag)
        self._comm.alltoall(send, recv, stream=stream)
        return recv

    def barrier(self, *, tag: Tag | None = None) -> None:
        """NCCL has no barrier: the rendezvous's (host-side, every rank of the launch)."""
        if self._barrier is not None:
            self._barrier()

    def __repr__(self) -> str:
        return (
            f"<NcclComm rank {self.rank}/{self.size} over {self.axis} (global {self.global_rank})>"
        )


_WORLDS: dict[tuple[tuple[int, ...], tuple[str, ...]], NcclComm] = {}


def world(
    shape: tuple[int, ...],
    axes: tuple[str, ...],
    client: Any,
    alloc: Callable[[tuple[int, ...], Any], Any] | None = None,
    core: Any = None,
) -> NcclComm:
    """The mesh's world NCCL communicator, created once per mesh and cached: rank 0's
    ``get_unique_id`` through the rendezvous ``client``, then ``Communicator.init``."""
    key = (tuple(shape), tuple(axes))
    if key in _WORLDS:
        return _WORLDS[key]
    core = core or nccl_core()
    n = int(np.prod(shape, dtype=np.int64))
    if n != client.size:
        raise KinaRuntimeError(
            f"mesh {list(shape)} ({', '.join(axes)}) has {n} devices but WORLD_SIZE is {client.size}"
        )
    data = client.unique_id(lambda: uid_to_bytes(core.get_unique_id()))
    comm = core.Communicator.init(n, client.rank, uid_from_bytes(core, data))
    made = NcclComm(core, comm, key[0], key[1], key[1], client.rank, alloc, client.barrier)
    _WORLDS[key] = made
    return made


def forget_worlds() -> None:
    """Drop the cached communicators (tests; a process that re-initialises)."""
    _WORLDS.clear()
