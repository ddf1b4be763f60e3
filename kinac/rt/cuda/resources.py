"""Memory resources: one protocol, several implementations (in the spirit of RAPIDS RMM).

A :class:`MemoryResource` hands out device pointers (ints) for a byte count on a stream (a raw
stream handle, 0 for the NULL stream) and takes them back.  ``cuda`` wraps ``cuMemAlloc``,
``async`` the driver's stream-ordered ``cuMemAllocAsync``, ``pool`` (see ``pool.py``) sub-allocates
large segments from another resource, and ``logging`` wraps any resource and writes one JSON line
per call.  :class:`VirtualResource` simulates an address space on the host; it backs the pool in
tests that run without a GPU.

A resource belongs to one GPU: the current one when it is created (``ordinal``, which tensors
allocated from it report as their DLPack device).  Once a process uses several GPUs, ``cuda``
makes its own device current around each ``cuMemAlloc``/``cuMemFree``, so memory lands on the
resource's GPU whatever is current at the call.
"""

from __future__ import annotations

import json
import time
from typing import IO, Any, Protocol, runtime_checkable

from kinac.rt.cuda import device, driver
from kinac.rt.cuda.errors import CudaOutOfMemoryError, OutOfMemoryError
from kinac.rt.cuda.stats import Stats, Tracker


@runtime_checkable
class MemoryResource(Protocol):
    """What every allocator offers."""

    name: str
    ordinal: int  # the GPU the memory is on

    def allocate(self, nbytes: int, stream: int = 0) -> int:
        """A pointer to at least ``nbytes`` bytes usable in order on ``stream``."""
        ...

    def deallocate(self, ptr: int, nbytes: int = 0, stream: int = 0) -> None:
        """Give ``ptr`` back; work queued on ``stream`` before this call may still use it."""
        ...

    def memory_stats(self) -> Stats:
        """torch.cuda.memory_stats-shaped statistics."""
        ...


class CudaResource:
    """``cuMemAlloc`` / ``cuMemFree``: synchronous, not stream-ordered, no caching."""

    name = "cuda"

    def __init__(self) -> None:
        self.device = device.current_device()
        self.ordinal = self.device.ordinal
        d = driver.api()
        self._alloc = d.cuMemAlloc
        self._free = d.cuMemFree
        self._t = Tracker()

    def allocate(self, nbytes: int, stream: int = 0) -> int:
        if device.device_count_in_use() > 1:
            pushed = self.device.enter()
            try:
                r = self._alloc(max(nbytes, 1))
            finally:
                self.device.leave(pushed)
        else:
            r = self._alloc(max(nbytes, 1))
        if r[0] != driver.OK:
            self._raise("cuMemAlloc", r[0], nbytes)
        ptr = int(r[1])
        self._t.on_alloc(ptr, nbytes)
        return ptr

    def _raise(self, call: str, err: Any, nbytes: int) -> None:
        e = driver.make_error(call, err)
        if isinstance(e, CudaOutOfMemoryError):
            self._t.num_ooms += 1
            raise OutOfMemoryError(nbytes, self.name, self.memory_stats(), str(e)) from e
        raise e

    def deallocate(self, ptr: int, nbytes: int = 0, stream: int = 0) -> None:
        self._t.on_free(ptr)
        if device.device_count_in_use() > 1:
            pushed = self.device.enter()
            try:
                r = self._free(ptr)
            finally:
                self.device.leave(pushed)
        else:
            r = self._free(ptr)
        if r[0] != driver.OK:
            driver.fail("cuMemFree", r[0])

    def memory_stats(self) -> Stats:
        return self._t.stats()

    def reset_peak_stats(self) -> None:
        """Peaks restart from the current values."""
        self._t.reset_peak()


