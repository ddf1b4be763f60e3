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


def new_output(dtype: str, shape: tuple[int, ...]) -> np.ndarray:
    return np.empty(shape, dtype=NP_DTYPES[dtype])
