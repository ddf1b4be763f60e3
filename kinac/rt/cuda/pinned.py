"""Page-locked host memory, pooled: ``cuMemHostAlloc`` blocks cached by size class.

Why: a host-to-device copy from pageable memory is staged by the driver through its own
pinned bounce buffer and does not overlap with anything; from page-locked memory it is one DMA
that runs on a copy engine while kernels run. ``cuMemHostAlloc`` itself is slow (it pins pages:
a system call, tens of microseconds to milliseconds), so blocks are kept and handed out again,
like the device pool does (:mod:`kinac.rt.cuda.pool`), with the same ``memory_stats()`` keys.

Size classes: a request is rounded up to a power of two (at least 4 KiB) up to 64 MiB, and to a
multiple of 2 MiB above; a freed block goes to its class's free list and serves the next
request of that class. ``max_cached_bytes`` bounds what is kept free (beyond it, a freed block
goes back to the driver); :meth:`release` gives back everything cached.

The driver calls are injectable (``alloc``/``free``), so the pool's bookkeeping is tested on
machines without a GPU over ordinary host memory.
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable
from typing import Any

from kinac.rt.cuda.stats import Stats, percentages, stat

KiB, MiB = 1 << 10, 1 << 20
PORTABLE = 1  # CU_MEMHOSTALLOC_PORTABLE: pinned for every context, so any device may copy it
WRITECOMBINED = 4  # CU_MEMHOSTALLOC_WRITECOMBINED: not cached by the CPU, not snooped by DMAs


def size_class(nbytes: int) -> int:
    """The block size a request of ``nbytes`` gets."""
    n = max(int(nbytes), 4 * KiB)
    if n <= 64 * MiB:
        return 1 << (n - 1).bit_length()
    return -(-n // (2 * MiB)) * (2 * MiB)


def _driver_alloc(nbytes: int, flags: int = PORTABLE) -> int:
    from kinac.rt.cuda import driver
    from kinac.rt.cuda.device import current_device

    current_device()  # cuMemHostAlloc needs a current context
    d = driver.api()
    return int(driver.check("cuMemHostAlloc", d.cuMemHostAlloc(nbytes, flags)))


def _driver_free(ptr: int) -> None:
    from kinac.rt.cuda import driver

    driver.check("cuMemFreeHost", driver.api().cuMemFreeHost(ptr))


class PinnedPool:
    """Pooled page-locked host memory with ``torch.cuda.memory_stats``-shaped statistics.

    ``allocate(n)`` returns a host address valid for at least ``n`` bytes; ``deallocate``
    takes it back. The pool does not know about streams: a caller that hands a block to an
    asynchronous copy keeps it until the copy is done (the entry's stager does, with events).
    """

    def __init__(
        self,
        *,
        max_cached_bytes: int = 1 << 30,
        alloc: Callable[[int], int] | None = None,
        free: Callable[[int], None] | None = None,
    ) -> None:
        self.max_cached_bytes = max_cached_bytes
        self._alloc = alloc or _driver_alloc
        self._free = free or _driver_free
        self._cache: dict[int, list[int]] = {}  # class size -> free blocks
        self._used: dict[int, tuple[int, int]] = {}  # ptr -> (block size, requested)
        self._cached = 0
        self._reserved = self._res_peak = self._res_total = 0
        self._cur = self._peak = self._total = 0
        self._req_cur = self._req_peak = self._req_total = 0
        self._n_peak = self._n_total = 0
        self._segs = self._seg_peak = self._seg_total = 0
        self.hits = 0  # requests served from the cache
        self.misses = 0  # requests that called cuMemHostAlloc

    def allocate(self, nbytes: int) -> int:
        """A page-locked block of at least ``nbytes`` bytes (its address)."""
        size = size_class(nbytes)
        free = self._cache.get(size)
        if free:
            ptr = free.pop()
            self._cached -= size
            self.hits += 1
        else:
            ptr = self._alloc(size)
            self.misses += 1
            self._reserved += size
            self._res_total += size
            self._res_peak = max(self._res_peak, self._reserved)
            self._segs += 1
            self._seg_total += 1
            self._seg_peak = max(self._seg_peak, self._segs)
        self._used[ptr] = (size, int(nbytes))
        self._cur += size
        self._peak = max(self._peak, self._cur)
        self._total += size
        self._req_cur += int(nbytes)
        self._req_peak = max(self._req_peak, self._req_cur)
        self._req_total += int(nbytes)
        self._n_total += 1
        self._n_peak = max(self._n_peak, len(self._used))
        return ptr

    def deallocate(self, ptr: int, nbytes: int = 0) -> None:
        """Take a block back (cached, or given back to the driver past ``max_cached_bytes``)."""
        size, req = self._used.pop(ptr)
        self._cur -= size
        self._req_cur -= req
        if self._cached + size > self.max_cached_bytes:
            self._give_back(ptr, size)
            return
        self._cache.setdefault(size, []).append(ptr)
        self._cached += size

    def _give_back(self, ptr: int, size: int) -> None:
        self._free(ptr)
        self._reserved -= size
        self._segs -= 1

    def release(self) -> int:
        """Give every cached block back to the driver; the bytes released."""
        freed = 0
        for size, ptrs in self._cache.items():
            for p in ptrs:
                self._give_back(p, size)
                freed += size
        self._cache.clear()
        self._cached = 0
        return freed

    def memory_stats(self) -> Stats:
        """The device pool's keys (``allocated_bytes.all.current``, ``reserved_bytes...``,
        ``fragmentation_pct`` as requested / reserved at the peak), plus ``cached_bytes``,
        ``hits`` and ``misses``."""
        out: Stats = {}
        n = len(self._used)
        stat(out, "allocation", n, self._n_peak, self._n_total, self._n_total - n)
        cur, tot = self._cur, self._total
        stat(out, "allocated_bytes", cur, self._peak, tot, tot - cur)
        rc, rt = self._req_cur, self._req_total
        stat(out, "requested_bytes", rc, self._req_peak, rt, rt - rc)
        res, rtot = self._reserved, self._res_total
        stat(out, "reserved_bytes", res, self._res_peak, rtot, rtot - res)
        stat(out, "segment", self._segs, self._seg_peak, self._seg_total, self._seg_total - self._segs)  # fmt: skip
        largest = max((s for s, ps in self._cache.items() if ps), default=0)
        percentages(out, res, cur, largest)
        out["external_fragmentation_pct"] = out["fragmentation_pct"]
        peak = self._res_peak
        out["fragmentation_pct"] = 100.0 * (1 - self._req_peak / peak) if peak else 0.0
        out["cached_bytes"] = self._cached
        out["hits"] = self.hits
        out["misses"] = self.misses
        return out

    def check(self) -> None:
        """Verify the counters against the blocks (AssertionError if off); for tests."""
        used = sum(s for s, _ in self._used.values())
        cached = sum(s * len(ps) for s, ps in self._cache.items())
        assert self._cur == used, "allocated bytes mismatch"
        assert self._cached == cached, "cached bytes mismatch"
        assert self._reserved == used + cached, "reserved bytes mismatch"
        assert self._segs == len(self._used) + sum(len(ps) for ps in self._cache.values())
        assert self._req_cur == sum(r for _, r in self._used.values()), "requested mismatch"


class PinnedBuffer:
    """A block of a :class:`PinnedPool` with a numpy view, given back when collected."""

    __slots__ = ("pool", "ptr", "nbytes", "array")

    def __init__(self, pool: PinnedPool, shape: tuple[int, ...], dtype: Any) -> None:
        import math

        import numpy as np

        dt = np.dtype(dtype)
        self.pool = pool
        self.nbytes = math.prod(shape) * dt.itemsize
        self.ptr = pool.allocate(self.nbytes)
        raw = (ctypes.c_uint8 * max(self.nbytes, 1)).from_address(self.ptr)
        flat = np.frombuffer(raw, dtype=np.uint8)[: self.nbytes]
        self.array = flat.view(dt).reshape(shape)  # writes go straight to the pinned block

    def free(self) -> None:
        """Give the block back now (the caller knows no copy still reads it)."""
        if self.ptr:
            ptr, self.ptr = self.ptr, 0
            self.array = None
            self.pool.deallocate(ptr, self.nbytes)

    def __del__(self) -> None:
        try:
            self.free()
        except Exception:  # noqa: BLE001 - never raise from a finaliser (shutdown, dead driver)
            pass


# ---- arrays the caller fills in place: pinned_empty ------------------------------------------
# id(array) -> (weak reference to the array, block address, nbytes): the arrays pinned_empty
# handed out, while they live (the reference's callback drops the entry before the id can name
# another object). Only the array object itself is found here, not its views: a view is an
# ordinary host array to the stager (copied, still correct).
HANDED: dict[int, tuple[Any, int, int]] = {}


def pinned_empty(shape: tuple[int, ...] | int, dtype: Any = "float32") -> Any:
    """A numpy array (uninitialised) in page-locked memory of the process's pinned pool.

    Why: a host array passed to a GPU entry is first copied into one of the entry's pinned
    staging blocks (a host ``memcpy``: ~17 us per 0.5 MiB on one core, more than a third of a
    small call). An array from ``pinned_empty``, filled in place by the caller (a data loader
    writing each batch into it), is copied to the device straight from its own memory: no
    staging copy. The call then returns once that copy is done (the compute stays queued), so
    the caller may refill the array as soon as the call returns, as with any host array.

    The block goes back to the pool when the array and every view of it are gone."""
    import numpy as np

    shape_t = (shape,) if isinstance(shape, int) else tuple(int(n) for n in shape)
    buf = PinnedBuffer(default_pool(), shape_t, dtype)
    arr = np.asarray(_Owner(buf)).view(np.dtype(dtype)).reshape(shape_t)
    key = id(arr)

    def gone(_: Any, key: int = key) -> None:
        HANDED.pop(key, None)

    import weakref

    HANDED[key] = (weakref.ref(arr, gone), buf.ptr, buf.nbytes)
    return arr


class _Owner:
    """A :class:`PinnedBuffer`'s block as numpy sees it (``__array_interface__``): the arrays
    over it keep this object, so the buffer and its block, alive."""

    __slots__ = ("buf", "__array_interface__")

    def __init__(self, buf: PinnedBuffer) -> None:
        self.buf = buf
        self.__array_interface__ = {
            "shape": (buf.nbytes,),
            "typestr": "|u1",
            "data": (buf.ptr, False),
            "version": 3,
        }


def handed_out(array: Any) -> tuple[int, int]:
    """``(address, nbytes)`` of ``array`` if it is an array :func:`pinned_empty` returned (the
    object itself, alive), else ``(0, 0)``."""
    hit = HANDED.get(id(array))
    if hit is None or hit[0]() is not array:
        return 0, 0
    return hit[1], hit[2]


# ---- a torch CPU tensor's pinnedness, remembered per storage (2026-12-02e) ---------------------
# data address -> (weak reference to the storage object, pinned): the answer of ``is_pinned()``
# (a dispatcher call, and a driver query on CUDA builds: the H200 measured a pin_memory() x at
# 1.53x of device input against 1.28x for a pinned_empty one, asking it every call).
_pins: dict[int, tuple[Any, bool]] = {}
PIN_CACHE_MAX = 64  # entries (the cache is emptied when full: stale ones never answer)


def torch_pinned(t: Any, cache: bool = True) -> bool:
    """``t.is_pinned()`` for a CPU torch tensor, asked once per (storage, data address).

    Safe because a live storage's memory at a given address keeps its pinnedness: the entry is
    used only while the very storage object it was asked for is ``t``'s storage and alive (a
    weak reference, so the cache holds no memory), and for the same data address. A freed
    storage's address reused by another allocation has another storage object (the dead
    reference never matches); a storage whose memory is replaced while it lives
    (``share_memory_()``, ``resize_()``) gets it at another address, allocated while the old
    memory still lived, so it is asked again. ``cache=False``: asked every call (the A/B)."""
    if not cache:
        return bool(t.is_pinned())
    ptr = t.data_ptr()
    s = t.untyped_storage()
    hit = _pins.get(ptr)
    if hit is not None and hit[0]() is s:
        return hit[1]
    pinned = bool(t.is_pinned())
    import weakref

    try:
        ref = weakref.ref(s)
    except TypeError:  # (a storage without weak references: asked every call)
        return pinned
    if len(_pins) >= PIN_CACHE_MAX:
        _pins.clear()
    _pins[ptr] = (ref, pinned)
    return pinned


_pool: PinnedPool | None = None
_wc_pool: PinnedPool | None = None


def write_combined_pool() -> PinnedPool:
    """A process-wide pool of *write-combined* pinned blocks, for buffers the host only writes
    (staging blocks: ``KINAC_STAGING_WC=1``). Why: a DMA out of ordinary pinned memory snoops
    the CPU's caches, and a block the host has just written sits dirty in them (the H200 runs
    measured the stager's memcpy and DMA per 0.5 MiB call adding up instead of overlapping);
    write-combined memory is not cached, so the DMA reads memory without snooping, at the cost
    of uncached (combined) host writes and very slow host reads."""
    global _wc_pool
    if _wc_pool is None:
        _wc_pool = PinnedPool(alloc=lambda n: _driver_alloc(n, PORTABLE | WRITECOMBINED))
    return _wc_pool


def default_pool() -> PinnedPool:
    """The process-wide pinned pool (created on first use; pinned memory belongs to no device
    in particular: it is allocated portable)."""
    global _pool
    if _pool is None:
        _pool = PinnedPool()
    return _pool
