"""One GPU rank's run of a ``DeviceProgram`` with every slot on the device (the NCCL path).

Why: :func:`kinac.rt.comm.execute.run_program` keeps slots as host arrays, so a GPU rank
through it copies every segment's outputs back and every collective's buffers in and out
(:class:`~kinac.rt.comm.gpu_rank.StagedComm`, kept for hosts). Here the slots are device
buffers: a GPU segment takes its inputs in place and returns new device tensors, and a
collective is one NCCL call on the segment's buffers, on the entry's stream (the legacy
default stream every GPU entry runs on, so segments and collectives are ordered without a
wait). The only copies are the dim moves a communicator needs (NCCL splits and concatenates
along axis 0 of contiguous buffers, the program names a dim): moving dim ``d`` of a
``(P, S, Q)`` buffer (``P`` the dims before it, ``Q`` after) to the front is ``min(P, S)``
strided 2-D copies on the stream (``cuMemcpy2DAsync``, capturable), and none when ``P`` is 1
(dim 0, or only size-1 dims before it: the common case, and every all-reduce). An all-to-all
that concatenates along another dim than it splits moves each received chunk back and copies
it into place (:func:`concat_chunks`). Nothing goes through the host.

The device is an object with ``empty(shape, dtype)``, ``upload(array)``, ``download(buf)``,
``view(buf, shape, offset_bytes=0)``, ``copy2d(dst, dst_pitch, src, src_pitch, width, height,
stream)`` on addresses and ``synchronize()``: :class:`CudaOps` (kinac's CUDA runtime) and
:class:`HostOps` (numpy buffers, the CPU tests' fake device, whose ``copy2d`` is the same
address arithmetic through ``ctypes.memmove``).
"""

from __future__ import annotations

import ctypes
import math
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from kinac.errors import KinaRuntimeError
from kinac.rt.comm.execute import checked_inputs, walk_program
from kinac.rt.comm.gpu_rank import device_dtype
from kinac.rt.comm.nccl import buffer_of

if TYPE_CHECKING:
    from kinac.artifacts.sharded import Collective, DeviceProgram


MEMORYTYPE_DEVICE = 2  # CU_MEMORYTYPE_DEVICE
DEVICE_NAMES = {"f64": "float64", "f32": "float32", "f16": "float16", "bf16": "bfloat16",
                "i64": "int64", "i32": "int32", "i8": "int8", "u8": "uint8", "bool": "bool"}  # fmt: skip


class NotGraphable(Exception):
    """Why a program cannot run as one graph (:mod:`kinac.rt.comm.program_graph`): it then
    runs step by step. Internal: never reaches a user."""


def gpu_entry_of(seg: Any) -> Any:
    """The GPU entry behind a segment: :func:`~kinac.rt.comm.gpu_rank.host_segment`'s wrapper
    holds it as ``.device``, but a :class:`~kinac.rt.cuda.entry.GpuEntry` (what
    ``device_segment`` hands ``run_nccl``) has a ``.device`` of its own, its GPU. Unwrapping
    that too made every real entry "not a GPU entry" and the program ran step by step
    silently (H200, 2026-12-02 02:22; the fakes' segments have no ``.device``)."""
    if hasattr(seg, "lowered"):
        return seg
    inner = getattr(seg, "device", None)
    return inner if hasattr(inner, "lowered") else seg


def unbindable(entry: Any, bufs: Sequence[Any]) -> str | None:
    """Why ``entry``'s launch sequence cannot be bound to ``bufs`` (its params then its
    outputs, in place), or None: read from the entry's lowering alone (no driver), so a CPU
    test evaluates it on a real program's segments. Runtime checks need their status word
    read back after the call, host outputs a download the entry makes itself, in-place
    updates the entry's warm-up at new addresses: none of these fit one captured graph."""
    lw = getattr(entry, "lowered", None)
    if lw is None or not hasattr(entry, "_bind"):
        return f"{type(entry).__name__} is not a GPU entry"
    if lw.has_status:
        return f"{lw.name}: runtime checks ({lw.status_slots} status slots to read back)"
    host = [o.name for o, d in zip(lw.outputs, lw.output_devices, strict=True) if d == "cpu"]
    if host:
        return f"{lw.name}: outputs on the host ({', '.join(host)})"
    if getattr(entry, "updates_inputs", ()):
        return f"{lw.name}: updates its inputs in place"
    specs = (*lw.params, *lw.outputs)
    if len(bufs) != len(specs):
        return f"{lw.name}: {len(bufs)} buffers for {len(specs)} params/outputs"
    for t, spec in zip(bufs, specs, strict=True):
        if buffer_of(t)[0] % 16:
            return f"{lw.name}: the buffer for {spec.name} is not 16-byte aligned"
        if tuple(t.shape) != tuple(spec.shape) or device_dtype(t.dtype) != DEVICE_NAMES.get(
            spec.dtype
        ):
            return (
                f"{lw.name}: the buffer for {spec.name} is {device_dtype(t.dtype)}"
                f"{list(t.shape)}, not {spec.dtype}{list(spec.shape)}"
            )
    return None


