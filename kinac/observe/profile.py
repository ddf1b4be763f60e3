"""Where the time of an entry goes: per-kernel times, a table, and a Chrome/Perfetto trace.

The host runtime runs an entry as one native call, so the normal path carries no timing code
at all (nothing to pay when profiling is off). To profile, the entry's LLVM IR is rebuilt with
a call to ``kinac_prof_mark(i64)`` before and after every step's call in the entry function
(a step is either a direct call of its kernel or a ``kinac_parallel`` launch of its task), and
that copy is linked with the mark bound to a recorder. On the GPU the runtime's own per-step
timing (:meth:`kinac.rt.cuda.entry.GpuEntry.profile`, CUDA events around a CUDA graph of each
step, as ``benches/gpu.py`` uses) is reused, with NVTX ranges (optional ``nvtx`` package)
around the entry and each kernel so ``nsys`` shows Kina names.

The trace (the JSON Trace Event Format that Perfetto and ``chrome://tracing`` open) is built
and written by :mod:`kinac.observe.trace`.
"""

from __future__ import annotations

import contextlib
import ctypes
import re
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kinac.dtypes import ITEMSIZE
from kinac.observe.trace import thread_names, write_trace_file, x_event

MARK = "kinac_prof_mark"
_MARK_PROTO = ctypes.CFUNCTYPE(None, ctypes.c_int64)
_PARALLEL = re.compile(r'@"?kinac_parallel"?\(.*i64 (\d+)\)\s*$')
_DEFINE = re.compile(r'^define [^@]*@"?([\w.$]+)"?\(')


@dataclass
class KernelTime:
    """One kernel of the entry: its identity, launch shape and median time per call."""

    name: str
    kind: str
    impl: str
    shape: tuple[int, ...]
    dtype: str
    ms: float
    nbytes: int
    launch: str = ""  # GPU: grid x block of each launch; host: the thread-pool tasks
    from_graph: bool | None = None  # GPU: timed inside a CUDA graph; host: None
    span: str | None = None  # the Kina source span, where the lowered records carry one
    share: float = 0.0

    @property
    def gbps(self) -> float:
        return self.nbytes / (self.ms * 1e6) if self.ms > 0 else 0.0


@dataclass
class Profile:
    """The kernels of one entry on one target, and the trace events of the profiled calls."""

    entry: str
    target: str
    calls: int
    kernels: list[KernelTime]
    events: list[dict[str, Any]] = field(default_factory=list)

    @property
    def total_ms(self) -> float:
        return sum(k.ms for k in self.kernels)

    def trace(self) -> dict[str, Any]:
        """The Chrome/Perfetto trace document."""
        return {"traceEvents": self.events, "displayTimeUnit": "ms"}

    def write_trace(self, path: str | Path) -> None:
        write_trace_file(path, self.trace())

    def table(self) -> Any:
        """A ``rich`` table of every kernel, slowest share first in the entry's order."""
        from rich.table import Table

        t = Table(
            title=f"{self.entry} on {self.target}: {self.total_ms:.3f} ms per call "
            f"(median of {self.calls})"
        )
        t.add_column("#", justify="right")
        for col in (
            "kernel",
            "source",
            "kind",
            "shape",
            "launch",
            "ms",
            "share",
            "bytes",
            "GB/s",
            "graph",
        ):
            t.add_column(col, justify="left" if col in ("kernel", "source", "kind") else "right")
        for i, k in enumerate(self.kernels):
            graph = "-" if k.from_graph is None else ("yes" if k.from_graph else "no")
            t.add_row(
                str(i),
                k.name,
                k.span or "-",
                f"{k.kind}/{k.impl}",
                "x".join(map(str, k.shape)) or "()",
                k.launch,
                f"{k.ms:.4f}",
                f"{k.share:.1f}%",
                f"{k.nbytes:,}",
                f"{k.gbps:.1f}",
                graph,
            )
        return t


