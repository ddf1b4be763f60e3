"""Host buffers: numpy arrays in, numpy arrays out, DLPack for everything else.

Arguments may be numpy arrays or any DLPack producer on the CPU (torch tensors, jax arrays):
``numpy.from_dlpack`` wraps their memory without a copy. A non-contiguous argument is copied
to C order (the kernels index flat buffers). Dtypes must match exactly: the runtime never casts.
bf16 has no numpy dtype, so bf16 buffers hold ``uint16`` bit patterns: a bf16 output is a
:class:`Bf16Array` (a ``uint16`` ndarray whose ``__dlpack__`` says bfloat16, so
``torch.from_dlpack(out)`` is a bfloat16 tensor sharing its memory); bf16 arguments may be torch
bf16 tensors, :class:`Bf16Array` arrays, ml_dtypes ``bfloat16`` arrays or any DLPack bf16 producer.
Torch CPU tensors are read through ``Tensor.numpy()`` (a view, ~1 us) rather than
``numpy.from_dlpack`` (~5 us): the per-call cost of a torch argument. ``IMPORT_STATS.copies``
counts the arguments that had to be copied (non-contiguous ones): tests check it stays 0.
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


class Bf16Array(np.ndarray):
    """A bf16 host array: ``uint16`` storage of the bit patterns, exported as bfloat16.

    ``__dlpack__`` describes the memory as DLPack bfloat16 (kDLBfloat, 16 bits), so
    ``torch.from_dlpack(a)`` is a bfloat16 tensor sharing the memory (no copy).
    ``np.asarray(a)`` is the ``uint16`` bits (a view); ``a.astype(np.float32)`` (or
    ``float64``/``float16``) converts the *values* (bf16 widens to f32 exactly), never the bit
    patterns as integers; ``a.to_float32()`` is the same. Ufuncs see plain ``uint16`` arrays and
    return plain arrays (so nothing computed from the bits claims to be bf16). Passed back to a
    compiled defn it is typed bf16.
    """

    @property
    def kina_dtype(self) -> str | None:
        """The Kina dtype a compiled defn types it as (none once a view changed the dtype)."""
        return "bf16" if self.dtype == np.uint16 else None

    def __array_finalize__(self, obj: Any) -> None:
        pass

    def __array_ufunc__(self, ufunc: Any, method: str, *inputs: Any, **kw: Any) -> Any:
        ins = [i.view(np.ndarray) if isinstance(i, Bf16Array) else i for i in inputs]
        if "out" in kw:
            kw["out"] = tuple(
                o.view(np.ndarray) if isinstance(o, Bf16Array) else o for o in kw["out"]
            )
        return getattr(ufunc, method)(*ins, **kw)

    def _bits(self) -> np.ndarray:
        return self.view(np.ndarray)

    def to_float32(self) -> np.ndarray:
        """The values as a new float32 array (exact: bf16 is f32's upper 16 bits)."""
        bits = np.ascontiguousarray(self._bits()).astype(np.uint32) << 16
        return bits.view(np.float32)

    def astype(self, dtype: Any, *args: Any, **kw: Any) -> Any:  # type: ignore[override]
        dt = np.dtype(dtype)
        if self.dtype == np.uint16 and dt.kind == "f":
            return self.to_float32().astype(dt, copy=False)
        return self._bits().astype(dt, *args, **kw)

    def __dlpack__(self, **kw: Any) -> Any:
        if self.dtype != np.uint16:  # a view changed the dtype: no longer bf16 bits
            return self._bits().__dlpack__(**kw)
        from kinac.rt.cuda.tensor import KDL_CPU, Tensor

        base = self._bits()
        item = base.dtype.itemsize
        t = Tensor(
            base.ctypes.data,
            base.shape,
            "bfloat16",
            device=(KDL_CPU, 0),
            strides=tuple(st // item for st in base.strides),
            owner=base,
        )
        return t.__dlpack__(**kw)

    def __repr__(self) -> str:
        if self.dtype != np.uint16:
            return repr(self._bits())
        return f"Bf16Array({np.array2string(self.to_float32(), separator=', ')}, dtype=bf16)"

    __str__ = __repr__


def bf16_array(bits: Any) -> Bf16Array:
    """``uint16`` bit patterns (a numpy array) as a :class:`Bf16Array` (a view, no copy)."""
    a = np.asarray(bits)
    if a.dtype != np.uint16:
        raise KinaRuntimeError(f"bf16_array takes uint16 bit patterns, got {a.dtype}")
    return a.view(Bf16Array)


class ImportStats:
    """Arguments the host runtime copied (non-contiguous ones): zero on the zero-copy paths."""

    copies: int = 0


IMPORT_STATS = ImportStats()


_TORCH_BF16: list[Any] = []  # (torch.bfloat16, torch.int16), set on the first torch argument


def _from_torch(x: Any, name: str) -> np.ndarray | None:
    """A torch CPU tensor's memory as numpy (a view), or None to try DLPack instead."""
    if not x.is_cpu:
        return None
    try:
        t = x.detach() if x.requires_grad else x
        if x.dtype is _TORCH_BF16[0]:
            return t.view(_TORCH_BF16[1]).numpy().view(np.uint16)
        return t.numpy()
    except (RuntimeError, TypeError):  # conj/neg bits, unsupported dtype: DLPack reports it
        return None


def _from_dlpack(x: Any, name: str) -> np.ndarray:
    torch_mod = sys.modules.get("torch")
    if torch_mod is not None and isinstance(x, torch_mod.Tensor):
        if not _TORCH_BF16:
            _TORCH_BF16[:] = [torch_mod.bfloat16, torch_mod.int16]
        got = _from_torch(x, name)
        if got is not None:
            return got
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
        if dtype == "bf16" and arr.dtype.name == "bfloat16":  # ml_dtypes' bfloat16
            arr = arr.view(np.uint16)
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
        hint = (
            " (pass bf16 as a torch bfloat16 tensor, an ml_dtypes bfloat16 array, or uint16 "
            "bit patterns wrapped by kinac.rt.host.bf16_array)"
            if dtype == "bf16"
            else f" (the other byte order: pass {name}.astype({want.name!r}))"
            if not arr.dtype.isnative and arr.dtype.newbyteorder("=") == want
            else ""
        )
        raise KinaRuntimeError(f"argument {name!r}: dtype {arr.dtype}, expected {dtype}{hint}")
    if tuple(arr.shape) != tuple(shape):
        raise KinaRuntimeError(
            f"argument {name!r}: shape {list(arr.shape)}, expected {list(shape)}"
        )
    if not arr.flags.c_contiguous:
        arr = np.ascontiguousarray(arr)
        IMPORT_STATS.copies += 1
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
    if dtype == "bf16":
        arr = arr.view(Bf16Array)
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


def host_output(a: Any, dtype: str) -> Any:
    """An output assembled outside :class:`~kinac.rt.host.entry.HostEntry` (a sharded call's
    global array) as a call returns it: bf16 bits as a :class:`Bf16Array` (a view), the rest
    unchanged, so every path hands back the same types."""
    if dtype == "bf16" and type(a) is np.ndarray and a.dtype == np.uint16:
        return a.view(Bf16Array)
    return a