class HostStream:
    """The fake device's stream (work runs when it is issued)."""

    handle = 0

    def synchronize(self) -> None:
        pass


class EagerGraph:
    """The fake device's "graph": a replay runs the captured calls again, in order."""

    captured = False

    def __init__(self, sequence: Callable[[Any], None]) -> None:
        self.sequence = sequence

    def replay(self, stream: Any = None) -> None:
        self.sequence(stream)


class Memcpy2D(ctypes.Structure):
    """``CUDA_MEMCPY2D`` (cuda.h), for ``cuMemcpy2DAsync`` through ctypes (kinac's hot driver
    calls go through ctypes too: :func:`kinac.rt.cuda.driver.libcuda`)."""

    _fields_ = [
        ("srcXInBytes", ctypes.c_size_t),
        ("srcY", ctypes.c_size_t),
        ("srcMemoryType", ctypes.c_int),
        ("srcHost", ctypes.c_void_p),
        ("srcDevice", ctypes.c_uint64),
        ("srcArray", ctypes.c_void_p),
        ("srcPitch", ctypes.c_size_t),
        ("dstXInBytes", ctypes.c_size_t),
        ("dstY", ctypes.c_size_t),
        ("dstMemoryType", ctypes.c_int),
        ("dstHost", ctypes.c_void_p),
        ("dstDevice", ctypes.c_uint64),
        ("dstArray", ctypes.c_void_p),
        ("dstPitch", ctypes.c_size_t),
        ("WidthInBytes", ctypes.c_size_t),
        ("Height", ctypes.c_size_t),
    ]


class HostOps:
    """The fake device of the CPU tests: buffers are numpy arrays, addresses their data."""

    def __init__(self) -> None:
        self.copies = 0  # 2-D copies issued (dim moves)

    def empty(self, shape: tuple[int, ...], dtype: Any, stream: int = 0) -> np.ndarray:
        name = device_dtype(dtype)
        return np.empty(shape, np.uint16 if name == "bfloat16" else name)

    def upload(self, array: np.ndarray) -> np.ndarray:
        return np.array(array, copy=True, order="C")

    def download(self, buf: np.ndarray) -> np.ndarray:
        return np.array(buf, copy=True)

    def view(self, buf: np.ndarray, shape: tuple[int, ...], offset: int = 0) -> np.ndarray:
        flat = buf.reshape(-1).view(np.uint8)[offset:]
        n = math.prod(shape) * buf.dtype.itemsize
        return flat[:n].view(buf.dtype).reshape(shape)

    def copy2d(
        self, dst: int, dpitch: int, src: int, spitch: int, width: int, height: int, stream: Any
    ) -> None:
        self.copies += 1
        for row in range(height):
            ctypes.memmove(dst + row * dpitch, src + row * spitch, width)

    def synchronize(self) -> None:
        pass

    # -- what a program bound as one graph needs (kinac.rt.comm.program_graph) -------------
    def stream(self) -> HostStream:
        return HostStream()

    def pinned(self, shape: tuple[int, ...], dtype: Any) -> np.ndarray:
        return np.empty(shape, dtype)

    def copy_async(self, dst: int, src: int, nbytes: int, stream: Any) -> None:
        ctypes.memmove(dst, src, nbytes)

    def bind_segment(
        self, seg: Any, ins: Sequence[Any], outs: Sequence[Any]
    ) -> Callable[..., None]:
        """A host segment's call writing into ``outs`` (the buffers a graph would keep)."""
        fn = getattr(seg, "device", seg)

        def run(stream: Any) -> None:
            got = fn(*ins)
            got = got if isinstance(got, tuple) else (got,)
            for o, g in zip(outs, got, strict=True):
                np.copyto(o, np.asarray(g).reshape(o.shape), casting="no")

        return run

    def capture(self, sequence: Callable[[Any], None], stream: Any, name: str = "") -> EagerGraph:
        return EagerGraph(sequence)


