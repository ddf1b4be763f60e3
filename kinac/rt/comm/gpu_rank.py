"""GPU segments for a rank's program, and a host-staged NCCL Communicator.

The NCCL path of ``kinac run --distributed --target cuda`` and ``kinac.compile(target='cuda',
mesh=)`` under a launch is device-resident (:mod:`kinac.rt.comm.device_run`: slots are device
tensors, collectives NCCL calls on the segments' buffers). What stays here: the segment
wrapper (:func:`host_segment`, whose ``.device`` is the GPU entry itself), and
:class:`StagedComm`, a numpy-facing Communicator that copies each send to the device, runs
the NCCL collective, waits and copies the receive back (two copies per collective), for a
caller whose slots are host arrays (:func:`kinac.rt.comm.execute.run_program`).

The device is an object with ``upload(array) -> buffer``, ``empty(shape, dtype) -> buffer``,
``download(buffer) -> array`` and ``synchronize()`` (:class:`CudaIO` for kinac's CUDA runtime);
bf16 is ``uint16`` bits on the host and ``bfloat16`` on the device, so NCCL reduces it as
bf16.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import numpy as np

from kinac.rt.comm.communicator import CollectivesByKind, Tag, moved_bytes
from kinac.rt.comm.simulator import LogEntry


def device_dtype(dtype: Any) -> str:
    """The device dtype name of a numpy dtype or a device tensor's dtype (uint16 is bf16)."""
    if isinstance(dtype, str):
        name = dtype
    elif isinstance(dtype, np.dtype | type):
        name = np.dtype(dtype).name
    else:
        name = str(getattr(dtype, "name", dtype))
    return "bfloat16" if name == "uint16" else name


class CudaIO:
    """Host <-> device copies through kinac's CUDA runtime (the current device's pool)."""

    def __init__(self, stream: Any = None) -> None:
        from kinac.rt import cuda

        self._cuda = cuda
        self.resource = cuda.default_resource()
        self.stream = stream

    def empty(self, shape: tuple[int, ...], dtype: Any, stream: int = 0) -> Any:
        return self._cuda.Tensor.empty(shape, device_dtype(dtype), self.resource, stream)

    def upload(self, array: np.ndarray) -> Any:
        t = self.empty(tuple(array.shape), array.dtype)
        t.copy_from_host(np.ascontiguousarray(array))
        return t

    def download(self, buf: Any) -> np.ndarray:
        return np.asarray(buf.numpy())

    def synchronize(self) -> None:
        self._cuda.current_device().synchronize()


class StagedComm(CollectivesByKind):
    """The numpy-facing Communicator of a GPU rank: each call copies the send to the device,
    runs the NCCL collective, waits, and copies the receive back (see the module docstring)."""

    def __init__(self, comm: Any, io: Any, log: list[LogEntry] | None = None) -> None:
        self._comm, self._io = comm, io
        self.rank, self.size, self.axis = comm.rank, comm.size, comm.axis
        self.global_rank = comm.global_rank
        self.log: list[LogEntry] = [] if log is None else log
        self._subs: dict[str, StagedComm] = {}

    def sub(self, axis: str) -> StagedComm:
        inner = self._comm.sub(axis)
        if inner is self._comm:
            return self
        if axis not in self._subs:
            self._subs[axis] = StagedComm(inner, self._io, self.log)
        return self._subs[axis]

    def _run(
        self, kind: str, send: Any, recv: np.ndarray | None, op: str, tag: Tag | None
    ) -> np.ndarray:
        t0 = time.perf_counter()
        send = np.ascontiguousarray(send)
        d_send = self._io.upload(send)
        call = getattr(self._comm, kind.replace("-", "_"))  # the NCCL communicator's method
        kw = {"op": op} if kind in ("all-reduce", "reduce-scatter") else {}
        got = call(d_send, None, tag=tag, **kw)  # NcclComm allocates the receive (io.empty)
        self._io.synchronize()
        host = self._io.download(got).reshape(tuple(int(s) for s in got.shape))
        if recv is not None:
            recv[...] = host
            host = recv
        span = tag[1] if tag else ""
        nbytes = moved_bytes(kind, send, host)
        self.log.append(LogEntry(kind, self.axis, nbytes, span, time.perf_counter() - t0))
        return host

    def barrier(self, *, tag: Tag | None = None) -> None:
        self._comm.barrier(tag=tag)


def host_segment(fn: Callable[..., Any]) -> Callable[..., Any]:
    """A GPU segment whose outputs come back as host arrays (what ``run_program`` keeps);
    ``.device`` is ``fn`` itself, device tensors out, for the device-resident NCCL path
    (:mod:`kinac.rt.comm.device_run`)."""

    def call(*arrays: Any) -> Any:
        got = fn(*arrays)
        outs = got if isinstance(got, tuple) else (got,)
        res = tuple(o if isinstance(o, np.ndarray) else np.asarray(o.numpy()) for o in outs)
        return res[0] if len(res) == 1 else res

    call.device = fn  # type: ignore[attr-defined]
    return call


def device_segment(seg: Callable[..., Any]) -> Callable[..., Any]:
    """The device-tensors-out form of a segment (the GPU entry under :func:`host_segment`).
    A GpuEntry is its own device form: its ``.device`` is its GPU, not a segment."""
    if hasattr(seg, "lowered"):
        return seg
    return getattr(seg, "device", seg)


def nccl_world(
    shape: tuple[int, ...], axes: tuple[str, ...], client: Any, io: Any = None, lib: Any = None
) -> StagedComm:
    """The mesh's world NCCL communicator behind host staging, for host slots (``run_program``;
    the NCCL path itself is device-resident: :mod:`kinac.rt.comm.device_run`)."""
    from kinac.rt.comm import nccl

    io = io or CudaIO()
    return StagedComm(nccl.world(shape, axes, client, alloc=io.empty, lib=lib), io)
