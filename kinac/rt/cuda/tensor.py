"""The runtime tensor: a device pointer, a shape, strides and a dtype, plus an owner.

The owner keeps the memory alive: an :class:`Allocation` (memory from a
:class:`~kinac.rt.cuda.resources.MemoryResource`, given back when the last tensor using it
goes), an imported DLPack tensor (its producer's deleter runs then), or, for host tensors, a
NumPy array.  Tensors carry the stream their data is ready on, which the DLPack producer uses
to order a consumer's stream after it.  Host (``kDLCPU``) tensors exist so that the DLPack
machinery is testable without a GPU.
"""

from __future__ import annotations

import ctypes
import math
from dataclasses import dataclass
from typing import Any

from kinac.rt.cuda import driver
from kinac.rt.cuda.resources import MemoryResource

KDL_CPU = 1
KDL_CUDA = 2
KDL_CUDA_HOST = 3  # page-locked host memory (torch's pin_memory()): readable on the host


@dataclass(frozen=True)
class DType:
    """An element type: its name and DLPack (code, bits, lanes)."""

    name: str
    code: int
    bits: int
    lanes: int = 1

    @property
    def itemsize(self) -> int:
        """Bytes per element."""
        return self.bits * self.lanes // 8


_DTYPES = [
    DType("bool", 6, 8),
    DType("int8", 0, 8),
    DType("int16", 0, 16),
    DType("int32", 0, 32),
    DType("int64", 0, 64),
    DType("uint8", 1, 8),
    DType("uint16", 1, 16),
    DType("uint32", 1, 32),
    DType("uint64", 1, 64),
    DType("float16", 2, 16),
    DType("float32", 2, 32),
    DType("float64", 2, 64),
    DType("bfloat16", 4, 16),
]
DTYPES: dict[str, DType] = {d.name: d for d in _DTYPES}
_BY_CODE: dict[tuple[int, int, int], DType] = {(d.code, d.bits, d.lanes): d for d in _DTYPES}


def dtype_of(code: int, bits: int, lanes: int) -> DType:
    """The DType for a DLPack (code, bits, lanes); BufferError if kinac has none."""
    try:
        return _BY_CODE[(code, bits, lanes)]
    except KeyError:
        raise BufferError(
            f"unsupported DLPack dtype code={code} bits={bits} lanes={lanes}"
        ) from None


def contiguous_strides(shape: tuple[int, ...]) -> tuple[int, ...]:
    """Row-major strides, in elements."""
    out = []
    acc = 1
    for n in reversed(shape):
        out.append(acc)
        acc *= max(n, 1)
    return tuple(reversed(out))


class Allocation:
    """Memory from a resource, given back when garbage-collected (or by :meth:`free`)."""

    __slots__ = ("ptr", "nbytes", "resource", "stream")

    def __init__(self, resource: MemoryResource, nbytes: int, stream: int = 0) -> None:
        self.resource = resource
        self.nbytes = nbytes
        self.stream = stream
        self.ptr = resource.allocate(nbytes, stream)

    def free(self) -> None:
        """Give the memory back now."""
        if self.ptr:
            ptr, self.ptr = self.ptr, 0
            self.resource.deallocate(ptr, self.nbytes, self.stream)

    def __del__(self) -> None:
        try:
            self.free()
        except Exception:  # noqa: BLE001 - never raise from a finaliser (shutdown, dead driver)
            pass