# ---- host ---------------------------------------------------------------------------------------
def instrument_ir(
    llvm_ir: str,
    steps: tuple[str, ...],
    launches: list[str] | None = None,
    callees: tuple[str, ...] = (),
) -> str:
    """``llvm_ir`` with ``kinac_prof_mark(2i)`` before and ``(2i+1)`` after step ``i``'s call.

    The entry function calls its steps in order, each once: directly, or through
    ``kinac_parallel`` with the step's ``__task``; a task body calls its kernel once per chunk
    and is not the entry function. The entry function is the one (not a task) that calls
    steps: the ``kinac_call_`` wrapper itself when the entry was stitched from pieces
    (:mod:`kinac.ir.host.stitch`), else the function that wrapper calls. The ``n``-th such
    call is step ``n`` (two steps may share one canonical kernel symbol).
    ``launches`` receives each step's launch: ``pool xN`` (N tasks) or ``inline``.
    ``callees``: other symbols a step's call may name (an entry split into per-kernel objects
    calls its canonical kernels)."""
    names = set(steps) | set(callees)
    lines = llvm_ir.splitlines()
    entry_fn = _entry_function(lines, names)
    out, current, n = [], "", 0
    for line in lines:
        m = _DEFINE.match(line)
        if m:
            current = m.group(1)
        if current != entry_fn or not _calls_step(line, names):
            out.append(line)
            continue
        if n >= len(steps):
            raise ValueError(f"the entry function calls more than its {len(steps)} steps")
        indent = line[: len(line) - len(line.lstrip())]
        if launches is not None:
            tasks = _PARALLEL.search(line)
            launches.append(f"pool x{tasks.group(1)}" if tasks else "inline")
        out += [f"{indent}call void @{MARK}(i64 {2 * n})", line]
        out.append(f"{indent}call void @{MARK}(i64 {2 * n + 1})")
        n += 1
    if n != len(steps):
        raise ValueError(f"found {n} step calls in the entry function, expected {len(steps)}")
    out.append(f"declare void @{MARK}(i64)")
    return "\n".join(out) + "\n"


def _entry_function(lines: list[str], names: set[str]) -> str:
    """The function (not a ``__task``) with the most step calls: the one that runs them."""
    counts: dict[str, int] = {}
    current = ""
    for line in lines:
        m = _DEFINE.match(line)
        if m:
            current = m.group(1)
        if current and not current.endswith("__task") and _calls_step(line, names):
            counts[current] = counts.get(current, 0) + 1
    return max(counts, key=lambda f: counts[f]) if counts else ""


def _calls_step(line: str, names: set[str]) -> bool:
    if not line.lstrip().startswith("call ") and " = call " not in line:
        return False
    return any(n.removesuffix("__task") in names for n in re.findall(r'@"?([\w.$]+)"?', line))


MARK_PROTO = _MARK_PROTO


class _Recorder:
    """The mark callback: ``(mark, perf_counter_ns, thread)`` per call, in order."""

    def __init__(self) -> None:
        self.marks: list[tuple[int, int, int]] = []
        self.callback = _MARK_PROTO(self._mark)

    def _mark(self, which: int) -> None:
        self.marks.append((which, time.perf_counter_ns(), threading.get_ident()))


def _step_bytes(lowered: Any) -> list[int]:
    """Bytes each step reads and writes (every buffer once), from the buffer plan."""
    sizes: dict[str, int] = {}
    for i, p in enumerate(lowered.params):
        sizes[f"param{i}"] = step_nbytes(p.dtype, p.shape)
    out = []
    for s in lowered.steps:
        written = step_nbytes(s.dtype, s.shape)
        out.append(written + sum(sizes.get(r, 0) for r in s.reads))
        sizes[s.writes] = written
    return out


def step_nbytes(dtype: str, shape: tuple[int, ...]) -> int:
    """Bytes of a step's or parameter's buffer (the determinism gate reads as many)."""
    n = ITEMSIZE.get(dtype, 4)
    for d in shape:
        n *= d
    return n


