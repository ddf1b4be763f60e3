"""Time candidate kernels on the current GPU (the attention autotuner's measurement).

The compiler hands over finished PTX and launch geometry (:class:`TimedKernel`); this module
only loads, launches and times, so the runtime still never lowers a program. Every candidate
reads and writes the same device buffers, is launched once to warm up, then timed with CUDA events as the median of ``rounds`` means
over back-to-back launches on one stream (as many as fill about ``round_ms``). A candidate
that fails to load or launch reports ``inf`` and the others still run.

The buffers hold ``fill`` (a host byte pattern, repeated): the caller's random values of the
kernel's dtype. Not a constant: on the H200 a constant input ran the attention kernels up to
10% faster than random data (less power drawn, higher clocks) and changed their ranking.

The candidates are untrusted (generated variants that may never have run on hardware): the
autotuner times them with :func:`time_isolated`, in a child process
(``python -m kinac.rt.cuda.kernel_timer_child``, jobs as JSON on its stdin, one JSON line
back per candidate as soon as it is timed; supervised by
:mod:`kinac.rt.cuda.kernel_timer_isolated`), so a kernel that deadlocks or faults costs a killed child, never the caller's process or CUDA
context. :func:`time_each` is what the child runs: the same measurement, one candidate at a
time, stopping when a candidate has broken the context (a sticky error).
"""

from __future__ import annotations

import ctypes
import math
import statistics
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from kinac.rt.cuda import driver
from kinac.rt.cuda.device import Event, Stream, current_device, get_device
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
    (each filled with ``fill`` repeated), in this process (``inf`` after a lost context)."""
    out = [ms for ms, _ in time_each(kernels, buffer_bytes, fill, round_ms, rounds)]
    return tuple(out) + (math.inf,) * (len(kernels) - len(out))


def time_each(
    kernels: tuple[TimedKernel, ...],
    buffer_bytes: tuple[int, ...],
    fill: bytes,
    round_ms: float = 3.0,
    rounds: int = 3,
    device: int | None = None,
) -> Iterator[tuple[float, str]]:
    """Each kernel's (milliseconds per launch, ``""``) as soon as it is timed, on GPU
    ``device`` (the current one if None); a kernel that failed and left the context unusable
    is yielded with the driver's error name, and is the last: nothing more can run here."""
    if device is not None:
        get_device(device)
    d = driver.api()
    stream = Stream()
    ptrs: list[int] = []
    try:
        for n in buffer_bytes:
            n = max(n, 2)
            p = int(driver.check("cuMemAlloc", d.cuMemAlloc(n)))
            ptrs.append(p)
            _fill(p, n, fill)
        for k in kernels:
            ms = _time_one(k, ptrs, stream, round_ms, rounds)
            lost = "" if math.isfinite(ms) else context_lost()
            yield ms, lost
            if lost:
                return
    finally:
        try:
            stream.synchronize()
            for p in ptrs:
                d.cuMemFree(p)
            stream.close()
        except Exception:  # noqa: BLE001 - a lost context frees everything when the process ends
            pass


def context_lost() -> str:
    """The driver's error name if the current context is unusable (a kernel faulted: sticky),
    else ``""``."""
    err = driver.api().cuCtxSynchronize()[0]
    return "" if err == driver.OK else str(getattr(err, "name", err))


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
        return time_calls(lambda: launch(stream, *ptrs), stream, round_ms, rounds, 50)
    except Exception:  # noqa: BLE001 - a candidate that cannot run is not chosen
        return math.inf


def time_calls(
    issue: Callable[[], None], stream: Stream, round_ms: float, rounds: int, max_reps: int
) -> float:
    """Milliseconds per ``issue()`` on ``stream`` by CUDA events: one timed call sizes a round
    to about ``round_ms`` (2 to ``max_reps`` calls); the median of ``rounds`` rounds. Shared
    by the attention and GEMM tuners so both measure alike."""
    a, b = Event(), Event()
    a.record(stream)
    issue()
    b.record(stream)
    b.synchronize()
    reps = max(2, min(max_reps, int(round_ms / max(a.elapsed_ms(b), 1e-3))))
    a.close()
    b.close()
    times = []
    for _ in range(rounds):
        a, b = Event(), Event()
        a.record(stream)
        for _ in range(reps):
            issue()
        b.record(stream)
        b.synchronize()
        times.append(a.elapsed_ms(b) / reps)
        a.close()
        b.close()
    return statistics.median(times)


# --- the parent side: candidates timed in child processes ---------------------------------

CHILD_MODULE = "kinac.rt.cuda.kernel_timer_child"
FAKE_ENV = "KINAC_KERNEL_TIMER_FAKE"  # tests: ``module:function`` the child times with instead
SETUP_FAILED = 2  # the child's exit status when it could not start timing (no memory, no GPU)


@dataclass(frozen=True)
class Failure:
    """A candidate the children could not time normally: ``what`` is ``hung`` (killed after
    the timeout), ``crashed`` (the child died), ``faulted`` (it broke the CUDA context) or
    ``not timed`` (the overall cap or the restart bound came first); ``detail`` says more."""

    index: int
    what: str
    detail: str


def time_isolated(
    kernels: tuple[TimedKernel, ...],
    buffer_bytes: tuple[int, ...],
    fill: bytes,
    *,
    device: int = 0,
    round_ms: float = 3.0,
    rounds: int = 3,
    timeout_s: float = 8.0,
    startup_s: float = 60.0,
    total_s: float = 120.0,
    max_children: int = 16,
) -> tuple[tuple[float, ...], tuple[Failure, ...]]:
    """:func:`time_kernels`' times, measured in child processes: a candidate that produces no
    result within ``timeout_s`` (plus ``startup_s`` for a child's first: CUDA start-up) or
    whose child dies is ``inf`` and the rest go to a new child (at most ``max_children`` in
    all, ``total_s`` overall). Returns the times and what failed abnormally."""
    from kinac.rt.cuda.kernel_timer_isolated import run_children

    return run_children(
        kernels, buffer_bytes, fill, device, round_ms, rounds, timeout_s, startup_s, total_s,
        max_children,
    )  # fmt: skip