class Tensor:
    """A strided view of device (or host) memory; see the module docstring."""

    __slots__ = (
        "ptr",
        "shape",
        "strides",
        "dtype",
        "device",
        "stream",
        "readonly",
        "owner",
        "__weakref__",
    )
    __weakref__: Any  # the first weak reference to it, or None (entry_hot.take reads it)

    def __init__(
        self,
        ptr: int,
        shape: tuple[int, ...],
        dtype: DType | str,
        *,
        device: tuple[int, int] = (KDL_CUDA, 0),
        strides: tuple[int, ...] | None = None,
        owner: Any = None,
        stream: int = 0,
        readonly: bool = False,
    ) -> None:
        self.ptr = int(ptr)
        self.shape = tuple(int(n) for n in shape)
        self.dtype = DTYPES[dtype] if isinstance(dtype, str) else dtype
        self.strides = contiguous_strides(self.shape) if strides is None else tuple(strides)
        self.device = device
        self.owner = owner
        self.stream = stream
        self.readonly = readonly

    # ---- construction ---------------------------------------------------------------------
    @classmethod
    def empty(
        cls, shape: tuple[int, ...], dtype: DType | str, resource: MemoryResource, stream: int = 0
    ) -> Tensor:
        """Uninitialised device tensor from ``resource``, ready in order on ``stream``."""
        dt = DTYPES[dtype] if isinstance(dtype, str) else dtype
        alloc = Allocation(resource, math.prod(shape) * dt.itemsize, stream)
        dev = (KDL_CUDA, getattr(resource, "ordinal", 0))
        return cls(alloc.ptr, shape, dt, device=dev, owner=alloc, stream=stream)

    @classmethod
    def from_numpy(cls, array: Any, resource: MemoryResource, stream: int = 0) -> Tensor:
        """Copy a NumPy array to a new device tensor (synchronous for the host array)."""
        import numpy as np

        a = np.ascontiguousarray(array).reshape(np.shape(array))  # rank 0 stays rank 0
        t = cls.empty(a.shape, str(a.dtype), resource, stream)
        t.copy_from_host(a)
        return t

    @classmethod
    def host(cls, array: Any) -> Tensor:
        """A host tensor viewing ``array``'s memory (no copy)."""
        a = array
        item = a.dtype.itemsize
        strides = tuple(s // item for s in a.strides)
        return cls(
            a.ctypes.data, a.shape, str(a.dtype), device=(KDL_CPU, 0), strides=strides, owner=a
        )

    # ---- properties -----------------------------------------------------------------------
    @property
    def numel(self) -> int:
        """Number of elements."""
        return math.prod(self.shape)

    @property
    def nbytes(self) -> int:
        """Bytes covered by the elements (contiguous layout)."""
        return self.numel * self.dtype.itemsize

    def is_contiguous(self) -> bool:
        """Row-major without gaps."""
        return self.strides == contiguous_strides(self.shape) or self.numel <= 1

    @property
    def is_cuda(self) -> bool:
        """True for device memory."""
        return self.device[0] == KDL_CUDA

    # ---- copies ---------------------------------------------------------------------------
    def copy_from_host(self, array: Any) -> None:
        """Copy a contiguous host array of the same size into this tensor and wait."""
        import numpy as np

        a = np.ascontiguousarray(array)
        if a.nbytes != self.nbytes or not self.is_contiguous():
            raise ValueError(f"copy_from_host: {a.nbytes} bytes into a {self.nbytes}-byte tensor")
        if not self.is_cuda:
            np.copyto(self.numpy(), a.reshape(self.shape).view(self.numpy().dtype))
            return
        d = driver.api()
        driver.check(
            "cuMemcpyHtoDAsync", d.cuMemcpyHtoDAsync(self.ptr, a.ctypes.data, a.nbytes, self.stream)
        )
        driver.check("cuStreamSynchronize", d.cuStreamSynchronize(self.stream))

    def numpy(self) -> Any:
        """A NumPy array of the contents (a copy for device tensors, a view for host ones)."""
        import numpy as np

        npdt = np.dtype("uint16") if self.dtype.name == "bfloat16" else np.dtype(self.dtype.name)
        if not self.is_cuda:
            span = self._span_bytes()
            buf = (ctypes.c_uint8 * max(span, 1)).from_address(self.ptr)
            flat = np.frombuffer(memoryview(buf), dtype=np.uint8)[:span].view(npdt)
            item = npdt.itemsize
            return np.lib.stride_tricks.as_strided(
                flat, shape=self.shape, strides=tuple(s * item for s in self.strides)
            )
        if not self.is_contiguous():
            raise ValueError("numpy() of a non-contiguous device tensor")
        out = np.empty(self.shape, dtype=npdt)
        if self.nbytes:
            d = driver.api()
            driver.check("cuStreamSynchronize", d.cuStreamSynchronize(self.stream))
            driver.check(
                "cuMemcpyDtoHAsync",
                d.cuMemcpyDtoHAsync(out.ctypes.data, self.ptr, self.nbytes, self.stream),
            )
            driver.check("cuStreamSynchronize", d.cuStreamSynchronize(self.stream))
        return out

    def _span_bytes(self) -> int:
        if self.numel == 0:
            return 0
        last = sum((n - 1) * s for n, s in zip(self.shape, self.strides, strict=True))
        return (last + 1) * self.dtype.itemsize

    def clone(self, resource: MemoryResource | None = None) -> Tensor:
        """A contiguous device copy (same stream); resource: this tensor's, or a cuda one."""
        if not self.is_cuda or not self.is_contiguous():
            raise ValueError("clone() supports contiguous device tensors")
        if resource is None:
            resource = (
                self.owner.resource if isinstance(self.owner, Allocation) else default_resource()
            )
        out = Tensor.empty(self.shape, self.dtype, resource, self.stream)
        if self.nbytes:
            d = driver.api()
            driver.check(
                "cuMemcpyDtoDAsync",
                d.cuMemcpyDtoDAsync(out.ptr, self.ptr, self.nbytes, self.stream),
            )
        return out

    # ---- DLPack ---------------------------------------------------------------------------
    def __dlpack__(
        self,
        *,
        stream: int | None = None,
        max_version: tuple[int, int] | None = None,
        dl_device: tuple[int, int] | None = None,
        copy: bool | None = None,
    ) -> Any:
        from kinac.rt.cuda.dlpack import export

        return export(self, stream=stream, max_version=max_version, dl_device=dl_device, copy=copy)

    def __dlpack_device__(self) -> tuple[int, int]:
        return self.device

    @classmethod
    def from_dlpack(cls, obj: Any, stream: int = 0) -> Tensor:
        """Import any DLPack producer (or capsule) without copying; used in order on ``stream``."""
        from kinac.rt.cuda.dlpack import import_

        return import_(obj, stream=stream)

    def __repr__(self) -> str:
        kind = "cuda" if self.is_cuda else "cpu"
        return f"Tensor({kind}, 0x{self.ptr:x}, shape={self.shape}, {self.dtype.name})"


_defaults: dict[int, MemoryResource] = {}


def default_resource() -> MemoryResource:
    """The current device's default resource (a pool over ``cuMemAlloc``), created on first
    use; one per GPU."""
    from kinac.rt.cuda.device import current_device

    ordinal = current_device().ordinal
    res = _defaults.get(ordinal)
    if res is None:
        from kinac.rt.cuda.device import order_streams
        from kinac.rt.cuda.pool import PoolResource
        from kinac.rt.cuda.resources import CudaResource

        res = _defaults[ordinal] = PoolResource(CudaResource(), order=order_streams)
    return res
