"""Time candidate kernels on the current GPU (the attention autotuner's measurement).

The compiler hands over finished PTX and launch geometry (:class:`TimedKernel`); this module
only loads, launches and times, so the runtime still never lowers a program. Every candidate
reads and writes the same device buffers (filled with a small constant: tensor-core time does
not depend on the values), is launched once to warm up, then timed with CUDA events as the
median of ``rounds`` means over ``reps`` back-to-back launches on one stream. A candidate that
fails to load or launch reports ``inf`` and the others still run.
"""

from __future__ import annotations

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
    kernels: tuple[TimedKernel, ...], buffer_bytes: tuple[int, ...], reps: int = 5, rounds: int = 3
) -> tuple[float, ...]:
    """Milliseconds per launch of each kernel, all given pointers to buffers of these sizes."""
    d = driver.api()
    stream = Stream()
    ptrs: list[int] = []
    try:
        for n in buffer_bytes:
            p = int(driver.check("cuMemAlloc", d.cuMemAlloc(max(n, 2))))
            ptrs.append(p)
            driver.check("cuMemsetD16", d.cuMemsetD16(p, 0x3C00, max(n, 2) // 2))
        return tuple(_time_one(k, ptrs, stream, reps, rounds) for k in kernels)
    finally:
        stream.synchronize()
        for p in ptrs:
            d.cuMemFree(p)
        stream.close()


def _time_one(k: TimedKernel, ptrs: list[int], stream: Stream, reps: int, rounds: int) -> float:
    d = driver.api()
    try:
        fn = load_module(k.ptx).function(k.function)
        attr = d.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
        driver.check("cuFuncSetAttribute", d.cuFuncSetAttribute(fn.handle, attr, k.shared))
        launch = fn.prepare(("ptr",) * len(ptrs), k.grid, k.block, k.shared, None, "bindings")
        launch(stream, *ptrs)
        stream.synchronize()
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
