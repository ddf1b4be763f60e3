"""What a GPU entry needs besides its class: dtype tables, placement, the entry's error, and
the per-step profile (kept apart so entry.py stays about binding and replay)."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from kinac.artifacts.gpu import GpuLoweredEntry, GpuStep
from kinac.artifacts.host import GATHER_OOB as GATHER_OOB
from kinac.dtypes import ITEMSIZE as ITEMSIZE
from kinac.errors import KinaRuntimeError
from kinac.rt.cuda.tensor import Tensor

if TYPE_CHECKING:
    from kinac.rt.cuda.entry import GpuEntry

DL_NAMES = {"f64": "float64", "f32": "float32", "f16": "float16", "bf16": "bfloat16",
            "i64": "int64", "i32": "int32", "bool": "bool"}  # fmt: skip
NP_NAMES = {**DL_NAMES, "bf16": "uint16"}
VOLATILE = 3  # distinct addresses after which an argument is staged instead of bound in place
Seq = Callable[[Any], None]


def array_nbytes(dtype: str, shape: tuple[int, ...]) -> int:
    """The bytes of a dense ``dtype`` array of ``shape``."""
    return ITEMSIZE[dtype] * math.prod(shape)


def placement(lowered: GpuLoweredEntry) -> int:
    """The GPU an entry runs on: ``N`` of its ``cuda:N`` params and outputs, else 0.

    One entry runs on one GPU; an entry whose params or outputs sit on two GPUs is refused
    with a clear error (moving data between GPUs inside an entry is not supported yet).
    """
    gpus = sorted(
        {
            int(d[5:])
            for d in (*lowered.param_devices, *lowered.output_devices)
            if d.startswith("cuda:")
        }
    )
    if len(gpus) > 1:
        names = [p.name for p in lowered.params] + [o.name for o in lowered.outputs]
        devs = (*lowered.param_devices, *lowered.output_devices)
        where = ", ".join(f"{n} on {d}" for n, d in zip(names, devs, strict=True) if d != "cpu")
        raise KinaGpuError(
            f"{lowered.name}: one entry runs on one GPU, but its arrays are on "
            f"{', '.join(f'cuda:{g}' for g in gpus)} ({where}); split it into one entry per GPU"
        )
    return gpus[0] if gpus else 0


def is_dense(t: Tensor) -> bool:
    """Row-major without gaps (the strides of size-1 dims do not matter)."""
    expect = 1
    for n, st in reversed(list(zip(t.shape, t.strides, strict=True))):
        if n != 1 and st != expect:
            return False
        expect *= n
    return True


class KinaGpuError(KinaRuntimeError):
    """A GPU entry was called wrongly or failed a runtime check (a gather index out of range);
    nothing is returned from a call that raises."""


def profile_steps(
    entry: GpuEntry, arrays: tuple[Any, ...], reps: int
) -> list[tuple[GpuStep, float]]:
    """See :meth:`GpuEntry.profile` (the entry's GPU is current)."""
    from kinac.rt import cuda
    from kinac.rt.cuda.graph import capture

    ins, outs, ptrs = entry.prepare(*arrays)  # kept alive while the steps run
    entry._runner(ptrs)(entry.stream)
    _, steps = entry._bind(ptrs)
    out = []
    for s, run in zip(entry.lowered.steps, steps, strict=True):

        def many(stream: Any, run: Seq = run) -> None:
            for _ in range(reps):
                run(stream)

        g = capture(many, entry.capture_stream, name=s.sym)
        g.replay(entry.stream)
        times = []
        for _ in range(3):
            e0, e1 = cuda.Event(), cuda.Event()
            e0.record(entry.stream)
            g.replay(entry.stream)
            e1.record(entry.stream)
            e1.synchronize()
            times.append(e0.elapsed_ms(e1) / reps)
        g.close()
        out.append((s, sorted(times)[1]))
    del ins, outs
    return out


StepHook = Callable[[int, GpuStep, Any], bool]


def run_steps_reading(
    entry: GpuEntry, arrays: tuple[Any, ...], after_step: StepHook
) -> tuple[list[Any], list[Any]]:
    """Run the entry's steps eagerly, one by one, on its stream; after each, hand
    ``after_step(i, step, buf)`` a host copy of what the step wrote (a writable numpy array
    of the step's shape; bf16 as uint16 bits). When it returns True the (changed) copy is
    written back before the next step runs: how a test plants a different kernel.

    Returns the host copies of the inputs as the entry read them and of the outputs (the
    determinism gate's manifest). The entry's GPU must be current."""
    import numpy as np

    from kinac.rt.cuda import driver

    d = driver.api()
    ins, outs, ptrs = entry.prepare(*arrays)
    lw = entry.lowered
    names: dict[str, int] = {"status": entry.status}
    labels = [f"param{i}" for i in range(len(lw.params))]
    labels += [f"out{j}" for j in range(len(lw.outputs))]
    names.update(zip(labels, ptrs, strict=True))
    _, steps = entry._bind(ptrs)
    stream = entry.stream
    if entry.status:
        nstat = 8 * lw.status_slots
        driver.check("cuMemsetD8Async", d.cuMemsetD8Async(entry.status, 0, nstat, stream.cu))
    for i, (s, run) in enumerate(zip(lw.steps, steps, strict=True)):
        run(stream)
        where = s.writes
        ptr = entry.arena + int(where[6:]) if where.startswith("arena+") else names[where]
        buf = np.empty(s.shape, dtype=NP_NAMES[s.dtype])
        if buf.nbytes:
            stream.synchronize()
            driver.check("cuMemcpyDtoH", d.cuMemcpyDtoH(buf.ctypes.data, ptr, buf.nbytes))
        if after_step(i, s, buf) and buf.nbytes:
            driver.check("cuMemcpyHtoD", d.cuMemcpyHtoD(ptr, buf.ctypes.data, buf.nbytes))
    stream.synchronize()
    if entry.status:
        entry._check_status()
    return [t.numpy() for t in ins], [t.numpy() for t in outs]
