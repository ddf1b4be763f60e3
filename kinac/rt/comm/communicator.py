"""The ``Communicator`` protocol (NCCL's shape) and what every backend shares.

Why NCCL's shape: the simulator of this package and the NCCL backend of issue 13 must be
interchangeable under :func:`kinac.rt.comm.execute.run_program`. So, as in NCCL:

- every collective takes a ``send`` and a ``recv`` buffer; in-place is allowed (``recv is
  send``, or for all-gather/reduce-scatter ``send`` is this rank's chunk of ``recv`` / ``recv``
  this rank's chunk of ``send``); ``recv=None`` allocates it (a convenience NCCL lacks);
- all-gather's ``recv`` is the ``size`` sends concatenated along axis 0, reduce-scatter's
  ``send`` is ``size`` chunks along axis 0 (rank ``i`` gets the reduction of chunk ``i``),
  all-to-all sends chunk ``j`` to rank ``j`` and receives rank ``j``'s chunk ``i`` into its
  chunk ``j``;
- a ``stream`` argument orders the call on a device stream (host backends run synchronously
  and ignore it);
- ``sub(axis)`` is ``ncclCommSplit`` by mesh coordinate: the ranks that share every other
  coordinate;
- every rank of a communicator calls the same collectives in the same order. ``tag`` is
  ``(kind, span)`` of the step that called, so a backend that detects a broken order names
  the source of each rank's call.

Buffers are numpy arrays; bf16 travels as ``uint16`` bit patterns (the host runtime's
convention: Kina has no 16-bit integer type, so ``uint16`` always means bf16).
"""

from __future__ import annotations

from typing import Any, Protocol

import numpy as np

from kinac.errors import KinaRuntimeError

REDUCE_OPS = ("sum", "prod", "max", "min", "avg")  # ncclSum, ncclProd, ncclMax, ncclMin, ncclAvg
KINDS = ("all-reduce", "all-gather", "reduce-scatter", "all-to-all")
Tag = tuple[str, str]  # (kind of the program step, "file:line:col" of what caused it)


class Communicator(Protocol):
    """One rank's handle on a group of devices (a mesh, or one axis of it)."""

    rank: int  # this device's index in the group (0 .. size-1)
    size: int  # the number of devices in the group
    axis: str  # the mesh axes the group spans, comma-separated ("tp"; "dp,tp" for a 2-D world)

    def all_reduce(
        self,
        send: np.ndarray,
        recv: np.ndarray | None = None,
        op: str = "sum",
        *,
        stream: Any = None,
        tag: Tag | None = None,
    ) -> np.ndarray: ...

    def all_gather(
        self,
        send: np.ndarray,
        recv: np.ndarray | None = None,
        *,
        stream: Any = None,
        tag: Tag | None = None,
    ) -> np.ndarray: ...

    def reduce_scatter(
        self,
        send: np.ndarray,
        recv: np.ndarray | None = None,
        op: str = "sum",
        *,
        stream: Any = None,
        tag: Tag | None = None,
    ) -> np.ndarray: ...

    def all_to_all(
        self,
        send: np.ndarray,
        recv: np.ndarray | None = None,
        *,
        stream: Any = None,
        tag: Tag | None = None,
    ) -> np.ndarray: ...

    def barrier(self) -> None: ...

    def sub(self, axis: str) -> Communicator: ...


class CollectivesByKind:
    """The protocol's four collectives as one ``_run(kind, send, recv, op, tag)``.

    The host backends (the threaded simulator, the TCP process group) differ only in how
    ``_run`` moves the data; the public signatures, NCCL-shaped, are written once here."""

    def _run(
        self, kind: str, send: Any, recv: np.ndarray | None, op: str, tag: Tag | None
    ) -> np.ndarray:
        raise NotImplementedError

    def all_reduce(
        self,
        send: np.ndarray,
        recv: np.ndarray | None = None,
        op: str = "sum",
        *,
        stream: Any = None,
        tag: Tag | None = None,
    ) -> np.ndarray:
        return self._run("all-reduce", send, recv, op, tag)

    def all_gather(
        self,
        send: np.ndarray,
        recv: np.ndarray | None = None,
        *,
        stream: Any = None,
        tag: Tag | None = None,
    ) -> np.ndarray:
        return self._run("all-gather", send, recv, "sum", tag)

    def reduce_scatter(
        self,
        send: np.ndarray,
        recv: np.ndarray | None = None,
        op: str = "sum",
        *,
        stream: Any = None,
        tag: Tag | None = None,
    ) -> np.ndarray:
        return self._run("reduce-scatter", send, recv, op, tag)

    def all_to_all(
        self,
        send: np.ndarray,
        recv: np.ndarray | None = None,
        *,
        stream: Any = None,
        tag: Tag | None = None,
    ) -> np.ndarray:
        return self._run("all-to-all", send, recv, "sum", tag)


