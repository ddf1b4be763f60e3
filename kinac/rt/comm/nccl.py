"""The :class:`~kinac.rt.comm.communicator.Communicator` over NCCL, through nccl4py.

Why nccl4py's low-level module (``nccl.bindings.nccl``, ``pip install 'kinac[cu13]'``): the
issue asks for the engine everyone trusts (NCCL) through a maintained binding, and kinac adds
no copies. Its low-level functions take what kinac's CUDA tensors are: a device address, an
element count, ``ncclDataType_t``/``ncclRedOp_t`` codes and a ``cudaStream_t`` handle. So a
collective here is one NCCL call on the caller's buffers and stream (zero copies, no buffer
protocol resolved per call, bf16 as NCCL's bf16), and it can be captured in a CUDA graph with
the kernels around it (NCCL supports stream capture). nccl4py's high-level ``nccl.core`` would
resolve each buffer through cuda-core's DLPack view (a cuda-core 1.x dependency the GPU image
may not have, and no bf16 without ml-dtypes); the benchmark compares the two
(``benches/nccl.py``).

One process per GPU; rank 0 makes NCCL's unique id and the rendezvous
(:mod:`kinac.rt.comm.rendezvous`) hands it to every rank; ``ncclCommInitRankScalable`` then
builds the world communicator, once per mesh (cached), and ``sub(axis)`` is ``ncclCommSplit``
with the rank's other coordinates as colour and its coordinate along the axis as key (cached
too). All-to-all is NCCL's grouped send/recv (one ``ncclSend``/``ncclRecv`` pair per peer
between ``ncclGroupStart``/``End``: every NCCL version has it). NCCL has no barrier: the
device barrier is a one-element all-reduce on the stream, the host barrier the rendezvous's.

nccl4py is imported lazily here and only here (``tests/test_layers.py``: one module per heavy
dependency); the CPU tests drive this module with a fake ``nccl.bindings.nccl`` over host
memory (``tests/test_nccl_backend.py``).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import numpy as np

from kinac.errors import KinaRuntimeError
from kinac.rt.comm.communicator import REDUCE_OPS, Tag, recv_shape
from kinac.rt.comm.simulator import LogEntry

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
# ncclDataType_t values (nccl.h; nccl4py's NcclDataType)
NCCL_TYPE_CODES = {
    "int8": 0,
    "uint8": 1,
    "int32": 2,
    "uint32": 3,
    "int64": 4,
    "uint64": 5,
    "float16": 6,
    "float32": 7,
    "float64": 8,
    "bfloat16": 9,
}
# our reduction name -> ncclRedOp_t member, and its value (nccl.h)
NCCL_OPS = {"sum": "SUM", "prod": "PROD", "max": "MAX", "min": "MIN", "avg": "AVG"}
NCCL_OP_CODES = {"sum": 0, "prod": 1, "max": 2, "min": 3, "avg": 4}
assert tuple(NCCL_OPS) == REDUCE_OPS == tuple(NCCL_OP_CODES)

_ITEMSIZE = {"int8": 1, "uint8": 1, "int32": 4, "uint32": 4, "int64": 8, "uint64": 8}
_ITEMSIZE.update({"float16": 2, "float32": 4, "float64": 8, "bfloat16": 2})


def nccl_lib() -> Any:
    """nccl4py's low-level ``nccl.bindings.nccl``, or a clear error saying how to get it."""
    try:
        from nccl.bindings import nccl as lib  # type: ignore[import-not-found]
    except ImportError as e:
        raise KinaRuntimeError(
            "the NCCL backend needs nccl4py: pip install 'kinac[cu13]' (nccl4py[cu13]) on a "
            f"machine with NVIDIA GPUs ({e})"
        ) from None
    return lib


