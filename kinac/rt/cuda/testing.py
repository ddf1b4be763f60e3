"""Helpers shared by the GPU tests and the runtime bench: test kernels, fill and verify.

Loads the hand-made kernels of :mod:`kinac.codegen.ptx_testkernels` through the real module
loader and offers ``fill``/``verify`` on raw device pointers, so allocation tests can write a
distinct pattern into every live block and check that no two blocks overlap.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from typing import Any

from kinac.rt.cuda import driver
from kinac.rt.cuda.device import Stream, current_device
from kinac.rt.cuda.module import Launch, Module, load_module

Row = dict[str, Any]


class TestKernels:
    """The test kernels, loaded once, with prepared launches."""

    __test__ = False  # not a pytest class

    def __init__(self, path: str | None = None) -> None:
        from kinac.codegen.ptx_testkernels import hand_kernels_ptx

        self.device = current_device()  # kernels load on the current GPU (device 0 if none)
        self.module: Module = load_module(hand_kernels_ptx())
        self.path = path
        self.fill_kernel = self.module.function("fill_u32")
        self.axpy_kernel = self.module.function("axpy_f32")
        self.scale_add_kernel = self.module.function("scale_add_f32")
        self.noop8_kernel = self.module.function("noop8")
        self._fills: dict[int, Launch] = {}

    def grid_for(self, n: int, block: int = 256) -> int:
        """Blocks for ``n`` elements, capped at 8 per SM (the kernels are grid-stride)."""
        return max(1, min(-(-n // block), self.device.sm_count * 8))

    def fill(self, ptr: int, nwords: int, value: int, stream: Stream) -> None:
        """``ptr[0:nwords] = value`` (uint32) on ``stream``."""
        if nwords <= 0:
            return
        g = self.grid_for(nwords)
        launch = self._fills.get(g)
        if launch is None:
            launch = self._fills[g] = self.fill_kernel.prepare(
                ("ptr", "u64", "u32"), g, 256, path=self.path
            )
        launch(stream, ptr, nwords, value & 0xFFFFFFFF)

    def axpy(self, y: int, x: int, a: float, n: int, path: str | None = None) -> Launch:
        """A prepared ``y = a * x + y`` launch over ``n`` floats."""
        return self.axpy_kernel.prepare(
            ("ptr", "ptr", "f32", "u64"),
            self.grid_for(n),
            256,
            args=(y, x, a, n),
            path=path or self.path,
        )

    def scale_add(self, y: int, s: float, b: float, n: int, path: str | None = None) -> Launch:
        """A prepared ``y = y * s + b`` launch over ``n`` floats."""
        return self.scale_add_kernel.prepare(
            ("ptr", "f32", "f32", "u64"),
            self.grid_for(n),
            256,
            args=(y, s, b, n),
            path=path or self.path,
        )


def read_u32(ptr: int, nwords: int, stream: Stream) -> Any:
    """Copy ``nwords`` uint32 from the device (after the stream's queued work)."""
    import numpy as np

    out = np.empty(nwords, dtype=np.uint32)
    if nwords:
        d = driver.api()
        driver.check("cuStreamSynchronize", d.cuStreamSynchronize(stream.cu))
        driver.check("cuMemcpyDtoH", d.cuMemcpyDtoH(out.ctypes.data, ptr, nwords * 4))
    return out


def read_f32(ptr: int, n: int, stream: Stream) -> Any:
    """Copy ``n`` float32 from the device (after the stream's queued work)."""
    return read_u32(ptr, n, stream).view("float32")


def write_f32(ptr: int, values: Any, stream: Stream) -> None:
    """Copy a host float32 array to the device, in order on ``stream``, and wait."""
    import numpy as np

    a = np.ascontiguousarray(values, dtype=np.float32)
    d = driver.api()
    driver.check("cuMemcpyHtoDAsync", d.cuMemcpyHtoDAsync(ptr, a.ctypes.data, a.nbytes, stream.cu))
    driver.check("cuStreamSynchronize", d.cuStreamSynchronize(stream.cu))


def verify_blocks(blocks: list[tuple[int, int, int]], stream: Stream) -> list[str]:
    """Check that each (ptr, nbytes, value) block holds its value; return the mismatches."""
    bad = []
    for ptr, nbytes, value in blocks:
        got = read_u32(ptr, nbytes // 4, stream)
        if got.size and not (got == (value & 0xFFFFFFFF)).all():
            bad.append(
                f"0x{ptr:x} ({nbytes} B): expected {value}, found {sorted(set(got.tolist()))[:4]}"
            )
    return bad


def per_call_us(
    fn: Callable[[], None], calls: int, batches: int, after: Callable[[], None] | None = None
) -> float:
    """Median over batches of (host time of ``calls`` calls) / calls, in microseconds."""
    samples = []
    for _ in range(batches):
        t0 = time.perf_counter_ns()
        for _ in range(calls):
            fn()
        t1 = time.perf_counter_ns()
        samples.append((t1 - t0) / calls / 1e3)
        if after is not None:
            after()
    return statistics.median(samples)


def row(
    name: str,
    value: float,
    unit: str,
    ref: float | None,
    ref_name: str,
    goal: str,
    absolute: float | None = None,
) -> Row:
    ratio = (value / ref) if ref else None
    if absolute is not None:
        met: bool | None = value < absolute
    elif goal.startswith("<="):
        met = ratio is not None and ratio <= float(goal[2:].strip().rstrip("x"))
    elif goal.startswith(">="):
        met = ratio is not None and ratio >= float(goal[2:].strip().rstrip("x"))
    else:
        met = None
    return {
        "name": name,
        "value": value,
        "unit": unit,
        "ref": ref,
        "ref_name": ref_name,
        "ratio": ratio,
        "goal": goal,
        "met": met,
    }


def table(rows: list[Row], header: str) -> str:
    lines = [
        header,
        "",
        "| measurement | kinac | reference | ratio | goal | met |",
        "|---|---|---|---|---|---|",
    ]
    for r in rows:
        ref = f"{r['ref']:.3f} {r['unit']} ({r['ref_name']})" if r["ref"] else "-"
        ratio = f"{r['ratio']:.2f}x" if r["ratio"] is not None else "-"
        met = {True: "yes", False: "NO", None: "-"}[r["met"]]
        lines.append(
            f"| {r['name']} | {r['value']:.3f} {r['unit']} | {ref} | {ratio} | {r['goal']} | {met} |"
        )
    return "\n".join(lines) + "\n"
