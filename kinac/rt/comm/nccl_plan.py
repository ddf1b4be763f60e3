"""What a NCCL collective call needs from its buffers, checked once per buffer layout.

Why its own module: an eager collective's cost above NCCL's own enqueue is all Python
(issue 13 measured 16 us per call on the H200 against 7 us for the bare binding: two
``buffer_of`` resolutions, ``np.prod`` on the shape, the dtype and op tables, the receive
shape, a ``LogEntry`` built per call). Everything in that list depends only on the call's
*layout* (kind, op, tag, each buffer's shape, strides, dtype and device), not on its
addresses, so :func:`make_plan` does the checks once and returns a :class:`Plan` that
:class:`~kinac.rt.comm.nccl.NcclComm` caches under :func:`layout_key`; a later call whose
buffers have the same layout pays one dict lookup on that key, then the NCCL call. A buffer of
another shape, dtype, stride or device misses the cache and goes through these checks again,
so a wrong buffer is refused with the same message the first call would give.

Also here: the NCCL tables (``ncclDataType_t``/``ncclRedOp_t`` codes) and the buffer and
stream resolution (a kinac CUDA tensor, a DLPack producer, or the CPU tests' numpy arrays).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from kinac.errors import KinaRuntimeError
from kinac.rt.comm.communicator import REDUCE_OPS, recv_shape
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

# DLPack device types NCCL can read and write (dlpack.h): device memory, managed memory
KDL_CUDA, KDL_CUDA_MANAGED = 2, 13


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


def resolve(buf: Any) -> Any:
    """``buf`` as something with an address: a numpy array (the CPU tests' fake device) or a
    kinac CUDA tensor (any other DLPack producer is imported as one, without a copy)."""
    if isinstance(buf, np.ndarray) or (hasattr(buf, "ptr") and hasattr(buf, "strides")):
        return buf
    from kinac.rt.cuda import Tensor

    return Tensor.from_dlpack(buf)


def buffer_of(buf: Any) -> tuple[int, tuple[int, ...], str]:
    """``(address, shape, element type name)`` of a device buffer: a kinac CUDA tensor, any
    DLPack producer on a GPU (imported without a copy), or (the CPU tests' fake device) a
    numpy array. Contiguous buffers only: NCCL reads ``count`` elements from the address."""
    buf = resolve(buf)
    if isinstance(buf, np.ndarray):
        if not buf.flags.c_contiguous:
            raise KinaRuntimeError("NCCL needs contiguous buffers")
        return int(buf.ctypes.data), tuple(int(d) for d in buf.shape), _dtype_name(buf.dtype)
    if not buf.is_contiguous():
        raise KinaRuntimeError("NCCL needs contiguous buffers")
    return int(buf.ptr), tuple(int(d) for d in buf.shape), _dtype_name(buf.dtype)


def check_device(buf: Any, where: str, role: str, ordinal: int | None) -> None:
    """A kinac tensor NCCL cannot use is refused here, not by NCCL (an illegal address, or a
    hang on another GPU's memory): host memory, or another GPU than the communicator's
    (``ordinal``; None: not checked). Numpy arrays are the CPU tests' fake device."""
    dev = getattr(buf, "device", None)
    if isinstance(buf, np.ndarray) or not isinstance(dev, tuple) or len(dev) != 2:
        return
    kind, index = dev
    if kind not in (KDL_CUDA, KDL_CUDA_MANAGED):
        raise KinaRuntimeError(
            f"{where}: the {role} buffer is host memory (DLPack device type {kind}); NCCL moves "
            "GPU buffers (upload it first)"
        )
    if ordinal is not None and index != ordinal:
        raise KinaRuntimeError(
            f"{where}: the {role} buffer is on GPU {index}, this communicator's GPU is {ordinal}"
        )


def stream_handle(stream: Any) -> int:
    """A ``cudaStream_t`` as an int: kinac's :class:`~kinac.rt.cuda.Stream`, an object with
    ``__cuda_stream__`` (cuda-core, torch), or an int (0: the legacy default stream)."""
    if stream is None:
        return 0
    if isinstance(stream, int):
        return stream
    h = getattr(stream, "handle", None)
    if h is not None:
        return h if type(h) is int else int(h)
    if hasattr(stream, "__cuda_stream__"):
        return int(stream.__cuda_stream__()[1])
    return int(stream)


class Plan:
    """One call layout's NCCL arguments, worked out once: the count NCCL is given, the type
    and op codes, the communicator handle, the log entry (shared: entries are immutable), the
    receive buffer's shape and dtype (to allocate it when the caller gives none) and, for an
    all-to-all, each peer's byte offset."""

    __slots__ = ("count", "code", "op", "comm", "entry", "shape", "dtype", "peers")

    def __init__(
        self,
        count: int,
        code: int,
        op: int,
        comm: Any,
        entry: LogEntry,
        shape: tuple[int, ...],
        dtype: str,
        peers: tuple[tuple[int, int], ...] = (),
    ) -> None:
        self.count, self.code, self.op, self.comm, self.entry = count, code, op, comm, entry
        self.shape, self.dtype, self.peers = shape, dtype, peers


def layout_key(kind: str, op: str, tag: Any, send: Any, recv: Any) -> tuple[Any, ...]:
    """The cache key of a call: what :func:`make_plan` checked. ``NcclComm``'s collectives
    build the same tuple inline (a function call costs as much as the lookup); a test checks
    that a second call with the same layout misses nothing. No receive buffer: a shorter key."""
    s = (kind, op, tag, send.shape, send.strides, send.dtype.name, send.device)
    if recv is None:
        return s
    return (*s, recv.shape, recv.strides, recv.dtype.name, recv.device)


def aliasing(kind: str, send: int, recv: int, sbytes: int, rbytes: int, size: int) -> str:
    """Why the send and receive buffers' overlap is not a call NCCL defines ("" when it is).

    NCCL's in-place forms: all-reduce with ``recv is send``; all-gather with ``send`` this
    rank's chunk of ``recv``; reduce-scatter with ``recv`` this rank's chunk of ``send`` (the
    rank is unknown here, so any chunk boundary passes: the one at the wrong chunk gives
    another rank's data, as NCCL would). Every other overlap reads bytes NCCL is writing.
    All-to-all's grouped sends and receives have no in-place form at all."""
    if not sbytes or not rbytes or send + sbytes <= recv or recv + rbytes <= send:
        return ""
    if kind == "all-reduce" and send == recv:
        return ""
    if kind == "all-gather" and size and (send - recv) % sbytes == 0:
        return ""  # send is a whole chunk of recv (NCCL's in-place all-gather)
    if kind == "reduce-scatter" and size and (recv - send) % rbytes == 0:
        return ""  # recv is a whole chunk of send (NCCL's in-place reduce-scatter)
    why = (
        "all-to-all has no in-place form (its grouped sends read what its receives write)"
        if kind == "all-to-all"
        else "only NCCL's in-place form may share memory"
    )
    return (
        f"the receive buffer (0x{recv:x}, {rbytes} bytes) overlaps the send buffer "
        f"(0x{send:x}, {sbytes} bytes): {why}"
    )


def direct(buf: Any) -> bool:
    """Whether the cached path can address ``buf`` itself (``buf.ptr``): a kinac tensor."""
    return not isinstance(buf, np.ndarray) and hasattr(buf, "ptr") and hasattr(buf, "device")


def make_plan(
    kind: str,
    send: Any,
    recv: Any,
    op: str,
    *,
    where: str,
    size: int,
    comm: Any,
    axis: str,
    span: str,
    alloc: Callable[..., Any] | None,
    device: int | None,
    stream: int = 0,
) -> tuple[Plan, Any, int, int, bool]:
    """The checked call: ``(plan, receive buffer, send address, receive address, cacheable)``.
    A bad call is refused before NCCL with the simulator's messages (bool travels as uint8);
    ``cacheable``: both buffers are kinac tensors, which the cached path reads directly. A
    receive buffer allocated here is allocated on ``stream`` (the call's; 0: the allocator's
    default), so that its memory is reused only after the collective that writes it."""
    if op not in NCCL_OPS:
        raise KinaRuntimeError(f"{where}: unknown reduction {op!r} (one of {', '.join(NCCL_OPS)})")
    cacheable = direct(send) and (recv is None or direct(recv))  # as given, not imported
    send = resolve(send)
    check_device(send, where, "send", device)
    sptr, sshape, dt = buffer_of(send)
    if dt == "bool":
        if kind in ("all-reduce", "reduce-scatter") and op in ("prod", "avg"):
            raise KinaRuntimeError(f"{where}: reduction {op!r} is not defined on bool buffers")
    elif dt not in NCCL_TYPE_CODES:
        raise KinaRuntimeError(
            f"{where}: NCCL has no {kina_dtype(dt)} type (it has {', '.join(NCCL_DTYPES)})"
        )
    shape = recv_shape(kind, sshape, size)
    if isinstance(shape, str):
        raise KinaRuntimeError(f"{where}: {shape}")
    if recv is None:
        if alloc is None:
            raise KinaRuntimeError(f"{where}: the NCCL backend needs a receive buffer")
        recv = alloc(shape, dt, stream=stream) if stream else alloc(shape, dt)
    else:
        recv = resolve(recv)
        check_device(recv, where, "receive", device)
    rptr, rshape, rdt = buffer_of(recv)
    if rshape != shape or rdt != dt:
        raise KinaRuntimeError(
            f"{where}: the receive buffer is {kina_dtype(rdt)}{list(rshape)}, "
            f"expected {kina_dtype(dt)}{list(shape)}"
        )
    n = math.prod(sshape)
    item = _ITEMSIZE.get(dt, 1)
    overlap = aliasing(kind, sptr, rptr, n * item, math.prod(shape) * item, size)
    if overlap:
        raise KinaRuntimeError(f"{where}: {overlap}")
    code = NCCL_TYPE_CODES["uint8" if dt == "bool" else dt]
    peers: tuple[tuple[int, int], ...] = ()
    if kind == "all-gather":  # NCCL's count: the send's; the log: the bytes gathered
        count, nbytes = n, n * size * item
    elif kind == "reduce-scatter":  # NCCL's count: the receive's
        count, nbytes = n // size, n * item
    elif kind == "all-to-all":  # per peer: its chunk's count, at its byte offset
        count, nbytes = n // size, n * item
        peers = tuple((j, j * count * item) for j in range(size))
    else:
        count, nbytes = n, n * item
    entry = LogEntry(kind, axis, nbytes, span)
    plan = Plan(count, code, NCCL_OP_CODES[op], comm, entry, shape, dt, peers)
    return plan, recv, sptr, rptr, cacheable