class CudaOps:
    """The device through kinac's CUDA runtime: the current device's pool, the legacy default
    stream (the one GPU entries run on), ``cuMemcpy2DAsync`` for the dim moves."""

    def __init__(self) -> None:
        from kinac.rt import cuda

        self._cuda = cuda
        self.resource = cuda.default_resource()
        self.copies = 0
        self._memcpy2d: Any = None
        self._memcpy: Any = None

    def empty(self, shape: tuple[int, ...], dtype: Any, stream: int = 0) -> Any:
        """A tensor from the pool, ready in order on ``stream`` (its memory reused only after
        the work queued there: a collective's receive buffer is allocated on its stream)."""
        return self._cuda.Tensor.empty(tuple(shape), device_dtype(dtype), self.resource, stream)

    def upload(self, array: np.ndarray) -> Any:
        """A device copy (bf16, the host's ``uint16``, becomes a ``bfloat16`` tensor)."""
        a = np.require(array, requirements="C")  # not ascontiguousarray: it makes a 0-d array [1]
        t = self.empty(tuple(a.shape), a.dtype)
        t.copy_from_host(a)
        return t

    def download(self, buf: Any) -> np.ndarray:
        return np.asarray(buf.numpy())

    def view(self, buf: Any, shape: tuple[int, ...], offset: int = 0) -> Any:
        t = self._cuda.Tensor
        return t(buf.ptr + offset, tuple(shape), buf.dtype, device=buf.device, owner=buf)

    def copy2d(
        self, dst: int, dpitch: int, src: int, spitch: int, width: int, height: int, stream: Any
    ) -> None:
        from kinac.rt.cuda import driver

        if self._memcpy2d is None:
            f = driver.libcuda().cuMemcpy2DAsync_v2
            f.restype = ctypes.c_int
            f.argtypes = [ctypes.POINTER(Memcpy2D), ctypes.c_void_p]
            self._memcpy2d = f
        p = Memcpy2D(
            srcMemoryType=MEMORYTYPE_DEVICE,
            srcDevice=src,
            srcPitch=spitch,
            dstMemoryType=MEMORYTYPE_DEVICE,
            dstDevice=dst,
            dstPitch=dpitch,
            WidthInBytes=width,
            Height=height,
        )
        err = self._memcpy2d(ctypes.byref(p), ctypes.c_void_p(int(stream or 0)))
        if err:
            driver.fail("cuMemcpy2DAsync", err)
        self.copies += 1

    def synchronize(self) -> None:
        self._cuda.current_device().synchronize()

    # -- what a program bound as one graph needs (kinac.rt.comm.program_graph) -------------
    def stream(self) -> Any:
        """The program's stream: non-blocking, as a captured stream must be (work on a
        blocking one would depend on the legacy stream, which capture refuses); the program
        waits for the device once, before its first run (:class:`ProgramGraph`)."""
        return self._cuda.Stream()

    def pinned(self, shape: tuple[int, ...], dtype: Any) -> np.ndarray:
        """Page-locked host memory (the pool's): a copy from or to it can be captured."""
        return self._cuda.pinned_empty(tuple(shape), np.dtype(dtype))

    def copy_async(self, dst: int, src: int, nbytes: int, stream: Any) -> None:
        """``cuMemcpyAsync`` (unified addresses: host page-locked or device, either way)."""
        from kinac.rt.cuda import driver

        if self._memcpy is None:
            f = driver.libcuda().cuMemcpyAsync
            f.restype = ctypes.c_int
            f.argtypes = [ctypes.c_uint64, ctypes.c_uint64, ctypes.c_size_t, ctypes.c_void_p]
            self._memcpy = f
        err = self._memcpy(dst, src, nbytes, ctypes.c_void_p(int(stream or 0)))
        if err:
            driver.fail("cuMemcpyAsync", err)

    def bind_segment(
        self, seg: Any, ins: Sequence[Any], outs: Sequence[Any]
    ) -> Callable[..., None]:
        """A GPU entry's launch sequence (its kernels and cuBLAS calls, what its own CUDA
        graph holds) bound to ``ins`` and ``outs``, run on the stream it is given; a segment
        with runtime checks to read back, host outputs or in-place updates is not bound."""
        entry = gpu_entry_of(seg)
        why = unbindable(entry, (*ins, *outs))
        if why is not None:
            raise NotGraphable(why)
        bufs = (*ins, *outs)
        pushed = entry.device.enter()
        try:
            seq, _ = entry._bind(tuple(buffer_of(t)[0] for t in bufs))
        finally:
            entry.device.leave(pushed)
        return seq  # type: ignore[no-any-return]

    def capture(self, sequence: Callable[[Any], None], stream: Any, name: str = "") -> Any:
        from kinac.rt.cuda.graph import capture

        return capture(sequence, stream, name=name)


