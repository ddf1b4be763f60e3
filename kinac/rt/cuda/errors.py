"""Error and warning classes of the CUDA runtime.

Every driver call is checked; a failure becomes a :class:`CudaError` that names the call and the
CUDA error (its enum name, number and the driver's description), so a log line is enough to see
what went wrong without a debugger.  Out of memory is its own class (also a ``MemoryError``) and
carries the allocator's statistics.
"""

from __future__ import annotations

from collections.abc import Mapping

from kinac.errors import KinaRuntimeError


class KinacRuntimeError(KinaRuntimeError):
    """Base class of kinac's runtime errors (internal or environmental, never user input)."""


class CudaUnavailableError(KinacRuntimeError):
    """No usable CUDA driver or device (no cuda-python, no libcuda, or zero devices)."""


class CudaError(KinacRuntimeError):
    """A CUDA driver call returned an error.

    ``call`` is the driver function (``cuModuleLoadData``), ``code`` the CUresult number,
    ``name`` its enum name (``CUDA_ERROR_INVALID_PTX``) and ``description`` the driver's string.
    """

    def __init__(self, call: str, code: int, name: str, description: str, detail: str = "") -> None:
        self.call = call
        self.code = code
        self.name = name
        self.description = description
        self.detail = detail
        msg = f"{call} failed: {name} ({code}): {description}"
        if detail:
            msg += f"\n{detail}"
        super().__init__(msg)


class CudaOutOfMemoryError(CudaError, MemoryError):
    """The driver itself reported CUDA_ERROR_OUT_OF_MEMORY."""


class OutOfMemoryError(KinacRuntimeError, MemoryError):
    """An allocation could not be satisfied; ``stats`` holds the resource's statistics."""

    def __init__(
        self, nbytes: int, resource: str, stats: Mapping[str, float], cause: str = ""
    ) -> None:
        self.nbytes = nbytes
        self.resource = resource
        self.stats = dict(stats)
        keys = (
            "allocated_bytes.all.current",
            "reserved_bytes.all.current",
            "reserved_bytes.all.peak",
            "segment.all.current",
            "largest_free_block_bytes",
            "fragmentation_pct",
            "num_alloc_retries",
            "num_ooms",
        )
        shown = ", ".join(f"{k}={self.stats[k]:g}" for k in keys if k in self.stats)
        msg = f"out of device memory: {resource} could not allocate {nbytes} bytes ({shown})"
        if cause:
            msg += f"; cause: {cause}"
        super().__init__(msg)


class GraphCaptureWarning(RuntimeWarning):
    """CUDA graph capture failed; the entry runs with eager launches instead."""
