"""Host buffers: numpy arrays in, numpy arrays out, DLPack for everything else.

Arguments may be numpy arrays or any DLPack producer on the CPU (torch tensors, jax arrays):
``numpy.from_dlpack`` wraps their memory without a copy. A non-contiguous argument is copied
to C order (the kernels index flat buffers). Dtypes must match exactly: the runtime never casts.
bf16 has no numpy dtype, so bf16 buffers are ``uint16`` arrays of bit patterns; a torch bf16
tensor is accepted as is (viewed as int16 bits) and ``torch.from_dlpack(out).view(torch.bfloat16)``
turns an output back.
"""

from __future__ import annotations

import sys
from typing import Any

import numpy as np

from kinac.rt.host.errors import KinaRuntimeError

NP_DTYPES: dict[str, Any] = {
    "f64": np.dtype(np.float64),
    "f32": np.dtype(np.float32),
    "f16": np.dtype(np.float16),
    "bf16": np.dtype(np.uint16),
    "i64": np.dtype(np.int64),
    "i32": np.dtype(np.int32),
    "bool": np.dtype(np.bool_),
}


def _from_dlpack(x: Any, name: str) -> np.ndarray:
    dt = getattr(x, "dtype", None)
    if str(dt) == "torch.bfloat16":
        torch = sys.modules["torch"]
        x = x.view(torch.int16)
    try:
        arr = np.from_dlpack(x)
    except (BufferError, TypeError, RuntimeError, ValueError) as e:
        dev = getattr(x, "device", "?")
        raise KinaRuntimeError(
            f"argument {name!r}: cannot read it on the host ({dev}): {e}"
        ) from None
    return arr.view(np.uint16) if str(dt) == "torch.bfloat16" else arr


def as_host_array(x: Any, name: str, dtype: str, shape: tuple[int, ...]) -> np.ndarray:
    """``x`` as a C-contiguous numpy array of ``dtype`` and ``shape`` (or a clear error)."""
    if isinstance(x, np.ndarray):
        arr = x
    elif isinstance(x, np.generic):
        arr = np.asarray(x)
    elif hasattr(x, "__dlpack__"):
        arr = _from_dlpack(x, name)
    elif isinstance(x, bool | int | float) and shape == ():
        arr = np.asarray(x, dtype=NP_DTYPES[dtype])
    else:
        raise KinaRuntimeError(
            f"argument {name!r}: expected a numpy array or a DLPack tensor, got {type(x).__name__}"
        )
    want = NP_DTYPES[dtype]
    if arr.dtype != want:
        hint = " (bf16 is passed as uint16 bit patterns)" if dtype == "bf16" else ""
        raise KinaRuntimeError(f"argument {name!r}: dtype {arr.dtype}, expected {dtype}{hint}")
    if tuple(arr.shape) != tuple(shape):
        raise KinaRuntimeError(
            f"argument {name!r}: shape {list(arr.shape)}, expected {list(shape)}"
        )
    if not arr.flags.c_contiguous:
        arr = np.ascontiguousarray(arr)
    return arr


class OutputStats:
    """How many output buffers (and bytes) the host runtime has allocated in this process.

    A training step that passes its outputs (``HostEntry(..., out=...)``, buffer donation)
    allocates none: ``kinac.train`` measures that with these counters."""

    allocations: int = 0
    nbytes: int = 0
    scratch: int = 0  # scratch arenas (one per entry and thread that calls it)
    scratch_nbytes: int = 0


OUTPUT_STATS = OutputStats()


def new_output(dtype: str, shape: tuple[int, ...]) -> np.ndarray:
    arr = np.empty(shape, dtype=NP_DTYPES[dtype])
    OUTPUT_STATS.allocations += 1
    OUTPUT_STATS.nbytes += arr.nbytes
    return arr


def given_output(
    x: Any, name: str, dtype: str, shape: tuple[int, ...], ins: list[np.ndarray]
) -> np.ndarray:
    """A caller's output buffer (``out=``): a writeable C-contiguous numpy array of exactly the
    output's dtype and shape that overlaps no input (the kernels' buffers are ``noalias``)."""
    if not isinstance(x, np.ndarray):
        raise KinaRuntimeError(f"out {name!r}: expected a numpy array, got {type(x).__name__}")
    if x.dtype != NP_DTYPES[dtype] or tuple(x.shape) != tuple(shape):
        raise KinaRuntimeError(
            f"out {name!r}: {x.dtype}{list(x.shape)}, expected {dtype}{list(shape)}"
        )
    if not (x.flags.c_contiguous and x.flags.writeable):
        raise KinaRuntimeError(f"out {name!r}: must be C-contiguous and writeable")
    if any(np.may_share_memory(x, a) for a in ins):
        raise KinaRuntimeError(f"out {name!r}: overlaps an input (outputs are written in place)")
    return x
