"""Executing a compiled entry on the host.

:func:`load_entry` links an entry's object code into the process (binding its BLAS calls) and
returns a :class:`HostEntry`, a callable taking one array per param. Each call allocates the
outputs (or writes into the caller's, ``out=``: buffer donation, so a training step allocates
nothing), reuses a per-thread scratch arena, runs the code through one ctypes call, then checks
the status buffer the kernels write runtime errors into.
"""

from __future__ import annotations

import ctypes
import threading
import weakref
from typing import Any

import numpy as np

from kinac.artifacts.host import GATHER_OOB, LoweredEntry
from kinac.rt.host.arrays import OUTPUT_STATS, as_host_array, given_output, new_output
from kinac.rt.host.blas import single_threaded_blas
from kinac.rt.host.errors import KinaRuntimeError
from kinac.rt.host.pool import pool_hint, runtime_symbols

_PROTO = ctypes.CFUNCTYPE(None, ctypes.c_void_p)


def _address(a: np.ndarray) -> int:
    """The data address of a C-contiguous array: through the buffer protocol (~0.7 us), not
    ``a.ctypes.data`` (~2 us: it builds a ``_ctypes`` object), eleven times per call of the
    transformer block; read-only and empty arrays, which ctypes refuses, take the slow way."""
    try:
        return ctypes.addressof(ctypes.c_char.from_buffer(a))  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return int(a.ctypes.data)


class _ThreadEnd:
    """Held in one thread's local storage only: collected when the thread ends."""

    __slots__ = ("__weakref__",)


def _give_back(free: list[Any], lock: threading.Lock, scratch: Any) -> None:
    with lock:
        free.append(scratch)


_POOL_CALLS = ("kinac_sgemm", "kinac_dgemm", "kinac_parallel")
_DEFAULT: Any = object()


class HostEntry:
    """A compiled entry: ``entry(*arrays)`` returns its output (a tuple if several).

    ``hint``: called first in every call of an entry that uses the task pool, so the pool's
    workers are awake when its first step starts (``pool.HINT``); by default the running
    pool's, ``None`` for none (an entry bound to a pool of its own passes that pool's)."""

    def __init__(self, lowered: LoweredEntry, image: Any, hint: Any = _DEFAULT) -> None:
        self.lowered = lowered
        self._image = image  # keeps the code mapped
        self._fn = _PROTO(image.addresses[lowered.symbol])
        self._local = threading.local()
        self._free: list[Any] = []  # scratch given back by threads that ended
        self._free_lock = threading.Lock()
        self._nargs = len(lowered.params) + len(lowered.outputs) + 2
        self._blas = any(c in lowered.library_calls for c in ("kinac_sgemm", "kinac_dgemm"))
        uses_pool = any(c in lowered.library_calls for c in _POOL_CALLS)
        self._hint = (pool_hint() if uses_pool else None) if hint is _DEFAULT else hint

    @property
    def name(self) -> str:
        return self.lowered.name

    def _scratch(self) -> tuple[np.ndarray, int, int]:
        """This thread's status buffer, and the addresses of its arena and status buffer.

        A thread's first call takes a scratch that an ended thread gave back, if any, before
        allocating one: callers that run each step on new threads (the mesh simulator's
        ranks) reuse their arenas instead of allocating them every step."""
        got = getattr(self._local, "scratch", None)
        if got is None:
            with self._free_lock:
                got = self._free.pop() if self._free else None
            if got is None:
                arena = np.empty(self.lowered.arena_bytes, dtype=np.uint8)
                status = np.zeros(self.lowered.status_slots, dtype=np.int64)
                OUTPUT_STATS.scratch += 1
                OUTPUT_STATS.scratch_nbytes += arena.nbytes + status.nbytes
                got = (arena, status, arena.ctypes.data, status.ctypes.data)
            self._local.scratch = got
            # collected when this thread ends (its locals go): the scratch goes back
            self._local.holder = holder = _ThreadEnd()
            weakref.finalize(holder, _give_back, self._free, self._free_lock, got).atexit = False
        return got[1], got[2], got[3]

    def __call__(self, *arrays: Any, out: tuple[Any, ...] | list[Any] | None = None) -> Any:
        """Run on ``arrays``; ``out``, one array per output, receives the results (no buffer
        is allocated: a training step reuses its buffers) and is returned as a call would."""
        if self._hint is not None:
            self._hint()
        lw = self.lowered
        if len(arrays) != len(lw.params):
            raise KinaRuntimeError(
                f"{lw.name} takes {len(lw.params)} arrays "
                f"({', '.join(p.name for p in lw.params)}), got {len(arrays)}"
            )
        ins = [
            as_host_array(a, p.name, p.dtype, p.shape)
            for a, p in zip(arrays, lw.params, strict=True)
        ]
        if out is None:
            outs = [new_output(o.dtype, o.shape) for o in lw.outputs]
        else:
            if len(out) != len(lw.outputs):
                raise KinaRuntimeError(
                    f"{lw.name} has {len(lw.outputs)} outputs, got {len(out)} out= arrays"
                )
            outs = [
                given_output(x, f"{lw.name}[{i}]", o.dtype, o.shape, ins)
                for i, (x, o) in enumerate(zip(out, lw.outputs, strict=True))
            ]
        status, arena_at, status_at = self._scratch()
        status[0] = 0
        ptrs = [_address(b) for b in ins] + [_address(b) for b in outs] + [arena_at, status_at]
        argv = (ctypes.c_void_p * self._nargs)(*ptrs)
        if self._blas:
            with single_threaded_blas:
                self._fn(argv)
        else:
            self._fn(argv)
        if status[0]:
            raise self._error(status.copy())
        return outs[0] if len(outs) == 1 else tuple(outs)

    def _error(self, status: np.ndarray) -> KinaRuntimeError:
        code, k, pos, value, bound = (int(x) for x in status[:5])
        step = self.lowered.steps[k] if 0 <= k < len(self.lowered.steps) else None
        if code == GATHER_OOB and step is not None:
            where = tuple(int(i) for i in np.unravel_index(pos, step.aux)) if step.aux else ()
            return KinaRuntimeError(
                f"{self.lowered.name}: gather index {value} at position {list(where)} of the "
                f"index tensor is outside [0, {bound}) (kernel {step.sym})"
            )
        return KinaRuntimeError(f"{self.lowered.name}: runtime check {code} failed")

    def __repr__(self) -> str:
        ps = ", ".join(f"{p.name}: {p.dtype}{list(p.shape)}" for p in self.lowered.params)
        return f"<HostEntry {self.lowered.name}({ps})>"


def load_entry(lowered: LoweredEntry, object_code: bytes | tuple[bytes, ...]) -> HostEntry:
    """Link ``object_code`` (from :func:`kinac.codegen.llvm.compile_object`; for an entry
    split into kernels, its wrapper's object then each kernel's) and wrap it.

    The runtime loads objects; it never compiles a graph (that is :mod:`kinac.graph_build` or
    the pipeline's queries): ``tests/test_layers.py`` keeps the compiler out of ``kinac.rt``.
    """
    from kinac.codegen.llvm import jit_load

    symbols = {n: a for n, a in runtime_symbols().items() if n in lowered.library_calls}
    image = jit_load(object_code, symbols, (lowered.symbol,))
    return HostEntry(lowered, image)