def marked_entry(entry: Any, mark_address: int) -> tuple[Any, list[str]]:
    """A copy of host ``entry`` whose wrapper calls the function at ``mark_address`` with
    ``2i`` before and ``2i+1`` after step ``i``; and each step's launch (``pool xN``/``inline``)."""
    from kinac.codegen.llvm import compile_object, host_target, jit_load
    from kinac.rt.host.entry import HostEntry
    from kinac.rt.host.pool import runtime_symbols

    lw = entry.lowered
    steps = tuple(s.sym for s in lw.steps)
    launches: list[str] = []
    kernels = tuple(k.symbol for k in getattr(lw, "kernels", ()))
    from kinac.ir.host.wrapper_ir import flat_wrapper_ir  # each step's call in one function

    ir = instrument_ir(flat_wrapper_ir(lw), steps, launches, kernels)
    obj = compile_object(ir, host_target())
    symbols = {n: a for n, a in runtime_symbols().items() if n in lw.library_calls}
    symbols[MARK] = mark_address
    # An entry split into per-kernel objects: its wrapper calls them by symbol; bind those to
    # the kernels already loaded with the entry (only the wrapper is rebuilt).
    engine = entry._image._engine
    for sym in kernels:
        address = engine.get_function_address(sym)
        if not address:
            raise RuntimeError(f"kernel {sym} of {lw.name} is not loaded")
        symbols[sym] = address
    return HostEntry(lw, jit_load(obj, symbols, (lw.symbol,))), launches


def profile_host(entry: Any, arrays: tuple[Any, ...], repeat: int) -> Profile:
    """Time every step of a :class:`kinac.rt.host.HostEntry` over ``repeat`` calls."""
    lw = entry.lowered
    steps = tuple(s.sym for s in lw.steps)
    rec = _Recorder()
    timed, launches = marked_entry(entry, ctypes.cast(rec.callback, ctypes.c_void_p).value or 0)
    timed(*arrays)  # warm-up
    rec.marks.clear()
    origin = time.perf_counter_ns()
    events: list[dict[str, Any]] = []
    per_step: list[list[float]] = [[] for _ in steps]
    tids: dict[int, int] = {}
    for call in range(repeat):
        rec.marks.clear()
        t0 = time.perf_counter_ns()
        timed(*arrays)
        t1 = time.perf_counter_ns()
        tid = tids.setdefault(threading.get_ident(), len(tids) + 1)
        events.append(x_event(f"{lw.name} #{call}", "entry", t0 - origin, t1 - t0, tid, {}))
        begins: dict[int, int] = {}
        for which, ns, _thread in rec.marks:
            i, end = divmod(which, 2)
            if not end:
                begins[i] = ns
                continue
            s = lw.steps[i]
            dur = ns - begins.pop(i, ns)
            per_step[i].append(dur / 1e6)
            args = {"kind": s.kind, "impl": s.impl, "shape": list(s.shape), "dtype": s.dtype}
            events.append(x_event(s.sym, "kernel", ns - dur - origin, dur, tid, args))
    events += thread_names(tids, "host thread")
    nbytes = _step_bytes(lw)
    timings = [
        KernelTime(s.sym, s.kind, s.impl, s.shape, s.dtype, _median(t), b, launch)
        for s, t, b, launch in zip(lw.steps, per_step, nbytes, launches, strict=True)
    ]
    return _finish(Profile(lw.name, "cpu", repeat, timings, events))


# ---- GPU ----------------------------------------------------------------------------------------
def _nvtx_range(name: str) -> Any:
    """An NVTX range when the optional ``nvtx`` package is installed, else nothing."""
    try:
        import nvtx  # type: ignore[import-not-found,unused-ignore]
    except ImportError:
        return contextlib.nullcontext()
    return nvtx.annotate(name, domain="kinac")


def _has_nvtx() -> bool:
    import importlib.util

    return importlib.util.find_spec("nvtx") is not None


def _labelled_eager_run(entry: Any, arrays: tuple[Any, ...]) -> None:
    """One eager run of the entry's steps, each in an NVTX range named after its kernel, so
    ``nsys`` timelines show Kina names (graph replays carry no ranges)."""
    pushed = entry.device.enter()
    try:
        ins, outs, ptrs = entry.prepare(*arrays)
        _, steps = entry._bind(ptrs)
        for s, run in zip(entry.lowered.steps, steps, strict=True):
            with _nvtx_range(s.sym):
                run(entry.stream)
        entry.stream.synchronize()
        del ins, outs
    finally:
        entry.device.leave(pushed)