def nccl_core() -> Any:
    """nccl4py's high-level ``nccl.core`` (the benchmark's reference), or a clear error."""
    try:
        import nccl.core as core  # type: ignore[import-not-found]
    except ImportError as e:
        raise KinaRuntimeError(
            "the NCCL backend needs nccl4py: pip install 'kinac[cu13]' (nccl4py[cu13]) on a "
            f"machine with NVIDIA GPUs ({e})"
        ) from None
    return core


def _dtype_name(dtype: Any) -> str:
    name = getattr(dtype, "name", None) or str(dtype)
    return "bfloat16" if name == "uint16" else name  # the host convention: uint16 means bf16


def kina_dtype(name: str) -> str:
    """The Kina dtype name of a buffer's element type name (for messages)."""
    return {
        "float64": "f64",
        "float32": "f32",
        "float16": "f16",
        "bfloat16": "bf16",
        "int64": "i64",
        "int32": "i32",
        "int8": "i8",
        "uint8": "u8",
        "bool": "bool",
    }.get(name, name)


def buffer_of(buf: Any) -> tuple[int, tuple[int, ...], str]:
    """``(address, shape, element type name)`` of a device buffer: a kinac CUDA tensor, any
    DLPack producer on a GPU (imported without a copy), or (the CPU tests' fake device) a
    numpy array. Contiguous buffers only: NCCL reads ``count`` elements from the address."""
    if isinstance(buf, np.ndarray):
        if not buf.flags.c_contiguous:
            raise KinaRuntimeError("NCCL needs contiguous buffers")
        return int(buf.ctypes.data), tuple(int(d) for d in buf.shape), _dtype_name(buf.dtype)
    if not hasattr(buf, "ptr") or not hasattr(buf, "strides"):
        from kinac.rt.cuda import Tensor

        buf = Tensor.from_dlpack(buf)
    if not buf.is_contiguous():
        raise KinaRuntimeError("NCCL needs contiguous buffers")
    return int(buf.ptr), tuple(int(d) for d in buf.shape), _dtype_name(buf.dtype)


def stream_handle(stream: Any) -> int:
    """A ``cudaStream_t`` as an int: kinac's :class:`~kinac.rt.cuda.Stream`, an object with
    ``__cuda_stream__`` (cuda-core, torch), or an int (0: the legacy default stream)."""
    if stream is None:
        return 0
    if isinstance(stream, int):
        return stream
    if hasattr(stream, "handle"):
        return int(stream.handle)
    if hasattr(stream, "__cuda_stream__"):
        return int(stream.__cuda_stream__()[1])
    return int(stream)


