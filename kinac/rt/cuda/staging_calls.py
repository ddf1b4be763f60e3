"""The staging driver calls through ctypes with pre-built arguments (issue 17 item 3).

Why: a host-input call's stager makes several driver calls per call (an event record, a
stream's wait, a host wait, an asynchronous copy); cuda-python's bindings cost ~1 us of Python
each (argument conversion, a result tuple), libcuda's functions through ``ctypes.PyDLL`` with
arguments made once ~0.2 us. :class:`Calls` is that set, with how its arguments are made, so
the stager and its steady state (:mod:`~kinac.rt.cuda.staging_hot`) call one interface; the
bindings serve where libcuda does not open through ctypes (and the tests' fake drivers).
"""

from __future__ import annotations

import ctypes
import types
from collections.abc import Callable
from typing import Any

from kinac.rt.cuda import driver


def priority_range() -> tuple[int, int]:
    """``(least, greatest)`` stream priorities of the current context (``(0, 0)`` when the
    driver offers none); greatest is the numerically lowest."""
    d = driver.api()
    least, greatest = driver.check("cuCtxGetStreamPriorityRange", d.cuCtxGetStreamPriorityRange())
    return int(least), int(greatest)


class Calls:
    """The driver calls of staging, each returning the CUresult as an int, and how their
    arguments are made: ``record(ev, stream)``, ``wait(stream, ev, flags)``, ``sync(ev)``,
    ``copy(dst, src, nbytes, stream)``, and ``query(ev)`` (0 when the event is done; None
    where the driver has none: the stager waits instead). Native: libcuda through ctypes with ``c_void_p``
    (handles, host addresses), ``c_uint64`` (device addresses) and ``c_size_t`` arguments made
    once; ``sync`` through ``ctypes.CDLL``, which lets other threads run while it waits.
    Bindings: cuda-python's functions with int arguments (a driver without the ctypes library,
    and the tests' fake drivers)."""

    __slots__ = (
        "record", "wait", "sync", "copy", "query", "handle", "dev", "size", "zero", "native"
    )  # fmt: skip

    def __init__(
        self,
        native: bool,
        fns: tuple[Callable[..., int], ...],
        query: Callable[..., int] | None = None,
    ) -> None:
        self.native = native
        self.record, self.wait, self.sync, self.copy = fns
        self.query = query
        conv: Callable[[int], Any] = int
        self.handle = ctypes.c_void_p if native else conv
        self.dev = ctypes.c_uint64 if native else conv
        self.size = ctypes.c_size_t if native else conv
        self.zero = ctypes.c_uint(0) if native else 0


_native: Calls | None = None


def _native_calls() -> Calls:
    global _native
    if _native is None:
        vp, u = ctypes.c_void_p, ctypes.c_uint
        py = driver.libcuda(ctypes.PyDLL)
        # lib[name]: function objects of our own (lib.name is shared, and we set argtypes)
        rec, wait = py["cuEventRecord"], py["cuStreamWaitEvent"]
        copy = py["cuMemcpyHtoDAsync_v2"]  # the plain name is the 32-bit-address v1
        try:
            query: Any = py["cuEventQuery"]  # (PyDLL: it never blocks)
        except AttributeError:  # (a stand-in library without it: the stager waits instead)
            query = None
        sync = driver.libcuda(ctypes.CDLL)["cuEventSynchronize"]
        sigs: tuple[tuple[Any, list[Any]], ...] = (
            (rec, [vp, vp]),
            (wait, [vp, vp, u]),
            (sync, [vp]),
            (copy, [ctypes.c_uint64, vp, ctypes.c_size_t, vp]),
        )
        for f, args in sigs + (((query, [vp]),) if query is not None else ()):
            f.restype = ctypes.c_int
            f.argtypes = args
        _native = Calls(True, (rec, wait, sync, copy), query)
    return _native


def _bindings_calls(d: Any) -> Calls:
    def record(ev: int, s: int) -> int:
        return int(d.cuEventRecord(ev, s)[0])

    def wait(s: int, ev: int, flags: int) -> int:
        return int(d.cuStreamWaitEvent(s, ev, flags)[0])

    def sync(ev: int) -> int:
        return int(d.cuEventSynchronize(ev)[0])

    def copy(dst: int, src: int, n: int, s: int) -> int:
        return int(d.cuMemcpyHtoDAsync(dst, src, n, s)[0])

    def query(ev: int) -> int:
        return int(d.cuEventQuery(ev)[0])

    return Calls(False, (record, wait, sync, copy), query if hasattr(d, "cuEventQuery") else None)


def driver_calls() -> Calls:
    """Native calls when the driver is cuda-python's module and libcuda opens through ctypes;
    the bindings otherwise (a fake driver object in the tests)."""
    d = driver.api()
    if isinstance(d, types.ModuleType):
        try:
            return _native_calls()
        except (OSError, AttributeError):  # no ctypes-loadable libcuda: the bindings serve
            pass
    return _bindings_calls(d)
