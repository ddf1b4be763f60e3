"""Time the ways to issue one GEMM on the current GPU (the GEMM autotuner's measurement).

The compiler hands over a :class:`~kinac.artifacts.gpu.GpuGemm` whose buffers carry canonical
names (:func:`kinac.pipeline_gemm_tune.canonical`); this module allocates a device buffer per
name (cuMemAlloc: 256-byte aligned, as the entry's arena and pool are), fills the inputs with
random values of the dtype, and times, through the runtime's own binding
(:class:`~kinac.rt.cuda.blas.Blas`, so what is timed is what an entry will call):

- today's binding (always first: the reference);
- cuBLASLt's top-``n`` heuristic algorithms (one ``cublasLtMatmul``, strided layouts for a
  batch), for plain and epilogue products (an epilogue's heuristic #0 is today's: skipped);
- for a grouped ``pointers`` call: its members as separate ``cublasGemmEx`` calls, and as
  separate ``cublasLtMatmul`` calls with each of the members' top-``n`` algorithms.

Each candidate first runs once into zeroed outputs, which are compared with today's: one
that differs beyond the dtype's tolerance (or fails to bind or run) reports ``inf``.

How the survivors are timed (:func:`time_interleaved`), and why: each is captured as a CUDA
graph, as an entry runs it (cuBLASLt's 4-byte workspace reset of a persistent kernel is a
memset node that counts), the GPU is first kept busy for ``WARM_MS`` with today's call, and
then every round times each candidate once (about ``round_ms`` of back-to-back replays), the
order rotating from round to round; a candidate's time is its median over the rounds. The
H200 runs these GEMMs at its power cap, where the SM clock wanders between about 1.5 and 2
GHz with temperature and load: timed one after the other from a cool GPU (before 2026-12-02,
``GEMM_TUNE_VERSION`` 2) the first candidates ran at higher clocks than the last, and the
45M block's q projection was given cuBLASLt's #1, 2% slower than today's binding once both
were timed interleaved (``docs/measurements/gemm_45m_2026-12-02d.md``).
"""

from __future__ import annotations

import ctypes
import functools
import math
import statistics
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from kinac.artifacts.gemm_algo import GemmAlgo
from kinac.artifacts.gpu import GemmOperand, GpuGemm
from kinac.dtypes import ITEMSIZE
from kinac.rt.cuda import driver
from kinac.rt.cuda.device import Stream, current_device
from kinac.rt.cuda.kernel_timer import time_calls

if TYPE_CHECKING:
    from kinac.rt.cuda.blas import Blas

SAMPLE = 1 << 22  # output elements compared per candidate
F = TypeVar("F")  # what time_interleaved's timer times (the tuner: a graph's replay)
WARM_MS = 150.0  # sustained load before the rounds: the clocks an entry's GEMM runs at
TOLERANCE = {"bf16": 2e-2, "f16": 4e-3, "f32": 1e-4, "f64": 1e-10}  # x max |today's output|


def _extent(o: GemmOperand, rows: int, cols: int, i: int) -> int:
    """Elements of batch ``i``'s matrix reach (row-major ``rows x cols`` at ``o.ld``)."""
    r, c = (cols, rows) if o.trans else (rows, cols)
    return o.offsets[i] + (r - 1) * o.ld + c


def buffer_elems(g: GpuGemm) -> dict[str, tuple[int, str]]:
    """Each buffer name ``g`` reads or writes: (elements it must hold, dtype)."""
    need: dict[str, tuple[int, str]] = {}

    def add(name: str, n: int, dt: str) -> None:
        need[name] = (max(n, need.get(name, (0, dt))[0]), dt)

    for o, rows, cols, dt in ((g.a, g.m, g.k, g.dtype), (g.b, g.k, g.n, g.dtype), (g.c, g.m, g.n, g.out_dtype)):  # fmt: skip
        for i in range(g.batch):
            add(o.bufs[i] if o.bufs else o.buf, _extent(o, rows, cols, i), dt)
    if g.epilogue:
        add(g.epi, g.n if g.epilogue == "bias" else g.m * g.n * g.batch, g.out_dtype)
    return need


def outputs(g: GpuGemm) -> tuple[str, ...]:
    return tuple(dict.fromkeys(g.c.bufs or (g.c.buf,)))


def _random_bytes(n: int, dtype: str, seed: int) -> bytes:
    import numpy as np

    x = np.random.default_rng(seed).standard_normal(n, dtype=np.float32)
    if dtype == "bf16":
        return (x.view(np.uint32) >> 16).astype(np.uint16).tobytes()
    return x.astype({"f16": np.float16, "f32": np.float32, "f64": np.float64}[dtype]).tobytes()