class NcclComm:
    """One GPU rank's communicator over ``axes`` of a mesh (the world: all of them)."""

    def __init__(
        self,
        lib: Any,
        comm: Any,
        shape: tuple[int, ...],
        mesh_axes: tuple[str, ...],
        axes: tuple[str, ...],
        global_rank: int,
        alloc: Callable[[tuple[int, ...], Any], Any] | None = None,
        barrier: Callable[[], None] | None = None,
        log: list[LogEntry] | None = None,
    ) -> None:
        self._lib, self._comm = lib, comm
        self.shape, self.mesh_axes, self.axes = shape, mesh_axes, axes
        self.axis = ",".join(axes)
        self.global_rank = global_rank
        coords = [int(c) for c in np.unravel_index(global_rank, shape)]
        along = [i for i, a in enumerate(mesh_axes) if a in axes]
        self.rank = int(np.ravel_multi_index([coords[i] for i in along], [shape[i] for i in along]))
        self.size = int(np.prod([shape[i] for i in along], dtype=np.int64))
        self._alloc, self._host_barrier = alloc, barrier
        self.log: list[LogEntry] = [] if log is None else log
        self._subs: dict[str, NcclComm] = {}
        self._token: Any = None  # the device barrier's one-element buffer

    @property
    def handle(self) -> Any:
        """nccl4py's communicator object (``ncclComm_t``)."""
        return self._live()

    def _live(self) -> Any:
        if self._comm is None:
            raise KinaRuntimeError(f"{self!r} was destroyed (nccl.forget_worlds)")
        return self._comm

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
            comm = self._lib.comm_split(self._live(), colour, key, 0)
            self._subs[axis] = NcclComm(
                self._lib,
                comm,
                self.shape,
                self.mesh_axes,
                (axis,),
                self.global_rank,
                self._alloc,
                self._host_barrier,
                self.log,
            )
        return self._subs[axis]

    def _where(self, kind: str, tag: Tag | None) -> str:
        span = tag[1] if tag else ""
        return f"rank {self.global_rank}: {kind} over {self.axis}" + (f" at {span}" if span else "")

    def _bufs(
        self, kind: str, send: Any, recv: Any, op: str, tag: Tag | None
    ) -> tuple[Any, int, int, int, int, int]:
        """The checked call: ``(recv, send address, recv address, send count, NCCL type code,
        bytes per element)``; a bad call is refused before NCCL with the simulator's messages
        (bool travels as uint8)."""
        where = self._where(kind, tag)
        if op not in NCCL_OPS:
            raise KinaRuntimeError(
                f"{where}: unknown reduction {op!r} (one of {', '.join(NCCL_OPS)})"
            )
        sptr, sshape, dt = buffer_of(send)
        if dt == "bool":
            if kind in ("all-reduce", "reduce-scatter") and op in ("prod", "avg"):
                raise KinaRuntimeError(f"{where}: reduction {op!r} is not defined on bool buffers")
        elif dt not in NCCL_TYPE_CODES:
            raise KinaRuntimeError(
                f"{where}: NCCL has no {kina_dtype(dt)} type (it has {', '.join(NCCL_DTYPES)})"
            )
        shape = recv_shape(kind, sshape, self.size)
        if isinstance(shape, str):
            raise KinaRuntimeError(f"{where}: {shape}")
        if recv is None:
            if self._alloc is None:
                raise KinaRuntimeError(f"{where}: the NCCL backend needs a receive buffer")
            recv = self._alloc(shape, dt)
        rptr, rshape, rdt = buffer_of(recv)
        if rshape != shape or rdt != dt:
            raise KinaRuntimeError(
                f"{where}: the receive buffer is {kina_dtype(rdt)}{list(rshape)}, "
                f"expected {kina_dtype(dt)}{list(shape)}"
            )
        count = int(np.prod(sshape, dtype=np.int64))
        code = NCCL_TYPE_CODES["uint8" if dt == "bool" else dt]
        return recv, sptr, rptr, count, code, _ITEMSIZE.get(dt, 1)

    def _logged(self, kind: str, t0: float, nbytes: int, tag: Tag | None) -> None:
        span = tag[1] if tag else ""
        self.log.append(LogEntry(kind, self.axis, nbytes, span, time.perf_counter() - t0))

    def all_reduce(
        self,
        send: Any,
        recv: Any = None,
        op: str = "sum",
        *,
        stream: Any = None,
        tag: Tag | None = None,
    ) -> Any:
        t0 = time.perf_counter()
        recv, s, r, n, code, size = self._bufs("all-reduce", send, recv, op, tag)
        self._lib.all_reduce(s, r, n, code, NCCL_OP_CODES[op], self._live(), stream_handle(stream))
        self._logged("all-reduce", t0, n * size, tag)
        return recv

    def all_gather(
        self, send: Any, recv: Any = None, *, stream: Any = None, tag: Tag | None = None
    ) -> Any:
        t0 = time.perf_counter()
        recv, s, r, n, code, size = self._bufs("all-gather", send, recv, "sum", tag)
        self._lib.all_gather(s, r, n, code, self._live(), stream_handle(stream))
        self._logged("all-gather", t0, n * self.size * size, tag)
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
        t0 = time.perf_counter()
        recv, s, r, n, code, size = self._bufs("reduce-scatter", send, recv, op, tag)
        lib = self._lib
        lib.reduce_scatter(
            s, r, n // self.size, code, NCCL_OP_CODES[op], self._live(), stream_handle(stream)
        )
        self._logged("reduce-scatter", t0, n * size, tag)
        return recv

    def all_to_all(
        self, send: Any, recv: Any = None, *, stream: Any = None, tag: Tag | None = None
    ) -> Any:
        """Chunk ``j`` of ``send`` to rank ``j``, rank ``j``'s chunk into chunk ``j`` of
        ``recv``: one grouped ``ncclSend``/``ncclRecv`` pair per peer."""
        t0 = time.perf_counter()
        recv, s, r, n, code, size = self._bufs("all-to-all", send, recv, "sum", tag)
        count = n // self.size
        step = count * size
        lib, comm, h = self._lib, self._live(), stream_handle(stream)
        lib.group_start()
        try:
            for j in range(self.size):
                lib.send(s + j * step, count, code, j, comm, h)
                lib.recv(r + j * step, count, code, j, comm, h)
        finally:
            lib.group_end()
        self._logged("all-to-all", t0, n * size, tag)
        return recv

    def barrier(self, *, stream: Any = None, tag: Tag | None = None) -> None:
        """The device barrier: a one-element all-reduce on ``stream`` (work queued after it on
        that stream starts once every rank has queued it; capturable). Without an allocator
        (no device), the rendezvous's host barrier."""
        if self._alloc is None:
            self.host_barrier()
            return
        if self._token is None:
            self._token = self._alloc((1,), "int32")
        p, _, _ = buffer_of(self._token)
        self._lib.all_reduce(
            p, p, 1, NCCL_TYPE_CODES["int32"], 0, self._live(), stream_handle(stream)
        )

    def host_barrier(self) -> None:
        """Every rank of the launch reaches this line (the rendezvous's barrier, host-side)."""
        if self._host_barrier is not None:
            self._host_barrier()

    def destroy(self) -> None:
        """``ncclCommDestroy`` of this communicator and the ones split from it (splits first:
        they hold a reference to the parent's resources), once; using it afterwards is an
        error. Every rank destroys in the order it created, as NCCL asks."""
        for sub in self._subs.values():
            sub.destroy()
        self._subs.clear()
        comm, self._comm = self._comm, None
        if comm is not None:
            self._lib.comm_destroy(comm)

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
    lib: Any = None,
) -> NcclComm:
    """The mesh's world NCCL communicator, created once per mesh and cached: rank 0's
    ``ncclGetUniqueId`` through the rendezvous ``client``, then ``ncclCommInitRankScalable``
    (what nccl4py's ``Communicator.init`` calls). Runs on the current CUDA device."""
    key = (tuple(shape), tuple(axes))
    if key in _WORLDS:
        return _WORLDS[key]
    lib = lib or nccl_lib()
    n = int(np.prod(shape, dtype=np.int64))
    if n != client.size:
        raise KinaRuntimeError(
            f"mesh {list(shape)} ({', '.join(axes)}) has {n} devices but WORLD_SIZE is {client.size}"
        )
    data = client.unique_id(lambda: bytes(lib.get_unique_id()))
    comm = lib.comm_init_rank_scalable(n, client.rank, 1, bytearray(data), 0)
    made = NcclComm(lib, comm, key[0], key[1], key[1], client.rank, alloc, client.barrier)
    if not _WORLDS:  # the first world of the process: destroy them all at exit (registered
        import atexit  # after CUDA's own exit handlers, so it runs before they do)

        atexit.register(forget_worlds)
    _WORLDS[key] = made
    return made


def forget_worlds() -> None:
    """Destroy and drop the cached communicators (at exit; tests; a process that
    re-initialises). Before this, no communicator was ever destroyed: NCCL's proxy threads and
    device buffers lived until the process died."""
    worlds = list(_WORLDS.values())
    _WORLDS.clear()
    for w in worlds:
        w.destroy()