def profile_gpu(entry: Any, arrays: tuple[Any, ...], repeat: int) -> Profile:
    """Per-step device times from :meth:`GpuEntry.profile` (CUDA graphs, events), laid out
    back to back on the entry's stream track, with NVTX ranges around entry and kernels."""
    lw = entry.lowered
    with _nvtx_range(f"kinac:{lw.name}"):
        if _has_nvtx():
            _labelled_eager_run(entry, arrays)
        timed = entry.profile(*arrays, reps=max(repeat, 1))
    stream = int(getattr(entry.stream, "cu", 0) or 0)
    events: list[dict[str, Any]] = []
    kernels = []
    at = 0.0
    for s, ms in timed:
        launch = " ".join(f"{la.grid}x{la.block}" for la in s.launches) or s.impl
        args = {"kind": s.kind, "impl": s.impl, "launch": launch, "cuda_graph": True}
        events.append(x_event(s.sym, "kernel", int(at * 1e6), int(ms * 1e6), 1, args))
        at += ms
        kernels.append(
            KernelTime(s.sym, s.kind, s.impl, s.shape, s.dtype, ms, s.bytes_moved, launch, True)
        )
    events.insert(0, x_event(lw.name, "entry", 0, int(at * 1e6), 1, {}))
    events += thread_names({stream: 1}, "cuda stream")
    return _finish(Profile(lw.name, "cuda", repeat, kernels, events))


# ---- shared -------------------------------------------------------------------------------------
def _median(xs: list[float]) -> float:
    return sorted(xs)[len(xs) // 2] if xs else 0.0


def _finish(p: Profile) -> Profile:
    total = p.total_ms
    for k in p.kernels:
        k.share = 100.0 * k.ms / total if total > 0 else 0.0
    return p


def profile_entry(entry: Any, arrays: tuple[Any, ...], repeat: int = 10) -> Profile:
    """Profile a loaded entry (host or GPU) on ``arrays``."""
    if hasattr(entry, "capture_stream"):
        return profile_gpu(entry, arrays, repeat)
    return profile_host(entry, arrays, repeat)


def loaded_entry(fn: Any, arrays: tuple[Any, ...], dims: dict[str, int]) -> tuple[Any, tuple]:
    """The runtime entry a :class:`kinac.api.CompiledDefn` runs for these arguments (it must
    have been called with them once), and the arrays it takes."""
    from kinac.api_types import arg_type

    given, dim_args = fn._split(arrays, dims)
    types = tuple(arg_type(a, n) for a, n in zip(given, fn.tensor_params, strict=True))
    return fn._entries[(types, tuple(sorted(dim_args.items())))], tuple(given)


def profile(fn: Any, *arrays: Any, repeat: int = 10, **dims: int) -> Profile:
    """``kinac.profile(kinac.compile(...), *arrays)``: run once to specialise, then profile."""
    return profile_call(fn, arrays, dims, repeat)


def profile_call(
    fn: Any, arrays: tuple[Any, ...] | list[Any], dims: dict[str, int], repeat: int = 10
) -> Profile:
    """:func:`profile` with the dim arguments as a mapping, so a defn whose dim parameter is
    called ``repeat`` can be profiled (``kinac profile`` calls this)."""
    arrays = tuple(arrays)
    if not hasattr(fn, "_entries") or not hasattr(fn, "_split"):
        raise TypeError(
            f"kinac.profile takes a compiled defn (kinac.compile(path, name)), "
            f"not {type(fn).__name__}"
        )
    if isinstance(repeat, bool) or not isinstance(repeat, int) or repeat < 1:
        raise ValueError(f"kinac.profile: repeat must be an integer >= 1, got {repeat!r}")
    fn(*arrays, **dims)
    entry, given = loaded_entry(fn, arrays, dims)
    return profile_entry(entry, given, repeat)
