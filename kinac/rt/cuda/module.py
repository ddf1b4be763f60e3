"""PTX modules, kernel handles and launches with pre-packed arguments.

Modules are loaded with ``cuModuleLoadData`` (the driver JIT-compiles the PTX for the device)
and cached per process by the SHA-256 of the PTX, so a kernel that the rule engine's artifact
cache hands out twice is loaded once.  Kernel handles are looked up once per module.

A :class:`Launch` is a kernel plus a fixed grid and a fixed argument layout.  Its arguments live
in one packed buffer (an 8-byte slot each) and its ``void*[]`` parameter array, pointing at the
slots, is built once.  New argument values are written with a single ``struct.pack_into`` call.

By default (the ``graph`` path) an eager launch replays a one-kernel CUDA graph built from that
array (:mod:`kinac.rt.cuda.kernel_graph`): on the lent H200s that costs about half of a
``cuLaunchKernel``.  On a stream being captured (by :func:`kinac.rt.cuda.capture` or anyone
else) the same launch is a plain ``cuLaunchKernel``, so the captured graph holds ordinary kernel
nodes.
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import re
import shutil
import struct
import subprocess
import tempfile
from collections.abc import Callable, Sequence
from typing import Any

from kinac.rt.cuda import driver
from kinac.rt.cuda.device import Stream, current_device
from kinac.rt.cuda.driver import check
from kinac.rt.cuda.kernel_graph import GraphState, pdl_call, pydll_call

# argument type -> struct format of its 8-byte slot in the packed argument buffer
ARG_FORMATS: dict[str, str] = {
    "ptr": "Q",
    "u64": "Q",
    "i64": "q",
    "u32": "I4x",
    "i32": "i4x",
    "f32": "f4x",
    "f64": "d",
}
ARG_TYPES = tuple(ARG_FORMATS)

_modules: dict[tuple[int, str], Module] = {}


def ptx_digest(ptx: str | bytes) -> str:
    """The cache key of a PTX text."""
    data = ptx.encode() if isinstance(ptx, str) else ptx
    return hashlib.sha256(data).hexdigest()


def _ptxas_log(data: bytes, arch: str) -> str:
    """ptxas diagnostics for a PTX the driver rejected (when ptxas is installed)."""
    exe = shutil.which("ptxas")
    if exe is None:
        return ""
    with tempfile.TemporaryDirectory() as tmp:
        src = os.path.join(tmp, "k.ptx")
        with open(src, "wb") as f:
            f.write(data)
        p = subprocess.run(
            [exe, f"-arch={arch}", src, "-o", os.devnull],
            capture_output=True,
            text=True,
            check=False,
        )
    return (p.stdout + p.stderr).strip()


def load_module(ptx: str | bytes) -> Module:
    """Load ``ptx`` into the current device's context (device 0 if none is current), or return
    the module cached for that device."""
    dev = current_device()
    data = ptx.encode() if isinstance(ptx, str) else bytes(ptx)
    data = data.rstrip(b"\0")
    key = (dev.ordinal, ptx_digest(data))
    mod = _modules.get(key)
    if mod is not None:
        return mod
    d = driver.api()
    buf = ctypes.create_string_buffer(data)  # NUL-terminated copy
    try:
        res = d.cuModuleLoadData(ctypes.addressof(buf))
    except TypeError:  # bindings that want a buffer, not an address
        res = d.cuModuleLoadData(data + b"\0")
    if res[0] != driver.OK:
        raise driver.make_error("cuModuleLoadData", res[0], _ptxas_log(data, dev.arch))
    mod = _modules[key] = Module(res[1], key[1], waiting_kernels(data.decode(errors="replace")))
    return mod


_ENTRY = re.compile(r"^\s*(?:\.visible\s+|\.weak\s+)?\.entry\s+([A-Za-z_$][\w$]*)", re.M)
# what touches memory or leaves the function in PTX (``ld.param`` reads the kernel's own
# arguments, not memory another grid writes)
_TOUCH = re.compile(
    r"\b(?:(?:ld|ldu|st|red|atom|prefetch|prefetchu|cp|multimem|tex|suld|sust|ldmatrix|"
    r"stmatrix|wgmma|mbarrier)\.(?!param\b)|call\b|ret\b|exit\b)"
)


# the one memory instruction allowed before the wait: an L2 prefetch (``prefetch.global.L2``
# or ``prefetch.global.L2::evict_last``, nothing else: not L1, not ``prefetchu``, not a load)
_L2_PREFETCH = re.compile(
    r"^\s*(?:@!?%\w+\s+)?prefetch\.global\.L2(?:::evict_last)?\s+\[[^\]]*\]\s*;\s*$"
)


def waiting_kernels(ptx: str) -> frozenset[str]:
    """The ``.entry`` functions of ``ptx`` that run ``griddepcontrol.wait`` before any
    instruction that touches memory (or calls, returns, exits): those that may be launched with
    programmatic dependent launch (:func:`~kinac.rt.cuda.kernel_graph.pdl_call`), since nothing
    they read or write is touched before the grids they depend on have completed. Read from
    the PTX the driver loads, so a kernel compiled without the wait (sm_80 code, hand-written
    PTX, an attention variant without it) is launched plainly.

    One exception: ``prefetch.global.L2`` (and its ``::evict_last`` form) of any address may
    come before the wait. L2 is the GPU's point of coherence, so a line fetched into it early is
    the line every later access sees (a write by the grid still running goes to L2 too), and a
    prefetch has no value, writes nothing and cannot fault: it changes timing only. An L1
    prefetch (``prefetch.global.L1``), ``prefetchu`` (the uniform cache), a load or
    ``cp.async`` could hold a stale copy outside L2, so they still disqualify the kernel
    (``docs/gpu.md``, "Small products": the small GEMM prefetches its weights this way)."""
    out = set()
    starts = [(m.start(), m.group(1)) for m in _ENTRY.finditer(ptx)]
    for i, (at, name) in enumerate(starts):
        end = starts[i + 1][0] if i + 1 < len(starts) else len(ptx)
        body = ptx[at:end]
        open_ = body.find("{")
        wait = body.find("griddepcontrol.wait", open_)
        if open_ < 0 or wait < 0:
            continue
        before = "\n".join(
            ln
            for ln in (x.split("//")[0] for x in body[open_ + 1 : wait].splitlines())
            if not _L2_PREFETCH.match(ln)
        )  # comments and L2 prefetches aside
        if not _TOUCH.search(before):
            out.add(name)
    return frozenset(out)


LOAD_STEP = "module loading (CUDA driver PTX JIT)"
LOOKUP_STEP = "kernel lookup (cuModuleGetFunction)"


def kernel_at_line(ptx: str, line: int) -> str | None:
    """The ``.entry`` (or ``.func``) of ``ptx`` that holds line ``line`` (1-based), if any."""
    lines = ptx.splitlines()[: max(line, 0)]
    for text in reversed(lines):
        m = re.search(r"\.(?:entry|func)\s+(?:\([^)]*\)\s*)?([A-Za-z_$][\w$]*)", text)
        if m:
            return m.group(1)
    return None


def load_entry_module(
    ptx: str | bytes, entry: str, functions: Sequence[str]
) -> tuple[Module, dict[str, Kernel]]:
    """Load an entry's PTX and look its kernels up; a failure is a compile error of the entry.

    Why: the PTX is kinac's output for a checked program, so the driver's JIT rejecting it
    (``CUDA_ERROR_INVALID_PTX``, a PTX ISA the driver is too old for) or a kernel missing from
    it is an :class:`~kinac.ice.InternalCompilerError` (a ``KinaCompileError``) naming the
    entry, the step and the kernel (from the line ptxas reports), with the driver's message
    attached, never a bare ``CudaError`` traceback. Out of memory and a missing GPU stay what
    they are (the environment's, not the compiler's).
    """
    from kinac.ice import InternalCompilerError
    from kinac.rt.cuda.errors import CudaOutOfMemoryError, CudaUnavailableError

    keep = (CudaOutOfMemoryError, CudaUnavailableError, KeyboardInterrupt)
    try:
        mod = load_module(ptx)
    except keep:
        raise
    except Exception as e:  # noqa: BLE001 - every other failure is reported as kinac's
        text = ptx.decode(errors="replace") if isinstance(ptx, bytes) else ptx
        m = re.search(r"line (\d+)", getattr(e, "detail", "") or str(e))
        kernel = kernel_at_line(text, int(m.group(1))) if m else None
        raise InternalCompilerError(entry, LOAD_STEP, kernel, e) from e
    kernels: dict[str, Kernel] = {}
    for name in functions:
        try:
            kernels[name] = mod.function(name)
        except keep:
            raise
        except Exception as e:  # noqa: BLE001
            raise InternalCompilerError(entry, LOOKUP_STEP, name, e) from e
    return mod, kernels


def cached_modules() -> int:
    """How many modules this process has loaded."""
    return len(_modules)


class Module:
    """A loaded module; :meth:`function` looks each kernel up once."""

    def __init__(self, handle: Any, digest: str, waiting: frozenset[str] = frozenset()) -> None:
        self.handle = handle
        self.digest = digest
        self.waiting = waiting  # kernels that wait for their prerequisite grids first
        self._functions: dict[str, Kernel] = {}

    def function(self, name: str) -> Kernel:
        """The kernel ``name`` (``cuModuleGetFunction`` on first request only)."""
        k = self._functions.get(name)
        if k is None:
            d = driver.api()
            h = check("cuModuleGetFunction", d.cuModuleGetFunction(self.handle, name.encode()))
            k = self._functions[name] = Kernel(h, name)
            k.waits = name in self.waiting
        return k


class Kernel:
    """A kernel handle with a few attributes read once."""

    # its PTX waits for the grids it depends on before touching memory (waiting_kernels):
    # it may be launched on the ``pdl`` path
    waits = False

    def __init__(self, handle: Any, name: str) -> None:
        self.handle = handle
        self.address = int(handle)
        self.name = name
        d = driver.api()
        a = d.CUfunction_attribute
        self.num_regs = int(
            check(
                "cuFuncGetAttribute",
                d.cuFuncGetAttribute(a.CU_FUNC_ATTRIBUTE_NUM_REGS, handle),
            )
        )
        self.max_threads = int(
            check(
                "cuFuncGetAttribute",
                d.cuFuncGetAttribute(a.CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, handle),
            )
        )

    def prepare(
        self,
        arg_types: tuple[str, ...],
        grid: int | tuple[int, int, int],
        block: int | tuple[int, int, int],
        shared: int = 0,
        args: tuple[int | float, ...] | None = None,
        path: str | None = None,
    ) -> Launch:
        """A :class:`Launch` of this kernel with the given argument layout and shape."""
        return Launch(self, arg_types, grid, block, shared, args, path)

    def __repr__(self) -> str:
        return f"Kernel({self.name!r}, regs={self.num_regs})"


def _dim3(v: int | tuple[int, int, int]) -> tuple[int, int, int]:
    if isinstance(v, int):
        return (v, 1, 1)
    x, y, z = v
    return (int(x), int(y), int(z))


LAUNCH_PATHS = ("graph", "bindings", "ctypes", "pydll")

# > 0 while kinac captures a stream (graph.py): graph-path launches then use cuLaunchKernel
CAPTURING: list[int] = [0]


def default_launch_path() -> str:
    """``KINAC_CUDA_LAUNCH`` if set (``graph``, ``bindings``, ``ctypes`` or ``pydll``), else
    ``graph``."""
    p = os.environ.get("KINAC_CUDA_LAUNCH", "graph")
    if p not in LAUNCH_PATHS:
        raise ValueError(f"KINAC_CUDA_LAUNCH must be one of {LAUNCH_PATHS}, not {p!r}")
    return p


class Launch:
    """A kernel launch with a pre-built parameter array.

    ``launch(stream)`` launches with the current argument values; ``launch(stream, *args)``
    first writes the new argument values (one ``struct.pack_into``); ``launch.run(stream)`` is
    the bare launch (one Python call less); ``set(i, v)`` changes one argument.

    Paths to the driver: ``graph`` (a one-kernel executable graph, built on the second eager
    launch, replayed with ``cuGraphLaunch``; argument changes go through
    ``cuGraphExecKernelNodeSetParams``; under a kinac capture it launches like ``pydll``),
    ``bindings`` (cuda-python's ``cuLaunchKernel``), ``ctypes`` (libcuda's ``cuLaunchKernel``
    through ctypes with argtypes, GIL released) and ``pydll`` (the same through
    ``ctypes.PyDLL`` with pre-built ctypes arguments, GIL held during the call).
    ``pdl`` (``cuLaunchKernelEx`` with programmatic stream serialization, only for a kernel
    that waits first: :attr:`Kernel.waits`) is no default: a GPU entry chooses it for the
    launches it captures (``pdl=`` / ``KINAC_PDL``).
    """

    __slots__ = (
        "kernel",
        "arg_types",
        "grid",
        "block",
        "shared",
        "path",
        "run",
        "_n",
        "_buf",
        "_pack",
        "_array",
        "_params",
        "_last",
        "_gstate",
    )

    def __init__(
        self,
        kernel: Kernel,
        arg_types: tuple[str, ...],
        grid: int | tuple[int, int, int],
        block: int | tuple[int, int, int],
        shared: int = 0,
        args: tuple[int | float, ...] | None = None,
        path: str | None = None,
    ) -> None:
        self.kernel = kernel
        self.arg_types = tuple(arg_types)
        try:
            fmt = "<" + "".join(ARG_FORMATS[t] for t in self.arg_types)
        except KeyError as e:
            raise ValueError(f"unknown kernel argument type {e}; known: {list(ARG_TYPES)}") from e
        n = self._n = len(self.arg_types)
        self._pack = struct.Struct(fmt).pack_into
        self._buf = (ctypes.c_uint8 * max(8 * n, 8))()
        base = ctypes.addressof(self._buf)
        self._array = (ctypes.c_void_p * max(n, 1))(*[base + 8 * i for i in range(n)])
        self._params = ctypes.addressof(self._array) if n else None
        self._last: tuple[int | float, ...] = tuple(
            0.0 if t[0] == "f" else 0 for t in self.arg_types
        )
        self.grid = _dim3(grid)
        self.block = _dim3(block)
        self.shared = int(shared)
        self.path = path or default_launch_path()
        if self.path not in LAUNCH_PATHS and self.path != "pdl":
            raise ValueError(f"launch path must be one of {LAUNCH_PATHS}, not {self.path!r}")
        if self.path == "pdl" and not getattr(kernel, "waits", False):
            raise ValueError(
                f"{kernel.name} does not wait for the grids it depends on before touching "
                f"memory: it cannot be launched with programmatic dependent launch"
            )
        self._gstate: GraphState | None = None
        self.run = self._make_call()
        if args is not None:
            self.update(args)

    def _make_call(self) -> Callable[[Stream], None]:
        gx, gy, gz = self.grid
        bx, by, bz = self.block
        shm = self.shared
        params = self._params
        fail = driver.fail
        if self.path == "bindings":
            f = driver.api().cuLaunchKernel
            fn = self.kernel.handle
            ok = driver.OK

            def call(stream: Stream) -> None:
                r = f(fn, gx, gy, gz, bx, by, bz, shm, stream.cu, params, 0)
                if r[0] != ok:
                    fail("cuLaunchKernel", r[0])

            return call
        if self.path == "graph":
            return self._make_graph_call()
        if self.path == "pdl":
            return pdl_call(self.kernel.address, self.grid, self.block, self.shared, params)
        if self.path == "ctypes":
            cf = driver.ctypes_launch()
            fa = self.kernel.address

            def call_ct(stream: Stream) -> None:
                rc = cf(fa, gx, gy, gz, bx, by, bz, shm, stream.handle, params, None)
                if rc:
                    fail("cuLaunchKernel", rc)

            return call_ct
        return pydll_call(self.kernel.address, self.grid, self.block, self.shared, self._params)

    def _make_graph_call(self) -> Callable[[Stream], None]:
        st = self._gstate = GraphState(self.kernel.address, self.grid, self.block, self.shared)
        params = self._params
        cap = CAPTURING
        c_int, byref = ctypes.c_int, ctypes.byref
        fail = driver.fail

        def call_graph(stream: Stream) -> None:
            sv = stream.cvp
            status = c_int(0)  # per call: several threads may launch at once
            # Captured (by kinac, or by anyone: the driver refuses cuGraphLaunch on a capturing
            # stream) or capture state unknown: a plain cuLaunchKernel, i.e. a kernel node.
            iscap = st.is_capturing or st.make_is_capturing()
            if cap[0] or iscap(sv, byref(status)) or status.value:
                (st.plain or st.make_plain(params))(stream)
                return
            if st.launch is None:
                if not st.launched:  # a first launch may be the only one: no graph yet
                    st.launched = True
                    (st.plain or st.make_plain(params))(stream)
                    return
                st.build(params)
            elif st.dirty:
                st.refresh()
            rc = st.launch(st.exec, sv)
            if rc:
                fail("cuGraphLaunch", rc)

        return call_graph

    def close(self) -> None:
        """Release the one-kernel graph of the ``graph`` path now (else when collected)."""
        if self._gstate is not None:
            self._gstate.close()

    def set(self, i: int, value: int | float) -> None:
        """Write argument ``i``."""
        struct.pack_into("<" + ARG_FORMATS[self.arg_types[i]], self._buf, 8 * i, value)
        if self._gstate is not None:
            self._gstate.dirty = True
        last = list(self._last)
        last[i] = value
        self._last = tuple(last)

    def update(self, args: tuple[int | float, ...]) -> None:
        """Write all arguments (one ``struct.pack_into`` into the packed buffer)."""
        if len(args) != self._n:
            raise TypeError(f"{self.kernel.name} takes {self._n} arguments, got {len(args)}")
        try:
            self._pack(self._buf, 0, *args)
        except struct.error as e:
            raise TypeError(f"{self.kernel.name}{self.arg_types}: bad arguments {args}: {e}") from e
        self._last = tuple(args)
        if self._gstate is not None:
            self._gstate.dirty = True

    def __call__(self, stream: Stream, *args: int | float) -> None:
        if args:
            try:
                self._pack(self._buf, 0, *args)
            except struct.error as e:
                raise TypeError(
                    f"{self.kernel.name}{self.arg_types}: bad arguments {args}: {e}"
                ) from e
            if self._gstate is not None and args != self._last:
                self._gstate.dirty = True
            self._last = args
        self.run(stream)

    @property
    def args(self) -> tuple[int | float, ...]:
        """The argument values the next launch will pass."""
        return self._last
