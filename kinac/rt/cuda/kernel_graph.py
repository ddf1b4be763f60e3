"""One-kernel CUDA graphs: the cheapest way to launch a prepared kernel eagerly.

On the lent H200s (Firecracker VMs, driver 580) ``cuLaunchKernel`` costs 3.2-4.7 us of host
time even when called from native code, while ``cuGraphLaunch`` of an executable graph that
holds one kernel node costs 1.2-2.0 us (``benches/launch_probe.py``, 2026-11-29): a plain launch
builds the kernel's launch descriptor on every call, a graph builds it once, when it is
instantiated.  So a :class:`~kinac.rt.cuda.module.Launch` on the ``graph`` path owns a
:class:`KernelGraph`, built on its second eager launch (the first is a plain
``cuLaunchKernel``, so a one-off launch never pays for a graph), and launches it with
``cuGraphLaunch``.

The driver refuses ``cuGraphLaunch`` on a stream that is being captured
(``CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED``, seen on driver 580, and it invalidates the capture),
so each launch first asks ``cuStreamIsCapturing``; on a capturing stream (kinac's own capture,
or anyone else's, e.g. ``torch.cuda.graph``) it launches with ``cuLaunchKernel`` instead, which
records an ordinary kernel node.

New argument values reach the executable graph through ``cuGraphExecKernelNodeSetParams``,
which copies the parameter array at the call and affects only later launches: launches already
queued keep the values they were launched with, exactly as with ``cuLaunchKernel``.  Two
launches of one executable graph are ordered after each other even on different streams; that
extra ordering is safe (it only ever delays).

Calls go through ``ctypes.PyDLL`` with pre-built ctypes arguments: no argument conversion and
no GIL release per call, which is the cheapest Python-to-C call ctypes has.
"""

from __future__ import annotations

import ctypes
import weakref
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from kinac.rt.cuda import driver

if TYPE_CHECKING:
    from kinac.rt.cuda.device import Stream

_u = ctypes.c_uint
_vp = ctypes.c_void_p


class KernelNodeParams(ctypes.Structure):
    """``CUDA_KERNEL_NODE_PARAMS_v2`` of cuda.h (CUDA 12 and later)."""

    _fields_ = [
        ("func", _vp),
        ("gridDimX", _u),
        ("gridDimY", _u),
        ("gridDimZ", _u),
        ("blockDimX", _u),
        ("blockDimY", _u),
        ("blockDimZ", _u),
        ("sharedMemBytes", _u),
        ("kernelParams", _vp),
        ("extra", _vp),
        ("kern", _vp),
        ("ctx", _vp),
    ]


_fns: dict[str, Any] = {}
# the _v2 entry points take the v2 parameter struct above (cuda.h maps the plain names to them)
_V2 = ("cuGraphAddKernelNode", "cuGraphExecKernelNodeSetParams")


def libcuda_fn(name: str) -> Any:
    """libcuda's ``name`` (its ``_v2`` symbol where cuda.h maps to one), through PyDLL."""
    f = _fns.get(name)
    if f is None:
        lib = driver.libcuda(ctypes.PyDLL)
        f = getattr(lib, f"{name}_v2") if name in _V2 else getattr(lib, name)
        f.restype = ctypes.c_int
        _fns[name] = f
    return f


def _check(call: str, rc: int) -> None:
    if rc:
        driver.fail(call, rc)


def _destroy(exec_handle: int, graph_handle: int) -> None:
    """Release an executable graph and its graph (finaliser: errors are ignored, since the
    context may already be gone)."""
    try:
        libcuda_fn("cuGraphExecDestroy")(_vp(exec_handle))
        libcuda_fn("cuGraphDestroy")(_vp(graph_handle))
    except Exception:  # noqa: BLE001 - never raise from a finaliser
        pass


def stream_is_capturing() -> Any:
    """libcuda's ``cuStreamIsCapturing(stream, &status)`` through PyDLL: returns the CUresult
    and writes the capture status (0: not capturing) through the pointer."""
    return libcuda_fn("cuStreamIsCapturing")


