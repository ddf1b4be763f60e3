"""Device, context, streams and events.

kinac uses the device's *primary* context (the one the CUDA runtime, and so PyTorch, uses): a
pointer allocated by kinac is valid in PyTorch and the other way round, which is what makes
zero-copy DLPack exchange possible.  Streams and events are thin owners of driver handles that
keep both the bindings object (``cu``, cheapest to pass back to the bindings) and the raw
handle (``handle``, an int, used as a dictionary key and by ctypes).
"""

from __future__ import annotations

import ctypes
from typing import Any

from kinac.rt.cuda import driver
from kinac.rt.cuda.driver import check


class Device:
    """One GPU and its primary context (retained; :meth:`make_current` or :meth:`enter` binds
    it to the calling thread)."""

    def __init__(self, ordinal: int = 0) -> None:
        d = driver.init()
        self.ordinal = ordinal
        self.cu_device = check("cuDeviceGet", d.cuDeviceGet(ordinal))
        self.context = check("cuDevicePrimaryCtxRetain", d.cuDevicePrimaryCtxRetain(self.cu_device))
        self.context_handle = int(self.context)
        raw = check("cuDeviceGetName", d.cuDeviceGetName(256, self.cu_device))
        self.name = raw.split(b"\0", 1)[0].decode() if isinstance(raw, bytes) else str(raw)
        attr = d.CUdevice_attribute
        self.sm_count = self.attribute(attr.CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)
        major = self.attribute(attr.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR)
        minor = self.attribute(attr.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR)
        self.compute_capability = (major, minor)
        self.total_memory = int(check("cuDeviceTotalMem", d.cuDeviceTotalMem(self.cu_device)))

    def attribute(self, attr: Any) -> int:
        """``cuDeviceGetAttribute`` for this device."""
        d = driver.api()
        return int(check("cuDeviceGetAttribute", d.cuDeviceGetAttribute(attr, self.cu_device)))

    @property
    def arch(self) -> str:
        """``sm_90`` style name of the compute capability."""
        return f"sm_{self.compute_capability[0]}{self.compute_capability[1]}"

    def make_current(self) -> None:
        """Bind the primary context to the calling thread."""
        check("cuCtxSetCurrent", driver.api().cuCtxSetCurrent(self.context))

    def enter(self) -> bool:
        """Make this device's context current for a while: True if it was pushed over the
        caller's context, and then :meth:`leave` must pop it so the caller's comes back.  When
        no context was current, this one is made current and stays (False)."""
        d = driver.api()
        cur = d.cuCtxGetCurrent()
        handle = int(cur[1]) if cur[0] == driver.OK and cur[1] is not None else 0
        if handle == self.context_handle:
            return False
        if handle == 0:
            self.make_current()
            return False
        check("cuCtxPushCurrent", d.cuCtxPushCurrent(self.context))
        return True

    def leave(self, pushed: bool) -> None:
        """Undo :meth:`enter`."""
        if pushed:
            check("cuCtxPopCurrent", driver.api().cuCtxPopCurrent())

    def synchronize(self) -> None:
        """Wait for all work on the device (``cuCtxSynchronize``)."""
        check("cuCtxSynchronize", driver.api().cuCtxSynchronize())

    def mem_info(self) -> tuple[int, int]:
        """(free, total) bytes from ``cuMemGetInfo``."""
        free, total = check("cuMemGetInfo", driver.api().cuMemGetInfo())
        return int(free), int(total)

    def __repr__(self) -> str:
        return f"Device({self.ordinal}, {self.name!r}, {self.arch}, {self.sm_count} SMs)"


_devices: dict[int, Device] = {}


def lookup(ordinal: int) -> Device:
    """The process-wide :class:`Device` for ``ordinal`` (created on first use); the current
    context stays as it is."""
    dev = _devices.get(ordinal)
    if dev is None:
        dev = _devices[ordinal] = Device(ordinal)
    return dev


def get_device(ordinal: int = 0) -> Device:
    """The process-wide :class:`Device` for ``ordinal`` (created on first use), made current."""
    dev = lookup(ordinal)
    dev.make_current()
    return dev


def current_device() -> Device:
    """The :class:`Device` whose context is current on this thread (``cuCtxGetDevice``), or
    device 0, made current, when no context is.

    Objects that belong to one GPU (streams, modules, memory resources) are created on the
    current device, so ``get_device(1)`` followed by ``Stream()`` gives a stream on GPU 1.
    """
    d = driver.init()
    res = d.cuCtxGetDevice()
    if res[0] != driver.OK:
        return get_device(0)
    return lookup(int(res[1]))


def device_count_in_use() -> int:
    """How many devices this process has set up (guards take the multi-GPU path above 1)."""
    return len(_devices)