def _as_f32(raw: bytes, dtype: str) -> object:
    """Device bytes of ``dtype`` as float32 (exact for bf16/f16, the tuned dtypes): every
    ``step``-th element, an odd step (so every tile of the output is sampled) that leaves at
    most ``SAMPLE`` elements: the check costs milliseconds, not seconds, on a 46M-element
    output, and an algorithm computing something else is wrong nearly everywhere."""
    import numpy as np

    if dtype == "bf16":
        x = np.frombuffer(raw, np.uint16)
    else:
        x = np.frombuffer(raw, {"f16": np.float16, "f32": np.float32, "f64": np.float64}[dtype])
    step = max(1, len(x) // SAMPLE) | 1
    x = x[::step]
    if dtype == "bf16":
        return (x.astype(np.uint32) << 16).view(np.float32)
    return x.astype(np.float32)


def close(got: object, ref: object, dtype: str) -> bool:
    """Whether a candidate's output equals today's within the dtype's tolerance."""
    import numpy as np

    a, b = np.asarray(got), np.asarray(ref)
    if a.shape != b.shape or not np.isfinite(a).all():
        return False
    scale = max(1.0, float(np.abs(b).max(initial=0.0)))
    return float(np.abs(a - b).max(initial=0.0)) <= TOLERANCE[dtype] * scale


def candidates(blas: object, g: GpuGemm, ptr: Callable[[str], int], n: int) -> list[GemmAlgo]:
    """Today's binding first, then what cuBLASLt proposes (see the module's docstring)."""
    from kinac.rt.cuda.blas import Blas, members

    assert isinstance(blas, Blas)
    out = [GemmAlgo("today")]
    try:
        found = blas.heuristic(blas.lt_setup(g, ptr), n)
    except Exception:  # noqa: BLE001 - no cuBLASLt form (a non-strided batch): none proposed
        found = []
    skip = 1 if g.epilogue else 0  # an epilogue's heuristic #0 is today's binding
    out += [GemmAlgo("lt", a, i) for i, a in enumerate(found) if i >= skip]
    if g.mode == "pointers" and not g.epilogue:
        out.append(GemmAlgo("split"))
        try:
            found = blas.heuristic(blas.lt_setup(members(g)[0], ptr), n)
        except Exception:  # noqa: BLE001
            found = []
        out += [GemmAlgo("split-lt", a, i) for i, a in enumerate(found)]
    return out


def time_interleaved(
    issues: Sequence[F | None],
    time_round: Callable[[F], float],
    rounds: int,
    warm: Callable[[], None] | None = None,
) -> list[float]:
    """Milliseconds per call of each ``issues[i]`` (``inf`` for None): after ``warm()``,
    ``rounds`` rounds each timing every candidate once by ``time_round``, the order rotated
    by one each round, and each candidate's median over the rounds. Why interleaved: a clock
    that drifts during the timing (a GPU at its power cap) then slows or speeds every
    candidate alike instead of whichever happened to be timed first."""
    live = [i for i, f in enumerate(issues) if f is not None]
    times: dict[int, list[float]] = {i: [] for i in live}
    if warm is not None and live:
        warm()
    for r in range(rounds if live else 0):
        k = r % len(live)
        for i in live[k:] + live[:k]:
            f = issues[i]
            assert f is not None
            times[i].append(time_round(f))
    return [statistics.median(times[i]) if i in times else math.inf for i in range(len(issues))]


class Scratch:
    """Device buffers a GEMM timing allocates (cuMemAlloc, 256-byte aligned as an entry's arena
    is) and frees together: the tuner's :func:`time_gemm` and ``benches/gemm_45m_probe.py``
    share it, so what the probe measures is laid out as what the tuner timed."""

    def __init__(self) -> None:
        self._d = driver.api()
        self.ptrs: list[int] = []

    def alloc(self, nbytes: int) -> int:
        """A fresh device buffer of at least ``nbytes`` (16 at least: cuMemAlloc(0) fails)."""
        p = int(driver.check("cuMemAlloc", self._d.cuMemAlloc(max(nbytes, 16))))
        self.ptrs.append(p)
        return p

    def upload(self, data: bytes) -> int:
        """A fresh device buffer holding ``data``."""
        p = self.alloc(len(data))
        buf = ctypes.create_string_buffer(data, len(data))
        driver.check("cuMemcpyHtoD", self._d.cuMemcpyHtoD(p, ctypes.addressof(buf), len(data)))
        return p

    def buffers(self, need: dict[str, tuple[int, str]], outs: Sequence[str]) -> dict[str, int]:
        """A device buffer per name of ``need`` (:func:`buffer_elems`): outputs zeroed,
        inputs random of their dtype (seeded by the name's rank, so reruns match)."""
        names = {}
        for seed, (name, (elems, dt)) in enumerate(sorted(need.items())):
            nbytes = elems * ITEMSIZE[dt]
            names[name] = self.upload(bytes(nbytes) if name in outs else _random_bytes(elems, dt, seed))  # fmt: skip
        return names

    def free(self) -> None:
        """Frees every buffer allocated here (the caller has synchronized)."""
        for p in self.ptrs:
            self._d.cuMemFree(p)
        self.ptrs.clear()


def time_gemm(
    g: GpuGemm, n: int = 8, round_ms: float = 2.0, rounds: int = 5
) -> tuple[tuple[GemmAlgo, float], ...]:
    """Each candidate way to issue ``g`` and its milliseconds per call (``inf``: failed or
    wrong); the first is today's binding."""
    from kinac.rt.cuda.blas import Blas
    from kinac.rt.cuda.graph import capture

    current_device()  # a context current on this thread (device 0 if none was)
    mem = Scratch()
    upload = mem.upload
    stream = Stream()
    blas: Blas | None = None
    graphs: list[Any] = []
    try:
        need = buffer_elems(g)
        outs = outputs(g)
        names = mem.buffers(need, outs)
        blas = Blas(mem.alloc)
        ptr = names.__getitem__
        cands = candidates(blas, g, ptr, n)
        ref: list[object] = []
        issues: list[Callable[[], None] | None] = []
        for c in cands:
            call = _checked(blas, g, c, ptr, upload, stream, need, outs, ref)
            if call is None:
                issues.append(None)
                continue
            try:  # what an entry replays: the call captured in a graph (memset nodes included)
                gr = capture(_on_stream(call), stream, name=c.label)
            except Exception:  # noqa: BLE001 - a call that cannot be captured is not chosen
                issues.append(None)
                continue
            graphs.append(gr)
            issues.append(functools.partial(gr.replay, stream))

        def warm() -> None:
            if issues and issues[0] is not None:
                _keep_busy(issues[0], stream, WARM_MS)

        ms = time_interleaved(
            issues, lambda f: time_calls(f, stream, round_ms, 1, 200), rounds, warm
        )
        return tuple(zip(cands, ms, strict=True))
    finally:
        stream.synchronize()
        for gr in graphs:
            gr.close()
        if blas is not None:
            blas.close()
        mem.free()
        stream.close()


def _on_stream(call: Callable[[int], None]) -> Callable[[Stream], None]:
    """A bound cuBLAS call as a capturable sequence (it takes the stream's handle)."""
    return lambda st: call(st.handle)


def _keep_busy(issue: Callable[[], None], stream: Stream, ms: float) -> None:
    """Issue ``issue`` back to back on ``stream`` for about ``ms`` milliseconds."""
    end = time.perf_counter() + ms / 1e3
    while time.perf_counter() < end:
        for _ in range(10):
            issue()
        stream.synchronize()


def run_once(
    blas: Blas,
    g: GpuGemm,
    c: GemmAlgo,
    ptr: Callable[[str], int],
    upload: Callable[[bytes], int],
    stream: Stream,
    need: dict[str, tuple[int, str]],
    outs: tuple[str, ...],
) -> tuple[Callable[[int], None], list[object]]:
    """Candidate ``c`` bound and run once into zeroed outputs (one that writes nothing cannot
    match): the bound call and its outputs as float32; raises if it cannot bind or run.
    Shared by :func:`_checked` and ``benches/gemm_45m_probe.py``."""
    d = driver.api()
    call = blas.bind_today(g, ptr, upload) if c.how == "today" else blas.bind_algo(g, c, ptr, upload)  # fmt: skip
    for name in outs:  # zeroed: a candidate that writes nothing cannot pass
        nbytes = need[name][0] * ITEMSIZE[need[name][1]]
        driver.check("cuMemsetD8Async", d.cuMemsetD8Async(ptr(name), 0, nbytes, stream.cu))
    call(stream.handle)
    stream.synchronize()
    got = []
    for name in outs:
        nbytes = need[name][0] * ITEMSIZE[need[name][1]]
        host = ctypes.create_string_buffer(nbytes)
        driver.check("cuMemcpyDtoH", d.cuMemcpyDtoH(ctypes.addressof(host), ptr(name), nbytes))  # fmt: skip
        got.append(_as_f32(host.raw, g.out_dtype))
    return call, got


def _checked(
    blas: object,
    g: GpuGemm,
    c: GemmAlgo,
    ptr: Callable[[str], int],
    upload: Callable[[bytes], int],
    stream: Stream,
    need: dict[str, tuple[int, str]],
    outs: tuple[str, ...],
    ref: list[object],
) -> Callable[[int], None] | None:
    """Candidate ``c`` bound, run once into zeroed outputs and compared with today's (the
    first, whose output becomes ``ref``); None if it cannot bind or run or computes
    something else."""
    from kinac.rt.cuda.blas import Blas

    assert isinstance(blas, Blas)
    try:
        call, got = run_once(blas, g, c, ptr, upload, stream, need, outs)
        if not ref:
            ref.extend(got)  # today's output: the reference
        elif not all(close(x, r, g.out_dtype) for x, r in zip(got, ref, strict=True)):
            return None
        return call
    except Exception:  # noqa: BLE001 - a candidate that cannot run is not chosen
        return None