def _pq(shape: tuple[int, ...], dim: int) -> tuple[int, int, int]:
    return math.prod(shape[:dim]), shape[dim], math.prod(shape[dim + 1 :])


def _itemsize(buf: Any) -> int:
    return int(buf.dtype.itemsize)


def move_front(x: Any, dim: int, ops: Any, stream: Any = 0) -> Any:
    """``x`` with ``dim`` moved to axis 0, contiguous: a view when only size-1 dims precede
    it, else ``min(P, S)`` strided copies."""
    if dim == 0:  # already in front: the buffer itself (no view to build per call)
        return x
    shape = tuple(int(d) for d in x.shape)
    out_shape = (shape[dim], *shape[:dim], *shape[dim + 1 :])
    p, s, q = _pq(shape, dim)
    if p == 1:
        return ops.view(x, out_shape)
    out = ops.empty(out_shape, x.dtype)
    src, _, _ = buffer_of(x)
    dst, _, _ = buffer_of(out)
    row = q * _itemsize(x)
    if p <= s:  # for each leading index: S rows of Q, spread P*Q apart in the output
        for i in range(p):
            ops.copy2d(dst + i * row, p * row, src + i * s * row, row, row, s, stream)
    else:  # for each index along dim: P rows of Q, gathered from S*Q apart
        for j in range(s):
            ops.copy2d(dst + j * p * row, row, src + j * row, s * row, row, p, stream)
    return out


def move_back(y: Any, dim: int, ops: Any, stream: Any = 0) -> Any:
    """The inverse of :func:`move_front`: axis 0 of ``y`` goes back to ``dim``."""
    if dim == 0:
        return y
    fshape = tuple(int(d) for d in y.shape)
    shape = (*fshape[1 : dim + 1], fshape[0], *fshape[dim + 1 :])
    p, s, q = _pq(shape, dim)
    if p == 1:
        return ops.view(y, shape)
    out = ops.empty(shape, y.dtype)
    src, _, _ = buffer_of(y)
    dst, _, _ = buffer_of(out)
    row = q * _itemsize(y)
    if p <= s:
        for i in range(p):
            ops.copy2d(dst + i * s * row, row, src + i * row, p * row, row, s, stream)
    else:
        for j in range(s):
            ops.copy2d(dst + j * row, s * row, src + j * p * row, row, row, p, stream)
    return out


def take(x: Any, dim: int, start: int, count: int, ops: Any, stream: Any = 0) -> Any:
    """Indices ``start .. start+count`` of ``dim``: one strided copy (a view when P is 1)."""
    shape = tuple(int(d) for d in x.shape)
    out_shape = (*shape[:dim], count, *shape[dim + 1 :])
    p, s, q = _pq(shape, dim)
    row = q * _itemsize(x)
    if p == 1:
        return ops.view(x, out_shape, start * row)
    out = ops.empty(out_shape, x.dtype)
    src, _, _ = buffer_of(x)
    dst, _, _ = buffer_of(out)
    ops.copy2d(dst, count * row, src + start * row, s * row, count * row, p, stream)
    return out