class AsyncResource(CudaResource):
    """``cuMemAllocAsync`` / ``cuMemFreeAsync`` on the device's default memory pool.

    The pool's release threshold is raised to "keep everything" (as RMM's async resource does),
    so freed memory is reused instead of going back to the driver at each synchronisation.
    """

    name = "async"

    def __init__(self, release_threshold: int = 2**64 - 1) -> None:
        super().__init__()
        d = driver.api()
        self._alloc_async = d.cuMemAllocAsync  # from the pool of the stream's device
        self._free_async = d.cuMemFreeAsync
        dev = self.device
        pool = driver.check("cuDeviceGetDefaultMemPool", d.cuDeviceGetDefaultMemPool(dev.cu_device))
        attr = d.CUmemPool_attribute.CU_MEMPOOL_ATTR_RELEASE_THRESHOLD
        try:
            res = d.cuMemPoolSetAttribute(pool, attr, d.cuuint64_t(release_threshold))
        except TypeError:  # bindings that take a plain int
            res = d.cuMemPoolSetAttribute(pool, attr, release_threshold)
        driver.check("cuMemPoolSetAttribute", res)
        self.release_threshold = release_threshold

    def allocate(self, nbytes: int, stream: int = 0) -> int:
        r = self._alloc_async(max(nbytes, 1), stream)
        if r[0] != driver.OK:
            self._raise("cuMemAllocAsync", r[0], nbytes)
        ptr = int(r[1])
        self._t.on_alloc(ptr, nbytes)
        return ptr

    def deallocate(self, ptr: int, nbytes: int = 0, stream: int = 0) -> None:
        self._t.on_free(ptr)
        r = self._free_async(ptr, stream)
        if r[0] != driver.OK:
            driver.fail("cuMemFreeAsync", r[0])


class LoggingResource:
    """Wraps a resource; writes a JSON line per allocate/deallocate (and per failure)."""

    def __init__(self, upstream: MemoryResource, sink: str | IO[str]) -> None:
        self.upstream = upstream
        self.name = f"logging({upstream.name})"
        self.ordinal = getattr(upstream, "ordinal", 0)
        self._own = isinstance(sink, str)
        self._f: IO[str] = open(sink, "w", encoding="utf-8") if isinstance(sink, str) else sink
        self._t0 = time.perf_counter_ns()

    def _log(self, rec: dict[str, Any]) -> None:
        rec["t_ns"] = time.perf_counter_ns() - self._t0
        self._f.write(json.dumps(rec, separators=(",", ":")) + "\n")

    def allocate(self, nbytes: int, stream: int = 0) -> int:
        try:
            ptr = self.upstream.allocate(nbytes, stream)
        except Exception as e:
            self._log({"op": "allocate", "nbytes": nbytes, "stream": stream, "error": str(e)})
            raise
        self._log({"op": "allocate", "ptr": ptr, "nbytes": nbytes, "stream": stream})
        return ptr

    def deallocate(self, ptr: int, nbytes: int = 0, stream: int = 0) -> None:
        self._log({"op": "deallocate", "ptr": ptr, "nbytes": nbytes, "stream": stream})
        self.upstream.deallocate(ptr, nbytes, stream)

    def memory_stats(self) -> Stats:
        return self.upstream.memory_stats()

    def flush(self) -> None:
        """Flush the log."""
        self._f.flush()

    def close(self) -> None:
        """Flush, and close the log file if this resource opened it."""
        self._f.flush()
        if self._own:
            self._f.close()


class VirtualResource:
    """A simulated address space on the host: no memory, only addresses and a capacity.

    Segments are placed back to back from ``base`` (``gap`` bytes apart, 0 = adjacent, which
    checks that a pool never merges blocks of different segments).  Beyond ``capacity`` bytes
    live, allocation raises OutOfMemoryError.
    """

    name = "virtual"
    ordinal = 0

    def __init__(
        self, capacity: int = 1 << 40, base: int = 1 << 32, gap: int = 0, align: int = 1 << 21
    ) -> None:
        self.capacity = capacity
        self._next = base
        self._gap = gap
        self._align = align
        self._t = Tracker()
        self.calls: list[tuple[str, int, int, int]] = []

    def allocate(self, nbytes: int, stream: int = 0) -> int:
        if self._t.cur + nbytes > self.capacity:
            self._t.num_ooms += 1
            raise OutOfMemoryError(nbytes, self.name, self.memory_stats(), "capacity exceeded")
        ptr = self._next
        self._next += -(-nbytes // self._align) * self._align + self._gap
        self._t.on_alloc(ptr, nbytes)
        self.calls.append(("allocate", ptr, nbytes, stream))
        return ptr

    def deallocate(self, ptr: int, nbytes: int = 0, stream: int = 0) -> None:
        size = self._t.on_free(ptr)
        if nbytes and nbytes != size:
            raise ValueError(f"deallocate(0x{ptr:x}, {nbytes}): allocated with {size} bytes")
        self.calls.append(("deallocate", ptr, size, stream))

    def memory_stats(self) -> Stats:
        return self._t.stats()
