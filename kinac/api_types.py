"""How a call's arguments are typed and reported (:mod:`kinac.api`): an array's Kina type
(dtype, shape, device) read without copying it, the refusals of arrays kinac cannot run as
they are (masked, other byte order), and how a call error shows a value or says to convert
an array. Kept apart from the call path so the sharded and profiling paths (and ``kinac
run``) type arguments exactly as a plain call does."""

from __future__ import annotations

import sys
from typing import Any

from kinac.errors import KinaCallError

_DTYPES = {
    "float64": "f64",
    "float32": "f32",
    "float16": "f16",
    "bfloat16": "bf16",
    "int64": "i64",
    "int32": "i32",
    "bool": "bool",
}


_BYTE_ORDER = {">": "big-endian", "<": "little-endian"}


def check_byte_order(x: Any, name: str) -> None:
    """A numpy array in the other byte order ('>f4' here) has a Kina dtype but cannot be run
    as is (the host runtime refused it with "dtype >f4, expected f32"): a call error that
    says what to pass. Sharded calls slice and convert their arguments, so they accept it."""
    dt: Any = getattr(x, "dtype", None)
    if getattr(dt, "isnative", True) is False:
        raise KinaCallError(
            f"argument `{name}` is {_BYTE_ORDER.get(dt.byteorder, 'non-native')} ({dt.str}); "
            f"kinac takes native byte order: pass {name}.astype({dt.newbyteorder('=').name!r})"
        )


def _refuse_masked(x: Any, name: str) -> None:
    """A numpy masked array has a dtype and a shape, so it was taken as its ``.data`` and its
    mask silently ignored (a masked mean came out over every element): kinac has no masks, so
    the caller decides what the masked entries hold. (numpy.ma is loaded when one exists.)"""
    ma = sys.modules.get("numpy.ma")
    if ma is not None and isinstance(x, ma.MaskedArray):
        raise KinaCallError(
            f"argument `{name}` is a numpy masked array: kinac does not support masks (the "
            f"mask would be ignored); pass {name}.filled(value) to give the masked entries a "
            f"value, or {name}.data for the values underneath"
        )


def arg_type(x: Any, name: str) -> Any:
    """The concrete Kina type (dtype, shape, device) of an argument, without copying it."""
    from kinac.tir.graph import TType

    _refuse_masked(x, name)
    dt = getattr(x, "dtype", None)
    shape = getattr(x, "shape", None)
    if dt is None or shape is None:
        raise KinaCallError(
            f"argument `{name}` must be an array (numpy, torch or any DLPack "
            f"producer), got {type(x).__name__}"
        )
    name_attr = getattr(dt, "name", None)  # numpy's and kinac's own runtime tensors' dtypes
    dname = name_attr if isinstance(name_attr, str) else str(dt).removeprefix("torch.")
    # a host bf16 array (kinac.rt.host.Bf16Array: uint16 storage, bf16 values) says so itself
    kina = getattr(x, "kina_dtype", None) or _DTYPES.get(dname)
    if kina is None:
        hint = (
            " (bf16 bit patterns: wrap them with kinac.rt.host.bf16_array, or pass a torch "
            "bfloat16 tensor)"
            if dname == "uint16"
            else ""
        )
        raise KinaCallError(
            f"argument `{name}` has dtype {dname}, which Kina does not have "
            f"(f64 f32 f16 bf16 i64 i32 bool){hint}"
        )
    device = "cpu"
    if hasattr(x, "__dlpack_device__"):
        try:
            kind, index = x.__dlpack_device__()
        except (ValueError, RuntimeError, TypeError, BufferError) as e:  # a torch meta tensor
            where = getattr(getattr(x, "device", None), "type", None)
            raise KinaCallError(
                f"argument `{name}` "
                + (f"is a {where} tensor" if where else "cannot be shared through DLPack")
                + f" ({e}); kinac takes CPU and CUDA arrays that hold data"
            ) from None
        if int(kind) == 2:
            device = f"cuda:{int(index)}"
        elif int(kind) not in (1, 3):
            raise KinaCallError(
                f"argument `{name}` lives on DLPack device type {int(kind)}; kinac "
                f"takes CPU and CUDA arrays"
            )
    return TType(kina, tuple(int(d) for d in shape), device)


def brief(v: Any) -> str:
    """A value as a call error shows it: an array by its kind, dtype and shape, never dumped
    whole (a million-element repr buried the message)."""
    shape = getattr(v, "shape", None)
    if shape is not None:
        return f"{type(v).__name__} of dtype {getattr(v, 'dtype', '?')} and shape {tuple(shape)}"
    text = repr(v)
    return text if len(text) <= 60 else text[:57] + "..."


def array_device(a: Any) -> Any:
    """Where an array without ``.device`` lives, as :func:`arg_type` decides it."""
    dl = getattr(a, "__dlpack_device__", None)
    return tuple(dl()) if dl is not None else None


_CONVERT = {  # kina dtype -> (numpy, torch) spelling, for call-side help
    "f64": ("np.float64", "torch.float64"),
    "f32": ("np.float32", "torch.float32"),
    "f16": ("np.float16", "torch.float16"),
    "bf16": ("kinac.rt.host.bf16_array", "torch.bfloat16"),
    "i64": ("np.int64", "torch.int64"),
    "i32": ("np.int32", "torch.int32"),
    "bool": ("np.bool_", "torch.bool"),
}


def python_help(d: Any) -> Any:
    """A binder diagnostic as a Python caller reads it: the checker's help says to
    ``(cast … :to f32)`` in Kina, but the argument is an array at this call, so the help
    says how to convert it (numpy, torch)."""
    import dataclasses
    import re

    m = re.search(r"\(cast … :to (\w+)\)", d.help or "")
    if m is None or m.group(1) not in _CONVERT:
        return d
    np_name, torch_name = _CONVERT[m.group(1)]
    how = f"{np_name}(a)" if m.group(1) == "bf16" else f"a.astype({np_name})"  # numpy has no bf16
    return dataclasses.replace(
        d, help=f"convert the array before the call: numpy {how}, torch t.to({torch_name})"
    )