class KernelGraph:
    """An executable graph of one kernel node, with a fixed grid and parameter array.

    ``params`` is the address of the ``void*[]`` array the kernel's arguments are read from
    (``None`` for a kernel without parameters); :meth:`refresh` re-reads it into the
    executable graph; :attr:`launcher` is what queues the graph on a stream.
    """

    __slots__ = (
        "exec",
        "graph",
        "node",
        "_p",
        "_pref",
        "_set",
        "_launch",
        "_ex",
        "_nd",
        "_fin",
        "__weakref__",
    )

    def __init__(
        self,
        func: int,
        grid: tuple[int, int, int],
        block: tuple[int, int, int],
        shared: int,
        params: int | None,
    ) -> None:
        self._p = KernelNodeParams(func, *grid, *block, shared, params, None, None, None)
        self._pref = ctypes.byref(self._p)
        g, node, ex = _vp(), _vp(), _vp()
        _check("cuGraphCreate", libcuda_fn("cuGraphCreate")(ctypes.byref(g), _u(0)))
        try:
            add = libcuda_fn("cuGraphAddKernelNode")
            _check(
                "cuGraphAddKernelNode",
                add(ctypes.byref(node), g, None, ctypes.c_size_t(0), self._pref),
            )
            inst = libcuda_fn("cuGraphInstantiateWithFlags")
            _check(
                "cuGraphInstantiateWithFlags",
                inst(ctypes.byref(ex), g, ctypes.c_ulonglong(0)),
            )
        except BaseException:
            libcuda_fn("cuGraphDestroy")(g)
            raise
        self.graph, self.node, self.exec = (
            int(g.value or 0),
            int(node.value or 0),
            int(ex.value or 0),
        )
        self._ex, self._nd = ex, node
        self._set = libcuda_fn("cuGraphExecKernelNodeSetParams")
        self._launch = libcuda_fn("cuGraphLaunch")
        self._fin = weakref.finalize(self, _destroy, self.exec, self.graph)
        self._fin.atexit = False  # at exit the driver may already be torn down

    def refresh(self) -> None:
        """Copy the current argument values into the executable graph (later launches see
        them; queued ones do not)."""
        rc = self._set(self._ex, self._nd, self._pref)
        if rc:
            driver.fail("cuGraphExecKernelNodeSetParams", rc)

    @property
    def launcher(self) -> tuple[Any, Any]:
        """``(cuGraphLaunch, exec)``: call ``f(exec, stream_c_void_p)`` for the bare launch."""
        return self._launch, self._ex

    def close(self) -> None:
        """Destroy the executable graph now (it is also destroyed when collected)."""
        self._fin()


def pydll_call(
    func: int,
    grid: tuple[int, int, int],
    block: tuple[int, int, int],
    shared: int,
    params: int | None,
) -> Callable[[Stream], None]:
    """``cuLaunchKernel`` through PyDLL with pre-built ctypes arguments (the ``pydll`` path)."""
    fail = driver.fail
    pf = driver.pydll_launch()
    u = ctypes.c_uint
    vp = ctypes.c_void_p
    head: tuple[Any, ...] = (vp(func), *(u(g) for g in grid), *(u(b) for b in block), u(shared))
    tail: tuple[Any, ...] = (vp(params), vp(None))

    def call_py(stream: Stream) -> None:
        rc = pf(*head, stream.cvp, *tail)  # stream.cvp: the stream's own c_void_p, not shared
        if rc:
            fail("cuLaunchKernel", rc)

    return call_py


class LaunchAttribute(ctypes.Structure):
    """``CUlaunchAttribute`` of cuda.h: an id, 4 bytes of padding, a 64-byte value union
    (8-byte aligned: some members hold pointers)."""

    _fields_ = [("id", ctypes.c_int), ("pad", ctypes.c_int), ("value", ctypes.c_int64 * 8)]


class LaunchConfig(ctypes.Structure):
    """``CUlaunchConfig`` of cuda.h (CUDA 12 and later), the first argument of
    ``cuLaunchKernelEx``."""

    _fields_ = [
        ("gridDimX", _u),
        ("gridDimY", _u),
        ("gridDimZ", _u),
        ("blockDimX", _u),
        ("blockDimY", _u),
        ("blockDimZ", _u),
        ("sharedMemBytes", _u),
        ("hStream", _vp),
        ("attrs", _vp),
        ("numAttrs", _u),
    ]


