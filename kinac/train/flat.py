"""Flat buffers: every parameter of one dtype is a view of a slice of one buffer.

Why: an optimizer step over flat buffers is one call per update formula over all the weights
(3 for AdamW), not one per tensor and formula (117 for the 100M decoder), and the
loss-and-gradient call writes each gradient straight into its slice of the flat gradient
buffer. Slices start at multiples of :data:`ALIGN` elements (256 bytes in f32), so every
view is as aligned as a fresh allocation (GPU kernels and cuBLAS read 16-byte vectors); the
gaps hold zeros, which every update keeps at zero.

:class:`HostStore` keeps the buffers in numpy arrays; :class:`DeviceStore` in kinac CUDA
tensors from the runtime's memory pool (views are tensors owning a reference to the buffer).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

ALIGN = 64  # elements between slice starts


@dataclass(frozen=True)
class Member:
    """One parameter's slice: its name, first element and shape."""

    name: str
    offset: int
    shape: tuple[int, ...]

    @property
    def size(self) -> int:
        return math.prod(self.shape)


def layout(shapes: dict[str, tuple[int, ...]]) -> tuple[tuple[Member, ...], int]:
    """The members in order, each at the next multiple of :data:`ALIGN`, and the total size."""
    members, off = [], 0
    for name, shape in shapes.items():
        members.append(Member(name, off, tuple(shape)))
        off += -(-math.prod(shape) // ALIGN) * ALIGN
    return tuple(members), off


class HostStore:
    """Flat buffers in host memory (numpy)."""

    device = False

    def zeros(self, n: int, dtype: Any) -> Any:
        import numpy as np

        return np.zeros(n, dtype)

    def empty(self, n: int, dtype: Any) -> Any:
        import numpy as np

        return np.empty(n, dtype)

    def output(self, shape: tuple[int, ...], dtype: str) -> Any:
        """A buffer for an entry's output of Kina dtype ``dtype``."""
        import numpy as np

        from kinac.rt.host.arrays import NP_DTYPES

        return np.empty(shape, NP_DTYPES[dtype])

    def dtype_name(self, buf: Any) -> str:
        """The Kina dtype of ``buf`` (``f32``)."""
        from kinac.rt.host.arrays import NP_DTYPES

        return next(k for k, v in NP_DTYPES.items() if v == buf.dtype)

    def view(self, buf: Any, m: Member) -> Any:
        return buf[m.offset : m.offset + m.size].reshape(m.shape)

    def upload(self, host: Any, dtype: Any) -> Any:
        return host.astype(dtype, copy=True)

    def same(self, a: Any, b: Any) -> bool:
        """Whether ``a`` is already ``b``'s memory (a gradient written in place)."""
        import numpy as np

        return isinstance(a, np.ndarray) and a.ctypes.data == b.ctypes.data

    def copy(self, dst: Any, src: Any) -> None:
        import numpy as np

        from kinac.train.optim import to_numpy

        np.copyto(dst, to_numpy(src))


class DeviceStore:
    """Flat buffers in GPU memory: kinac tensors from the runtime's default resource."""

    device = True

    def __init__(self) -> None:
        from kinac.rt import cuda

        self.resource = cuda.default_resource()

    def zeros(self, n: int, dtype: Any) -> Any:
        import numpy as np

        return self.upload(np.zeros(n, dtype), dtype)

    def empty(self, n: int, dtype: Any) -> Any:
        from kinac.rt.cuda import Tensor

        return Tensor.empty((n,), dtype.name, self.resource)

    def output(self, shape: tuple[int, ...], dtype: str) -> Any:
        """A buffer for an entry's output of Kina dtype ``dtype``."""
        from kinac.rt.cuda import Tensor
        from kinac.rt.cuda.entry_support import DL_NAMES

        return Tensor.empty(tuple(shape), DL_NAMES[dtype], self.resource)

    def dtype_name(self, buf: Any) -> str:
        """The Kina dtype of ``buf`` (``f32``)."""
        from kinac.rt.cuda.entry_support import DL_NAMES

        return next(k for k, v in DL_NAMES.items() if v == buf.dtype.name)

    def view(self, buf: Any, m: Member) -> Any:
        from kinac.rt.cuda import Tensor

        ptr = buf.ptr + m.offset * buf.dtype.itemsize
        return Tensor(ptr, m.shape, buf.dtype, device=buf.device, owner=buf)

    def upload(self, host: Any, dtype: Any) -> Any:
        t = self.empty(host.size, dtype)
        t.copy_from_host(host.astype(dtype, copy=False))
        return t

    def same(self, a: Any, b: Any) -> bool:
        return getattr(a, "ptr", None) == b.ptr

    def copy(self, dst: Any, src: Any) -> None:
        from kinac.rt.cuda.entry_into import copy_device

        copy_device(dst, src)
