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
(``benches/collectives.py``).

An eager call's host cost is NCCL's enqueue plus kinac's Python: the checks run once per call
layout (:mod:`kinac.rt.comm.nccl_plan`), later calls with buffers of the same layout pay a
dict lookup (about 1 us in all, against 16 us before the cache). The log entry of a NCCL
collective records bytes and no seconds: the call only enqueues, its time is the device's.

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

import weakref
from collections.abc import Callable
from typing import Any

import numpy as np

from kinac.errors import KinaRuntimeError
from kinac.rt.comm.nccl_calls import NcclCalls
from kinac.rt.comm.nccl_plan import (
    NCCL_DTYPES,
    NCCL_OP_CODES,
    NCCL_OPS,
    NCCL_TYPE_CODES,
    Plan,
    buffer_of,
    kina_dtype,
    layout_key,
    stream_handle,
)
from kinac.rt.comm.nccl_prepared import LayoutCall, Prepared
from kinac.rt.comm.simulator import LogEntry

__all__ = [
    "NCCL_DTYPES",
    "NCCL_OPS",
    "NCCL_OP_CODES",
    "NCCL_TYPE_CODES",
    "NcclComm",
    "Prepared",
    "buffer_of",
    "forget_worlds",
    "kina_dtype",
    "layout_key",
    "nccl_core",
    "nccl_lib",
    "stream_handle",
    "world",
]


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


class NcclComm(NcclCalls):
    """One GPU rank's communicator over ``axes`` of a mesh (the world: all of them); its
    collectives, checked once per call layout and cached, are
    :class:`~kinac.rt.comm.nccl_calls.NcclCalls`'."""

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
        device: int | None = None,
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
        self.device = device  # the GPU ordinal NCCL runs on (None: buffers' GPU not checked)
        self.log: list[LogEntry] = [] if log is None else log
        self._subs: dict[str, NcclComm] = {}
        self._plans: dict[tuple[Any, ...], Plan] = {}
        self.plans_made = 0  # checked (uncached) calls: a test counts the cache's misses
        self._token: Any = None  # the device barrier's one-element buffer
        self._token_ptr = 0
        self._prepared: weakref.WeakSet[Prepared] = weakref.WeakSet()  # disabled on destroy
        self._steps: dict[int, LayoutCall] = {}  # program steps' layout calls, by id(step)
        self._aborted = ""  # why it was aborted (a peer's failure), "" if it was not

    @property
    def handle(self) -> Any:
        """nccl4py's communicator object (``ncclComm_t``)."""
        return self._live()

    def _live(self) -> Any:
        if self._comm is None:
            if self._aborted:
                from kinac.rt.comm.rendezvous import RankFailure

                raise RankFailure(self._aborted)
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
                self.device,
            )
        return self._subs[axis]

    def host_barrier(self) -> None:
        """Every rank of the launch reaches this line (the rendezvous's barrier, host-side)."""
        if self._host_barrier is not None:
            self._host_barrier()

    def destroy(self) -> None:
        """``ncclCommDestroy`` of this communicator and the ones split from it (splits first:
        they hold a reference to the parent's resources), once; using it afterwards is an
        error (the cached plans, which hold the handle, go with it). Every rank destroys in the
        order it created, as NCCL asks."""
        for sub in self._subs.values():
            sub.destroy()
        self._subs.clear()
        self._plans.clear()
        self._steps.clear()
        for p in list(self._prepared):
            p.disable(f"{self!r} was destroyed (nccl.forget_worlds): its prepared calls with it")
        self._prepared.clear()
        comm, self._comm = self._comm, None
        if comm is not None:
            self._lib.comm_destroy(comm)

    def abort(self, why: str = "") -> None:
        """``ncclCommAbort`` of this communicator and its splits: their uncompleted operations
        end (``why``: a peer died or failed; :mod:`kinac.rt.comm.watchdog` calls this from its
        thread while this rank waits on the device). Using it afterwards raises a
        :class:`~kinac.rt.comm.rendezvous.RankFailure` saying ``why`` (exit code 4: this rank
        is not the one to blame); :meth:`destroy` then does nothing."""
        from kinac.rt.comm.rendezvous import RankFailure

        why = why or f"{self!r} was aborted"
        for sub in list(self._subs.values()):
            sub.abort(why)
        self._subs.clear()
        self._plans.clear()
        self._steps.clear()
        for p in list(self._prepared):
            p.disable(why, RankFailure)
        self._aborted = why
        comm, self._comm = self._comm, None
        if comm is not None:
            self._lib.comm_abort(comm)

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
    (what nccl4py's ``Communicator.init`` calls). Runs on the current CUDA device, whose
    ordinal the communicator keeps to refuse another GPU's buffers (with a ``lib`` given, a
    test's fake, no device is looked up)."""
    key = (tuple(shape), tuple(axes))
    if key in _WORLDS:
        return _WORLDS[key]
    device = None if lib else _current_ordinal()
    lib = lib or nccl_lib()
    n = int(np.prod(shape, dtype=np.int64))
    if n != client.size:
        raise KinaRuntimeError(
            f"mesh {list(shape)} ({', '.join(axes)}) has {n} devices but WORLD_SIZE is {client.size}"
        )
    data = client.unique_id(lambda: bytes(lib.get_unique_id()))
    comm = lib.comm_init_rank_scalable(n, client.rank, 1, bytearray(data), 0)
    made = NcclComm(
        lib, comm, key[0], key[1], key[1], client.rank, alloc, client.barrier, device=device
    )
    if hasattr(client, "pushed_failure"):  # a peer's failure aborts this world's waits
        from kinac.rt.comm import watchdog

        watchdog.watch(client).guard(made.abort)
    if not _WORLDS:  # the first world of the process: destroy them all at exit (registered
        import atexit  # after CUDA's own exit handlers, so it runs before they do)

        atexit.register(forget_worlds)
    _WORLDS[key] = made
    return made


def _current_ordinal() -> int | None:
    """The current CUDA device's ordinal (None when kinac's CUDA runtime has none)."""
    try:
        from kinac.rt.cuda import device

        return int(device.current_device().ordinal)
    except Exception:  # noqa: BLE001 - no device: buffers' GPU not checked, NCCL says why
        return None


def forget_worlds() -> None:
    """Destroy and drop the cached communicators (at exit; tests; a process that
    re-initialises). Before this, no communicator was ever destroyed: NCCL's proxy threads and
    device buffers lived until the process died."""
    from kinac.rt.comm import program_graph

    program_graph.forget()  # bound programs hold these communicators' prepared calls
    worlds = list(_WORLDS.values())
    _WORLDS.clear()
    for w in worlds:
        w.destroy()
