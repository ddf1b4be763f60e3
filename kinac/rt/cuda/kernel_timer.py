"""Time candidate kernels on the current GPU (the attention autotuner's measurement).

The compiler hands over finished PTX and launch geometry (:class:`TimedKernel`); this module
only loads, launches and times, so the runtime still never lowers a program. Every candidate
reads and writes the same device buffers, is launched once to warm up, then timed with CUDA events as the median of ``rounds`` means
over back-to-back launches on one stream (as many as fill about ``round_ms``). A candidate
that fails to load or launch reports ``inf`` and the others still run.

The buffers hold ``fill`` (a host byte pattern, repeated): the caller's random values of the
kernel's dtype. Not a constant: on the H200 a constant input ran the attention kernels up to
10% faster than random data (less power drawn, higher clocks) and changed their ranking.
"""

from __future__ import annotations

import ctypes
import math
import statistics
from dataclasses import dataclass

from kinac.rt.cuda import driver
from kinac.rt.cuda.device import Event, Stream, current_device
from kinac.rt.cuda.module import load_module


@dataclass(frozen=True)
class TimedKernel:
    """One candidate: its PTX, function name, 3-D grid, block size, dynamic shared memory."""

    ptx: str
    function: str
    grid: tuple[int, int, int]
    block: int
    shared: int


def device_name() -> str:
    """The current GPU's name and architecture (``NVIDIA H200 sm_90``)."""
    dev = current_device()
    return f"{dev.name} {dev.arch}"


def time_kernels(
    kernels: tuple[TimedKernel, ...],
    buffer_bytes: tuple[int, ...],
    fill: bytes,
    round_ms: float = 3.0,
    rounds: int = 3,
) -> tuple[float, ...]:
    """Milliseconds per launch of each kernel, all given pointers to buffers of these sizes
    (each filled with ``fill`` repeated)."""
    d = driver.api()
    stream = Stream()
    ptrs: list[int] = []
    try:
        for n in buffer_bytes:
            n = max(n, 2)
            p = int(driver.check("cuMemAlloc", d.cuMemAlloc(n)))
            ptrs.append(p)
            _fill(p, n, fill)
        return tuple(_time_one(k, ptrs, stream, round_ms, rounds) for k in kernels)
    finally:
        stream.synchronize()
        for p in ptrs:
            d.cuMemFree(p)
        stream.close()


def _fill(ptr: int, n: int, pattern: bytes) -> None:
    """Copy ``pattern`` repeated over ``n`` bytes at ``ptr`` (host to device, synchronous)."""
    d = driver.api()
    chunk = (pattern * max(1, (1 << 22) // max(len(pattern), 1)))[: 1 << 22] or b"\0\0"
    host = ctypes.create_string_buffer(chunk, len(chunk))
    off = 0
    while off < n:
        m = min(len(chunk), n - off)
        driver.check("cuMemcpyHtoD", d.cuMemcpyHtoD(ptr + off, ctypes.addressof(host), m))
        off += m


def _time_one(
    k: TimedKernel, ptrs: list[int], stream: Stream, round_ms: float, rounds: int
) -> float:
    d = driver.api()
    try:
        fn = load_module(k.ptx).function(k.function)
        attr = d.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
        driver.check("cuFuncSetAttribute", d.cuFuncSetAttribute(fn.handle, attr, k.shared))
        launch = fn.prepare(("ptr",) * len(ptrs), k.grid, k.block, k.shared, None, "bindings")
        launch(stream, *ptrs)
        stream.synchronize()
        a, b = Event(), Event()
        a.record(stream)
        launch(stream, *ptrs)
        b.record(stream)
        b.synchronize()
        reps = max(2, min(50, int(round_ms / max(a.elapsed_ms(b), 1e-3))))
        a.close()
        b.close()
        times = []
        for _ in range(rounds):
            a, b = Event(), Event()
            a.record(stream)
            for _ in range(reps):
                launch(stream, *ptrs)
            b.record(stream)
            b.synchronize()
            times.append(a.elapsed_ms(b) / reps)
            a.close()
            b.close()
        return statistics.median(times)
    except Exception:  # noqa: BLE001 - a candidate that cannot run is not chosen
        return math.inf
