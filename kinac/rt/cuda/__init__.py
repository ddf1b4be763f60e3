"""kinac's CUDA runtime, on cuda-python's driver bindings.

Importing this package never loads the driver (only ``driver.py`` imports cuda-python, lazily),
so it works on machines without a GPU.  Public API:

* :func:`available`, :func:`get_device`, :func:`current_device`, :class:`Device`, :class:`Stream`, :class:`Event`
* :func:`load_module`, :class:`Module`, :class:`Kernel`, :class:`Launch` (pre-packed arguments)
* :func:`capture` / :class:`CapturedGraph` (CUDA graphs with an eager fallback)
* memory: :class:`MemoryResource`, :class:`CudaResource`, :class:`AsyncResource`,
  :class:`PoolResource` (+ :class:`GrowthPolicy`), :class:`LoggingResource`,
  :class:`VirtualResource`; :func:`make_resource` builds one by name
* :class:`Tensor` with ``__dlpack__`` / ``__dlpack_device__`` / ``Tensor.from_dlpack``
* :func:`pinned_empty`: a numpy array in page-locked memory that GPU entries copy from in place
* errors: :class:`CudaError`, :class:`CudaUnavailableError`, :class:`OutOfMemoryError`,
  :class:`GraphCaptureWarning`
"""

from __future__ import annotations

from kinac.rt.cuda.device import (
    Device,
    Event,
    Stream,
    current_device,
    get_device,
    order_streams,
)
from kinac.rt.cuda.driver import available, unavailable_reason
from kinac.rt.cuda.errors import (
    CudaError,
    CudaOutOfMemoryError,
    CudaUnavailableError,
    GraphCaptureWarning,
    KinacRuntimeError,
    OutOfMemoryError,
)
from kinac.rt.cuda.graph import CapturedGraph, capture
from kinac.rt.cuda.module import Kernel, Launch, Module, load_module
from kinac.rt.cuda.pinned import pinned_empty
from kinac.rt.cuda.pool import GrowthPolicy, PoolResource
from kinac.rt.cuda.resources import (
    AsyncResource,
    CudaResource,
    LoggingResource,
    MemoryResource,
    VirtualResource,
)
from kinac.rt.cuda.tensor import DTYPES, DType, Tensor, default_resource


def make_resource(
    name: str, *, log_path: str | None = None, policy: GrowthPolicy | None = None
) -> MemoryResource:
    """``cuda``, ``async``, ``pool`` (over ``cuda``) or ``logging`` (over a pool; needs log_path)."""
    if name == "cuda":
        return CudaResource()
    if name == "async":
        return AsyncResource()
    if name == "pool":
        return PoolResource(CudaResource(), policy, order=order_streams)
    if name == "logging":
        if log_path is None:
            raise ValueError("the logging resource needs log_path")
        return LoggingResource(make_resource("pool", policy=policy), log_path)
    raise ValueError(f"unknown memory resource {name!r}: cuda, async, pool or logging")


__all__ = [
    "DTYPES",
    "AsyncResource",
    "CapturedGraph",
    "CudaError",
    "CudaOutOfMemoryError",
    "CudaResource",
    "CudaUnavailableError",
    "DType",
    "Device",
    "Event",
    "GraphCaptureWarning",
    "GrowthPolicy",
    "Kernel",
    "KinacRuntimeError",
    "Launch",
    "LoggingResource",
    "MemoryResource",
    "Module",
    "OutOfMemoryError",
    "PoolResource",
    "Stream",
    "Tensor",
    "VirtualResource",
    "available",
    "capture",
    "current_device",
    "default_resource",
    "get_device",
    "load_module",
    "make_resource",
    "order_streams",
    "pinned_empty",
    "unavailable_reason",
]