# CUlaunchAttributeID: the launch may begin before the previous kernel of its stream has
# finished (once that kernel's blocks have all run ``griddepcontrol.launch_dependents`` or
# exited); the kernel itself must wait (``griddepcontrol.wait``) before touching memory
PROGRAMMATIC_STREAM_SERIALIZATION = 6


def pdl_call(
    func: int,
    grid: tuple[int, int, int],
    block: tuple[int, int, int],
    shared: int,
    params: int | None,
) -> Callable[[Stream], None]:
    """``cuLaunchKernelEx`` through PyDLL with the programmatic-stream-serialization
    attribute (programmatic dependent launch, the ``pdl`` path): under stream capture the
    driver records a programmatic edge from the previous kernel node (CUDA 12.3+), so inside
    an entry's graph this kernel's launch overlaps the end of the previous kernel. Only for
    kernels whose PTX waits before any memory access (:func:`kinac.rt.cuda.module.waiting_kernels`):
    the :class:`~kinac.rt.cuda.module.Launch` refuses others."""
    f = libcuda_fn("cuLaunchKernelEx")
    attr = LaunchAttribute(PROGRAMMATIC_STREAM_SERIALIZATION, 0)
    attr.value[0] = 1  # programmaticStreamSerializationAllowed (an int at the union's start)
    cfg = LaunchConfig(*grid, *block, shared, None, ctypes.addressof(attr), 1)
    keep = (attr, cfg)  # the closure owns the structures the pointers name
    ref, fvp, pvp = ctypes.byref(cfg), _vp(func), _vp(params)
    plain = pydll_call(func, grid, block, shared, params)
    on = [True]

    def call_pdl(stream: Stream) -> None:
        if on[0]:
            cfg.hStream = stream.handle  # the stream of this launch (capture, or the entry's)
            rc = f(ref, fvp, pvp, None)
            if not rc:
                return
            # refused (a driver without programmatic launches under capture): this launch and
            # the later ones are plain; a sticky error fails the plain launch too, and raises
            PDL_REFUSED.append(rc)
            on[0] = False
        plain(stream)

    call_pdl.keep = keep  # type: ignore[attr-defined]
    return call_pdl


PDL_REFUSED: list[int] = []  # CUresults of refused programmatic launches (benchmarks report them)


class GraphState:
    """The ``graph`` path's one-kernel graph, built on the second eager launch (a one-off
    launch is a plain ``cuLaunchKernel``: building costs 34-48 us, about ten launches), and
    whether the packed arguments changed since it last read them.  Kept apart from
    :class:`Launch` so that the launch closure holds no reference cycle."""

    __slots__ = (
        "func",
        "grid",
        "block",
        "shared",
        "graph",
        "launch",
        "exec",
        "dirty",
        "plain",
        "is_capturing",
        "launched",
    )

    def __init__(
        self, func: int, grid: tuple[int, int, int], block: tuple[int, int, int], shared: int
    ) -> None:
        self.func, self.grid, self.block, self.shared = func, grid, block, shared
        self.graph: Any = None
        self.launch: Any = None
        self.exec: Any = None
        self.dirty = False
        self.plain: Callable[[Stream], None] | None = None
        self.is_capturing: Callable[[Any, Any], int] | None = None
        self.launched = False  # launched once already (plainly): the next launch builds

    def make_is_capturing(self) -> Callable[[Any, Any], int]:
        self.is_capturing = stream_is_capturing()
        return self.is_capturing

    def make_plain(self, params: int | None) -> Callable[[Stream], None]:
        self.plain = pydll_call(self.func, self.grid, self.block, self.shared, params)
        return self.plain

    def build(self, params: int | None) -> None:
        self.graph = KernelGraph(self.func, self.grid, self.block, self.shared, params)
        self.launch, self.exec = self.graph.launcher
        self.dirty = False

    def refresh(self) -> None:
        self.graph.refresh()
        self.dirty = False

    def close(self) -> None:
        if self.graph is not None:
            self.graph.close()
        self.graph = self.launch = self.exec = None
