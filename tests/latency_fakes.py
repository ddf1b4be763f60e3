"""A GPU entry of a real lowering, built without a driver: what ``benches/call_path_cpu.py``
times and ``tests/test_latency_*.py`` check the hot call's order with (issue 14).

:func:`driverless` is a ``load_gpu_entry`` whose entry takes memory from the pool over a
virtual resource, whose context check and graph launches are no-op functions (each launch noted
in :data:`LAUNCHED` and counted in :data:`LAUNCHES`), and :func:`cpu_as_cuda_import` lets torch
CPU tensors stand for CUDA ones (imported at their own addresses, as ``torch_import`` reads a
CUDA tensor).
"""

from __future__ import annotations

import ctypes
import time
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

LAUNCHED = [0]  # perf_counter_ns of the last fake launch (what "before the launch" times)
LAUNCHES = [0]  # fake graph launches so far


def _stamp(ex: Any, stream: Any) -> int:
    LAUNCHED[0] = time.perf_counter_ns()
    LAUNCHES[0] += 1
    return 0


class _Graph:
    """A captured graph whose launch does nothing but note the time (returns CUDA_SUCCESS)."""

    captured = True

    def __init__(self) -> None:
        self.fast_launch = (_stamp, None)

    def replay(self, stream: Any) -> None:
        _stamp(None, stream)

    def close(self) -> None:
        pass


def driverless(ins: list[Any]) -> Callable[..., Any]:
    """A ``load_gpu_entry`` that builds the entry without a driver, importing ``ins``."""
    from kinac.rt.cuda import entry as E
    from kinac.rt.cuda.entry_support import DL_NAMES, array_nbytes
    from kinac.rt.cuda.pool import PoolResource
    from kinac.rt.cuda.resources import VirtualResource
    from kinac.rt.cuda.tensor import DTYPES, KDL_CUDA, Tensor, contiguous_strides

    def load(lowered: Any, ptx: str, **_: Any) -> Any:
        e = E.GpuEntry.__new__(E.GpuEntry)
        e.lowered, e.ordinal, e.pinned = lowered, 0, True
        e.resource = PoolResource(VirtualResource())
        e._out_specs = [(o.shape, DTYPES[DL_NAMES[o.dtype]], array_nbytes(o.dtype, o.shape),
                         contiguous_strides(o.shape)) for o in lowered.outputs]  # fmt: skip
        e._host_outputs, e.use_graphs, e.max_graphs, e.status = [], True, 8, 0
        stream = type("S", (), {"cu": 0, "handle": 0, "cvp": None, "synchronize": lambda s: None})()
        e.stream = e.capture_stream = stream
        e._imports, e._last_box, e._stager = {}, [None], None
        n = len(lowered.params) + len(lowered.outputs)
        e._seen, e.volatile, e._stage, e._bound = [set() for _ in range(n)], set(), {}, OrderedDict()  # fmt: skip
        e.captures = e.replays = 0
        e._bind = lambda key: ((lambda s: None), [])  # type: ignore[method-assign]
        e._ctx_get, e._ctx_cur, e._ctx_ref, e._ctx_mine = (lambda r: 0), ctypes.c_void_p(), None, None  # type: ignore[assignment]  # fmt: skip
        for i, (a, p) in enumerate(zip(ins, lowered.params, strict=True)):
            t = Tensor(a.data_ptr(), p.shape, DL_NAMES[p.dtype], device=(KDL_CUDA, 0))
            e._remember(i, a, t)
        return e

    return load


def cpu_as_cuda_import(x: Any) -> Any:
    """What :func:`kinac.rt.cuda.entry_hot.torch_import` makes of a CUDA tensor, for a CPU one
    (the same attribute reads; its stream check aside)."""
    from kinac.rt.cuda.tensor import DTYPES, KDL_CUDA, Tensor

    dt = DTYPES[str(x.dtype).removeprefix("torch.")]
    return Tensor(x.data_ptr(), tuple(x.shape), dt, device=(KDL_CUDA, 0),
                  strides=tuple(x.stride()), owner=x.untyped_storage())  # fmt: skip