def concat_chunks(got: Any, n: int, dim: int, cat: int, ops: Any, stream: Any = 0) -> Any:
    """All-to-all's result when it concatenates along ``cat``, not the split ``dim``: the
    ``n`` chunks of ``got`` (axis 0, front layout) each moved back to ``dim``, placed side by
    side along ``cat``: per chunk, its move back and one strided copy into its place."""
    fshape = tuple(int(d) for d in got.shape)
    c = fshape[0] // n
    piece = (*fshape[1 : dim + 1], c, *fshape[dim + 1 :])  # one chunk, dim back in place
    out_shape = tuple(d * n if i == cat else d for i, d in enumerate(piece))
    out = ops.empty(out_shape, got.dtype)
    dst, _, _ = buffer_of(out)
    p, s, q = _pq(piece, cat)
    row = q * _itemsize(got)
    for j in range(n):
        chunk = ops.view(got, (c, *fshape[1:]), j * c * math.prod(fshape[1:]) * _itemsize(got))
        moved = move_back(chunk, dim, ops, stream)  # held until its copy is issued: the
        src, _, _ = buffer_of(moved)  # address alone would let its memory be freed and reused
        ops.copy2d(dst + j * s * row, n * s * row, src, s * row, s * row, p, stream)
        del moved
    return out


def _collective(group: Any, kind: str, x: Any, op: str, stream: Any, tag: Any, step: Any) -> Any:
    """The flat collective of ``step`` on ``x``: a NCCL communicator's prepared step call
    (:meth:`~kinac.rt.comm.nccl_prepared.PreparedCalls.run_step`: checked at the program's first run,
    then the layout compared and NCCL called), else the communicator's eager method."""
    run = getattr(group, "run_step", None)
    if run is not None and type(stream) is int:
        return run(kind, x, op, stream, tag, step)
    method = getattr(group, kind.replace("-", "_"))
    kw = {"op": op} if kind in ("all-reduce", "reduce-scatter") else {}
    return method(x, stream=stream, tag=tag, **kw)


def device_collective(step: Collective, x: Any, comm: Any, ops: Any, stream: Any = 0) -> Any:
    """The device buffer a collective step writes, from this rank's device buffer ``x``."""
    group = comm.sub(step.axis)
    tag = (step.kind, step.span)
    ndim = len(x.shape)
    kind, dim = step.kind, step.dim % ndim if ndim else step.dim
    if kind == "all-reduce":
        return _collective(group, kind, x, step.reduce_op or "sum", stream, tag, step)
    if kind == "slice":
        size = int(x.shape[dim])
        if size % group.size:
            raise KinaRuntimeError(
                f"slice over {step.axis} at {step.span or '?'}: {group.size} ranks do not "
                f"divide dim {dim} of size {size}"
            )
        c = size // group.size
        return take(x, dim, group.rank * c, c, ops, stream)
    if kind == "all-gather":
        got = _collective(group, kind, move_front(x, dim, ops, stream), "sum", stream, tag, step)
        return move_back(got, dim, ops, stream)
    if kind == "reduce-scatter":
        front = move_front(x, dim, ops, stream)
        got = _collective(group, kind, front, step.reduce_op or "sum", stream, tag, step)
        return move_back(got, dim, ops, stream)
    if kind == "all-to-all":
        cat = dim if step.concat_dim < 0 else step.concat_dim
        got = _collective(group, kind, move_front(x, dim, ops, stream), "sum", stream, tag, step)
        if cat == dim:  # the chunks concatenated back along dim: the inverse move
            return move_back(got, dim, ops, stream)
        return concat_chunks(got, group.size, dim, cat, ops, stream)
    raise KinaRuntimeError(f"unknown collective step {kind!r} at {step.span or '?'}")


def run_device_program(
    program: DeviceProgram,
    segments: Sequence[Callable[..., Any]],
    comm: Any,
    local_inputs: Sequence[Any],
    ops: Any,
    stream: Any = 0,
) -> list[Any]:
    """Run ``program`` as this rank of ``comm`` (the mesh's world NCCL communicator) on its
    local inputs (device buffers, or host arrays, uploaded once); its outputs, device
    buffers in local shapes, in the program's order (nothing waited for: the caller
    synchronizes before reading them on the host)."""
    slots: dict[int, Any] = {
        i: ops.upload(a) if isinstance(a, np.ndarray) else a
        for i, a in enumerate(checked_inputs(program, local_inputs))
    }
    return walk_program(
        program,
        segments,
        slots,
        # an output placed on the host comes back as numpy: back on the device
        lambda value: ops.upload(np.asarray(value)) if _is_host(value) else value,
        lambda step, x: device_collective(step, x, comm, ops, stream),
    )


def _is_host(value: Any) -> bool:
    return isinstance(value, np.ndarray | np.generic)