def checked_recv(
    kind: str,
    send: np.ndarray,
    recv: np.ndarray | None,
    op: str,
    tag: Tag | None,
    size: int,
    rank: int,
    axis: str,
) -> tuple[str, np.ndarray]:
    """A host backend's checks before a collective moves data: the reduction is known, the send
    fits ``kind`` over ``size`` ranks, the receive buffer (allocated when ``None``) has the
    shape and dtype the call produces. Returns the call's source span and the receive buffer;
    a bad call is a :class:`KinaRuntimeError` naming the (global) ``rank``, the collective, its
    mesh ``axis`` and the span."""
    span = tag[1] if tag else ""
    where = f"rank {rank}: {kind} over {axis}" + (f" at {span}" if span else "")
    if op not in REDUCE_OPS:
        raise KinaRuntimeError(
            f"{where}: unknown reduction {op!r} (one of {', '.join(REDUCE_OPS)})"
        )
    shape = recv_shape(kind, tuple(send.shape), size)
    if isinstance(shape, str):
        raise KinaRuntimeError(f"{where}: {shape}")
    if recv is None:
        return span, np.empty(shape, dtype=send.dtype)
    if tuple(recv.shape) != shape or recv.dtype != send.dtype:
        raise KinaRuntimeError(
            f"{where}: the receive buffer is {dtype_name(recv)}{list(recv.shape)}, "
            f"expected {dtype_name(send)}{list(shape)}"
        )
    if not recv.flags.writeable:  # numpy's own "assignment destination is read-only" otherwise
        raise KinaRuntimeError(
            f"{where}: the receive buffer is read-only (a broadcast view or a frozen array)"
        )
    return span, recv


def recv_shape(kind: str, shape: tuple[int, ...], size: int) -> tuple[int, ...] | str:
    """The receive buffer's shape for ``kind`` on a send of ``shape``, or why the send is
    unfit (an all-gather of a scalar, a scatter whose first dim ``size`` does not divide)."""
    if kind == "all-reduce":
        return shape
    if not shape:
        return "the send needs at least one dim (axis 0 is split), got a scalar"
    if kind == "all-gather":
        return (shape[0] * size, *shape[1:])
    if shape[0] % size:
        return f"{size} ranks do not divide the send's first dim {shape[0]}"
    if kind == "reduce-scatter":
        return (shape[0] // size, *shape[1:])
    return shape  # all-to-all


def is_bf16(a: np.ndarray) -> bool:
    return a.dtype == np.uint16


def dtype_name(a: np.ndarray) -> str:
    """The Kina name of a buffer's dtype, for messages (the host runtime's table)."""
    from kinac.rt.host.arrays import NP_DTYPES

    names = {dt.name: kina for kina, dt in NP_DTYPES.items()}
    return names.get(a.dtype.name, a.dtype.name)


def bf16_to_f32(bits: np.ndarray) -> np.ndarray:
    """bf16 bit patterns (``uint16``) widened exactly to f32."""
    return (bits.astype(np.uint32) << 16).view(np.float32)


def f32_to_bf16(x: np.ndarray) -> np.ndarray:
    """f32 rounded to the nearest bf16 (ties to even), NaN kept NaN, as ``uint16`` bits."""
    u = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32)
    rounded = ((u + (((u >> 16) & 1) + 0x7FFF)) >> 16).astype(np.uint16)
    return np.where(np.isnan(x), np.uint16(0x7FC0), rounded)


def reduce(parts: list[np.ndarray], op: str) -> np.ndarray:
    """``op`` over ``parts`` in rank order. Floats narrower than f32 (f16, bf16) accumulate in
    f32 and round once at the end (NCCL rounds after each step of its ring, so a NCCL result
    may differ from this one in the last bit); other dtypes accumulate in their own."""
    if op not in REDUCE_OPS:
        raise KinaRuntimeError(f"unknown reduction {op!r} (one of {', '.join(REDUCE_OPS)})")
    dt = parts[0].dtype
    bf16 = is_bf16(parts[0])
    if dt == np.bool_ and op in ("prod", "avg"):
        raise KinaRuntimeError(f"reduction {op!r} is not defined on bool buffers")
    if op == "avg" and not (bf16 or np.issubdtype(dt, np.floating)):
        raise KinaRuntimeError(f"reduction 'avg' needs a float buffer, got {dtype_name(parts[0])}")
    wide = [
        bf16_to_f32(p) if bf16 else p.astype(np.float32) if dt == np.float16 else p for p in parts
    ]
    acc = wide[0].copy()
    fold = {"sum": np.add, "avg": np.add, "prod": np.multiply, "max": np.maximum, "min": np.minimum}
    for p in wide[1:]:
        fold[op](acc, p, out=acc)
    if op == "avg":
        acc = acc / np.asarray(len(parts), dtype=acc.dtype)
    if bf16:
        return f32_to_bf16(acc)
    return acc.astype(dt, copy=False)


def compute(kind: str, sends: list[np.ndarray], rank: int, op: str) -> np.ndarray:
    """What rank ``rank`` receives from a collective of ``kind`` given every rank's send."""
    n = len(sends)
    if kind == "all-reduce":
        return reduce(sends, op)
    if kind == "all-gather":
        return np.concatenate(sends, axis=0)
    chunk = sends[0].shape[0] // n
    if kind == "reduce-scatter":
        return reduce([s[rank * chunk : (rank + 1) * chunk] for s in sends], op)
    if kind == "all-to-all":
        return np.concatenate([s[rank * chunk : (rank + 1) * chunk] for s in sends], axis=0)
    raise KinaRuntimeError(f"unknown collective {kind!r} (one of {', '.join(KINDS)})")


def moved_bytes(kind: str, send: np.ndarray, recv: np.ndarray) -> int:
    """The bytes one device moves for a collective, counted as the compiler's cost model
    counts them (docs/sharding.md): the local partial for all-reduce and reduce-scatter, the
    gathered result for all-gather, the send buffer for all-to-all."""
    return int(recv.nbytes if kind == "all-gather" else send.nbytes)
