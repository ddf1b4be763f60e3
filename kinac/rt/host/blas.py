"""Binding the generated code's BLAS calls to numpy's OpenBLAS.

Generated code calls ``kinac_sgemm`` / ``kinac_dgemm`` with the CBLAS ``?gemm`` signature and
64-bit integers (``ILP64``). numpy >= 2 wheels ship OpenBLAS built that way with prefixed
symbols (``scipy_cblas_sgemm64_``); this module finds the library numpy loaded (through
``/proc/self/maps``, so it is exactly numpy's copy, threads and all) and returns the addresses
to bind. Without a usable BLAS it falls back to a ctypes callback that computes with
``numpy.matmul`` on the same memory: slower, but the same results.
"""

from __future__ import annotations

import ctypes
import functools
import threading
from typing import Any

import numpy as np

from kinac.rt.host.pool import SPLIT

_NAMES = {
    "kinac_sgemm": ("scipy_cblas_sgemm64_", "cblas_sgemm64_", "cblas_sgemm_64"),
    "kinac_dgemm": ("scipy_cblas_dgemm64_", "cblas_dgemm64_", "cblas_dgemm_64"),
}
_THREADS = ("scipy_openblas_get_num_threads64_", "openblas_get_num_threads64_")
_KEEP: list[Any] = []  # ctypes callbacks must outlive the code that calls them


@functools.cache
def _loaded_openblas() -> ctypes.CDLL | None:
    np.dot(np.ones((2, 2)), np.ones((2, 2)))  # make sure numpy's BLAS is loaded
    try:
        with open("/proc/self/maps") as f:
            paths = {line.split()[-1] for line in f if "openblas" in line.lower()}
    except OSError:
        return None
    for p in sorted(paths):  # scipy may load a 32-bit-integer OpenBLAS too: skip it
        if p.endswith(".so") or ".so." in p:
            try:
                lib = ctypes.CDLL(p)
            except OSError:
                continue
            if any(hasattr(lib, n) for n in _NAMES["kinac_sgemm"]):
                return lib
    return None


def _fallback(dtype: Any) -> int:
    ct = ctypes.c_float if dtype == np.float32 else ctypes.c_double
    i32, i64, ptr = ctypes.c_int32, ctypes.c_int64, ctypes.c_void_p
    proto = ctypes.CFUNCTYPE(
        None, i32, i32, i32, i64, i64, i64, ct, ptr, i64, ptr, i64, ct, ptr, i64
    )

    def view(p: int, rows: int, cols: int, ld: int) -> np.ndarray:
        buf = (ct * ((rows - 1) * ld + cols)).from_address(p)
        a = np.frombuffer(memoryview(buf), dtype=dtype)
        return np.lib.stride_tricks.as_strided(a, (rows, cols), (ld * a.itemsize, a.itemsize))

    def gemm(order: int, ta: int, tb: int, m: int, n: int, k: int, alpha: float, a: int, lda: int, b: int, ldb: int, beta: float, c: int, ldc: int) -> None:  # fmt: skip
        av = view(a, k, m, lda).T if ta == 112 else view(a, m, k, lda)
        bv = view(b, n, k, ldb).T if tb == 112 else view(b, k, n, ldb)
        view(c, m, n, ldc)[...] = alpha * (av @ bv)

    cb = proto(gemm)
    _KEEP.append(cb)
    return ctypes.cast(cb, ctypes.c_void_p).value or 0


@functools.cache
def raw_gemms() -> dict[str, int]:
    """``kinac_sgemm`` / ``kinac_dgemm`` bound straight to the BLAS (or the numpy fallback)."""
    lib = _loaded_openblas()
    out: dict[str, int] = {}
    for ours, names in _NAMES.items():
        for n in names:
            fn = getattr(lib, n, None) if lib is not None else None
            if fn is not None:
                out[ours] = ctypes.cast(fn, ctypes.c_void_p).value or 0
                break
        else:
            out[ours] = _fallback(np.float32 if ours == "kinac_sgemm" else np.float64)
    return out


def use_split_blas() -> bool:
    """Whether kinac can run OpenBLAS single-threaded and split products itself."""
    lib = _loaded_openblas()
    return lib is not None and _thread_control(lib) is not None


_GETS = (
    "scipy_openblas_get_num_threads64_",
    "openblas_get_num_threads64_",
    "openblas_get_num_threads",
)
_SETS = (
    "scipy_openblas_set_num_threads64_",
    "openblas_set_num_threads64_",
    "openblas_set_num_threads",
)


@functools.cache
def _thread_control(lib: ctypes.CDLL) -> tuple[Any, Any] | None:
    get = next((getattr(lib, n) for n in _GETS if hasattr(lib, n)), None)
    put = next((getattr(lib, n) for n in _SETS if hasattr(lib, n)), None)
    if get is None or put is None:
        return None
    get.restype, get.argtypes = ctypes.c_int, []
    put.restype, put.argtypes = None, [ctypes.c_int]
    return get, put


class _SingleThreaded:
    """While any kinac call runs, OpenBLAS runs single-threaded (kinac splits the work)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.depth = 0
        self.saved = 0

    def __enter__(self) -> None:
        if not SPLIT:
            return
        get, put = _thread_control(_loaded_openblas())  # type: ignore[arg-type, misc]
        with self.lock:
            if self.depth == 0:
                self.saved = get()
                put(1)
            self.depth += 1

    def __exit__(self, *exc: object) -> None:
        if not SPLIT:
            return
        _, put = _thread_control(_loaded_openblas())  # type: ignore[arg-type, misc]
        with self.lock:
            self.depth -= 1
            if self.depth == 0:
                put(self.saved)


single_threaded_blas = _SingleThreaded()


def blas_info() -> str:
    """Which BLAS the generated code calls, and with how many threads (for benchmarks)."""
    lib = _loaded_openblas()
    if lib is None:
        return "numpy fallback (no OpenBLAS found)"
    threads = "?"
    for n in _THREADS:
        fn = getattr(lib, n, None)
        if fn is not None:
            fn.restype = ctypes.c_int
            threads = str(fn())
            break
    name = lib._name.rsplit("/", 1)[-1]
    if SPLIT:
        from kinac.rt.host.pool import thread_count

        return f"{name}, single-threaded blocks on kinac's pool of {thread_count()} threads"
    return f"{name} ({threads} threads)"
