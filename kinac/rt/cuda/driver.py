"""The one module that imports cuda-python (``cuda.bindings.driver``), lazily.

Importing kinac never touches the driver: :func:`api` imports the bindings on first use, so
machines without a GPU (CI) can import every runtime module and run the CPU-side tests.  Every
driver call goes through :func:`check` (or an inline ``!= OK`` test on hot paths followed by
:func:`fail`), which turns a CUresult into a :class:`~kinac.rt.cuda.errors.CudaError` naming the
call and the error.

It also opens the same ``libcuda`` through ctypes (:func:`libcuda`): same driver, same context,
less Python glue per call.  The hot launch paths use it: ``cuLaunchKernel`` for the ``ctypes``
and ``pydll`` paths of :class:`~kinac.rt.cuda.module.Launch`, and the graph entry points of
:mod:`~kinac.rt.cuda.kernel_graph` for its default ``graph`` path.
"""

from __future__ import annotations

import ctypes
import os
from collections.abc import Callable
from typing import Any

from kinac.rt.cuda.errors import CudaError, CudaOutOfMemoryError, CudaUnavailableError

_api: Any = None
OK: Any = None  # CUresult.CUDA_SUCCESS once loaded
_initialised = False
_available: bool | None = None

OOM_CODE = 2  # CUDA_ERROR_OUT_OF_MEMORY


def api() -> Any:
    """Return ``cuda.bindings.driver`` (imported on first call)."""
    global _api, OK
    if _api is None:
        try:
            from cuda.bindings import driver as d
        except ImportError:
            try:
                from cuda import cuda as d  # type: ignore[no-redef]  # cuda-python 11/12 layout
            except ImportError as e:
                raise CudaUnavailableError(f"cuda-python is not installed: {e}") from e
        OK = d.CUresult.CUDA_SUCCESS
        _api = d
    return _api


def _decode(v: Any) -> str:
    if isinstance(v, bytes):
        return v.decode(errors="replace")
    return str(v)


def make_error(call: str, err: Any, detail: str = "") -> CudaError:
    """Build the CudaError for CUresult ``err`` returned by ``call``."""
    d = api()
    code = int(err)
    try:
        res, name = d.cuGetErrorName(err)
        name_s = _decode(name) if res == OK and name is not None else f"CUresult {code}"
    except Exception:  # noqa: BLE001 - naming must never mask the original failure
        name_s = f"CUresult {code}"
    try:
        res, desc = d.cuGetErrorString(err)
        desc_s = _decode(desc) if res == OK and desc is not None else "unknown error"
    except Exception:  # noqa: BLE001
        desc_s = "unknown error"
    cls = CudaOutOfMemoryError if code == OOM_CODE else CudaError
    return cls(call, code, name_s, desc_s, detail)


def fail(call: str, err: Any, detail: str = "") -> None:
    """Raise the CudaError for ``err`` (used after an inline check on a hot path)."""
    d = api()
    if isinstance(err, int) and not isinstance(err, d.CUresult):
        try:
            err = d.CUresult(err)
        except ValueError:
            pass
    raise make_error(call, err, detail)


def check(call: str, result: tuple[Any, ...]) -> Any:
    """Check a bindings result tuple ``(CUresult, *outputs)``; return the output(s)."""
    err = result[0]
    if err != OK:
        raise make_error(call, err)
    n = len(result)
    if n == 1:
        return None
    if n == 2:
        return result[1]
    return result[1:]


def init() -> Any:
    """``cuInit(0)`` once; return the bindings module.  No driver: CudaUnavailableError."""
    global _initialised
    d = api()
    if not _initialised:
        try:
            res = d.cuInit(0)
        except Exception as e:  # noqa: BLE001 - e.g. libcuda not found by cuda.pathfinder
            raise CudaUnavailableError(f"no CUDA driver: {type(e).__name__}: {e}") from e
        if res[0] != OK:
            raise CudaUnavailableError(str(make_error("cuInit", res[0])))
        _initialised = True
    return d


def available() -> bool:
    """True when cuda-python, a driver and at least one device are present (cached)."""
    global _available
    if _available is None:
        try:
            d = init()
            _available = int(check("cuDeviceGetCount", d.cuDeviceGetCount())) > 0
        except Exception:  # noqa: BLE001 - any failure means "no GPU here"
            _available = False
    return _available


def unavailable_reason() -> str:
    """Why :func:`available` is False (for skip messages)."""
    try:
        d = init()
        n = int(check("cuDeviceGetCount", d.cuDeviceGetCount()))
        return "" if n > 0 else "no CUDA device"
    except Exception as e:  # noqa: BLE001
        return str(e)


LaunchFn = Callable[..., int]
_ctypes_launch: LaunchFn | None = None


_libs: dict[type[ctypes.CDLL], ctypes.CDLL] = {}


def libcuda(dll: type[ctypes.CDLL] = ctypes.CDLL) -> ctypes.CDLL:
    """The driver library (``KINAC_LIBCUDA`` or ``libcuda.so.1``, the one the bindings use)
    loaded through ``dll`` (``ctypes.CDLL`` releases the GIL per call, ``ctypes.PyDLL`` keeps
    it); ``cuInit`` has run."""
    lib = _libs.get(dll)
    if lib is None:
        init()
        lib = _libs[dll] = dll(os.environ.get("KINAC_LIBCUDA", "libcuda.so.1"))
    return lib


def _load_launch(dll: type[ctypes.CDLL]) -> Any:
    """libcuda's ``cuLaunchKernel`` loaded through ``dll``, returning a C ``int``; argtypes
    unset."""
    f = libcuda(dll).cuLaunchKernel
    f.restype = ctypes.c_int
    return f


def ctypes_launch() -> LaunchFn:
    """``cuLaunchKernel`` of the loaded libcuda, called through ctypes (returns the CUresult int).

    Arguments: function handle (int), grid x/y/z, block x/y/z, shared bytes, stream handle (int),
    address of the ``void*[]`` parameter array (int), extra (None).
    """
    global _ctypes_launch
    if _ctypes_launch is None:
        f = _load_launch(ctypes.CDLL)
        u = ctypes.c_uint
        p = ctypes.c_void_p
        f.argtypes = [p, u, u, u, u, u, u, u, p, p, p]
        _ctypes_launch = f
    return _ctypes_launch


_pydll_launch: LaunchFn | None = None


def pydll_launch() -> LaunchFn:
    """``cuLaunchKernel`` through ``ctypes.PyDLL`` (keeps the GIL; no argtypes: callers pass
    pre-built ctypes values, which ctypes forwards without conversion)."""
    global _pydll_launch
    if _pydll_launch is None:
        _pydll_launch = _load_launch(ctypes.PyDLL)
    return _pydll_launch