class Stream:
    """A CUDA stream: ``Stream()`` creates a non-blocking one; ``Stream.wrap(h)`` borrows one."""

    __slots__ = ("cu", "handle", "cvp", "_owned")

    def __init__(self, *, non_blocking: bool = True, priority: int = 0) -> None:
        d = driver.api()
        current_device()  # a context must be current: the stream belongs to its device
        flags = int(d.CUstream_flags.CU_STREAM_NON_BLOCKING) if non_blocking else 0
        self.cu = check("cuStreamCreateWithPriority", d.cuStreamCreateWithPriority(flags, priority))
        self.handle = int(self.cu)
        self.cvp = ctypes.c_void_p(self.handle)  # for ctypes calls: built once, never mutated
        self._owned = True

    @classmethod
    def wrap(cls, handle: int) -> Stream:
        """A non-owning Stream for an existing handle (0 = NULL stream, 1 = legacy, 2 = per-thread)."""
        s = cls.__new__(cls)
        s.cu = driver.api().CUstream(handle)
        s.handle = int(handle)
        s.cvp = ctypes.c_void_p(s.handle)
        s._owned = False
        return s

    @classmethod
    def null(cls) -> Stream:
        """The NULL (legacy default) stream."""
        return cls.wrap(0)

    def synchronize(self) -> None:
        """Wait until all work queued on the stream is done."""
        check("cuStreamSynchronize", driver.api().cuStreamSynchronize(self.cu))

    def query(self) -> bool:
        """True if all queued work is done."""
        d = driver.api()
        err = d.cuStreamQuery(self.cu)[0]
        if err == d.CUresult.CUDA_ERROR_NOT_READY:
            return False
        if err != driver.OK:
            driver.fail("cuStreamQuery", err)
        return True

    def wait(self, event: Event) -> None:
        """Make future work on this stream wait for ``event``."""
        check("cuStreamWaitEvent", driver.api().cuStreamWaitEvent(self.cu, event.cu, 0))

    def record(self, event: Event | None = None) -> Event:
        """Record ``event`` (a new timing-free one by default) on this stream."""
        ev = event if event is not None else Event(timing=False)
        ev.record(self)
        return ev

    def close(self) -> None:
        """Destroy the stream (owned streams only)."""
        if self._owned and self.handle:
            self._owned = False
            check("cuStreamDestroy", driver.api().cuStreamDestroy(self.cu))

    def __repr__(self) -> str:
        return f"Stream(0x{self.handle:x})"


class Event:
    """A CUDA event, for ordering between streams and (``timing=True``) for timing."""

    __slots__ = ("cu", "handle", "timing")

    def __init__(self, *, timing: bool = True) -> None:
        d = driver.api()
        current_device()
        flags = 0 if timing else int(d.CUevent_flags.CU_EVENT_DISABLE_TIMING)
        self.cu = check("cuEventCreate", d.cuEventCreate(flags))
        self.handle = int(self.cu)
        self.timing = timing

    def record(self, stream: Stream | int) -> None:
        """Capture the work queued so far on ``stream``."""
        s = stream.cu if isinstance(stream, Stream) else stream
        check("cuEventRecord", driver.api().cuEventRecord(self.cu, s))

    def synchronize(self) -> None:
        """Wait on the host for the recorded work."""
        check("cuEventSynchronize", driver.api().cuEventSynchronize(self.cu))

    def elapsed_ms(self, end: Event) -> float:
        """Milliseconds from this event to ``end`` (both recorded and complete)."""
        return float(check("cuEventElapsedTime", driver.api().cuEventElapsedTime(self.cu, end.cu)))

    def close(self) -> None:
        """Destroy the event."""
        if self.handle:
            self.handle = 0
            check("cuEventDestroy", driver.api().cuEventDestroy(self.cu))


class StreamOrderer:
    """Makes one stream wait for all work queued so far on another (one reusable event).

    Used by the pool when it hands a block freed on stream A to an allocation on stream B, and
    by the DLPack producer to order a consumer's stream after the producer's.
    """

    def __init__(self) -> None:
        self._event = Event(timing=False)
        d = driver.api()
        self._record = d.cuEventRecord
        self._wait = d.cuStreamWaitEvent

    def __call__(self, src: int, dst: int) -> None:
        if src == dst:
            return
        ev = self._event.cu
        r = self._record(ev, src)
        if r[0] != driver.OK:
            driver.fail("cuEventRecord", r[0])
        r = self._wait(dst, ev, 0)
        if r[0] != driver.OK:
            driver.fail("cuStreamWaitEvent", r[0])


_orderers: dict[int, StreamOrderer] = {}


def order_streams(src: int, dst: int) -> None:
    """Make stream ``dst`` wait for the work queued so far on stream ``src`` (handles of two
    streams of the current device; each device has its own event)."""
    if src == dst:
        return
    ordinal = current_device().ordinal
    orderer = _orderers.get(ordinal)
    if orderer is None:
        orderer = _orderers[ordinal] = StreamOrderer()
    orderer(src, dst)
