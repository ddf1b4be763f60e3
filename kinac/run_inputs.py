"""Where ``kinac run``'s (and ``kinac profile``'s) inputs come from: random draws at the entry's
dtypes (bf16 as bit patterns numpy can hold), ``.npz``/``.npy`` files read without unpickling,
and an out-of-memory message that names the input; split from :mod:`kinac.run`, which builds,
calls and reports."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kinac.dtypes import FLOAT_DTYPES
from kinac.errors import KinaUsageError


class _Bf16Name:
    """The dtype of :class:`Bf16Bits`: named ``bfloat16`` as torch's and ml_dtypes' are."""

    name = "bfloat16"

    def __str__(self) -> str:
        return self.name


class Bf16Bits:
    """A bf16 array for the API: numpy has no bf16, so ``kinac run`` holds bf16 values as
    ``uint16`` bit patterns (the host runtime's convention) and hands them over with a dtype
    named ``bfloat16`` (typed bf16 by :func:`kinac.api_types.arg_type`) through DLPack."""

    dtype = _Bf16Name()

    def __init__(self, bits: Any) -> None:
        self.bits = bits
        self.shape = tuple(bits.shape)

    def __dlpack__(self, **kw: Any) -> Any:
        return self.bits.__dlpack__(**kw)

    def __dlpack_device__(self) -> Any:
        return self.bits.__dlpack_device__()

    def __array__(self, dtype: Any = None, copy: Any = None) -> Any:
        return self.bits if dtype is None else self.bits.astype(dtype)


def as_bf16(a: Any) -> Any:
    """A ``uint16`` array read from ``--inputs`` as the bf16 bit patterns it holds (Kina has no
    16-bit integer dtype, so the reading is unambiguous); any other array unchanged."""
    import numpy as np

    return Bf16Bits(np.ascontiguousarray(a)) if getattr(a, "dtype", None) == np.uint16 else a


def random_input(rng: Any, dtype: str, shape: tuple[int, ...], bound: int) -> Any:
    import numpy as np

    if dtype == "bf16":  # the entry's dtype, not f32 (bf16 values as their bit patterns)
        from kinac.tir.interp import f32_to_bf16

        return Bf16Bits(f32_to_bf16(rng.standard_normal(shape).astype(np.float32)))
    if dtype in FLOAT_DTYPES:
        np_dt = {"f64": np.float64, "f32": np.float32, "f16": np.float16}[dtype]
        return rng.standard_normal(shape).astype(np_dt)
    if dtype in ("i64", "i32"):
        return rng.integers(0, max(bound, 1), size=shape).astype(
            np.int64 if dtype == "i64" else np.int32
        )
    return rng.random(shape) < 0.5


def human_size(nbytes: int) -> str:
    """A byte count as a person reads it (``7.28 TiB``)."""
    size, unit = float(nbytes), "bytes"
    for u in ("KiB", "MiB", "GiB", "TiB", "PiB", "EiB"):
        if size < 1024:
            break
        size, unit = size / 1024, u
    return f"{nbytes} bytes" if unit == "bytes" else f"{size:.2f} {unit}"


def random_or_oom(rng: Any, name: str, dtype: str, shape: tuple[int, ...], bound: int) -> Any:
    """:func:`random_input`, or a ``MemoryError`` (the CLI's "out of memory", exit 1) that
    names the input, its dtype and its size: numpy's said "Unable to allocate 7.28 TiB for an
    array with shape (...) and data type float64", the random draw's dtype, not the entry's."""
    try:
        return random_input(rng, dtype, shape, bound)
    except MemoryError:
        from kinac.dtypes import ITEMSIZE

        count = 1
        for d in shape:
            count *= d
        each = ITEMSIZE.get(dtype, 1)
        raise MemoryError(
            f"the random input `{name}` is {dtype}{list(shape)}: {count} elements of {each} "
            f"byte{'s' * (each != 1)}, {human_size(count * each)}, more than the host can allocate "
            "(the random values are drawn at 8 bytes each first); run with smaller --dims"
        ) from None


def load_inputs(path: str, names: list[str]) -> list[Any]:
    """The arrays of an ``.npz`` (named after the parameters) or one ``.npy``, in ``names``
    order; a missing, extra or unreadable array is a usage error (never silently ignored)."""
    import numpy as np

    p = Path(path)
    if not p.exists():
        raise KinaUsageError(f"no such inputs file: {path}")
    if not p.is_file():
        raise KinaUsageError(f"--inputs {path} is not a regular file; give a .npz or .npy file")
    try:
        with open(p, "rb") as f:
            magic = f.read(6)
    except OSError as e:
        raise KinaUsageError(f"cannot read {path}: {e.strerror or e}") from None
    if not magic.startswith((b"\x93NUMPY", b"PK")):  # .npy's magic; .npz is a zip
        # numpy would try it as a pickle and advise `allow_pickle=`: kinac never unpickles
        raise KinaUsageError(
            f"cannot read {path}: it is not a .npy or .npz file (numpy.save and numpy.savez "
            "write them)"
        )
    try:
        data = np.load(p, allow_pickle=False)
    except Exception as e:  # noqa: BLE001 - any failure to read a user's file is the file's fault
        raise KinaUsageError(f"cannot read {path} as .npy/.npz: {numpy_why(e)}") from None
    if isinstance(data, np.ndarray):
        if len(names) != 1:
            raise KinaUsageError(
                f"a .npy file holds one array but the entry takes {len(names)} "
                f"({', '.join(names)}): use a .npz with arrays named after them"
            )
        return [as_bf16(data)]
    if not hasattr(data, "files"):
        raise KinaUsageError(f"{path} holds no arrays (a pickled object?); use .npz or .npy")
    missing = [n for n in names if n not in data.files]
    extra = [n for n in data.files if n not in names]
    if missing or extra:
        said = []
        if missing:
            said.append(f"lacks arrays named {', '.join(missing)}")
        if extra:
            said.append(f"has arrays the entry does not take: {', '.join(extra)}")
        raise KinaUsageError(
            f"{path} {' and '.join(said)} (the entry takes {', '.join(names) or 'none'}; "
            f"the file has {', '.join(data.files) or 'none'})"
        )
    try:
        return [as_bf16(data[n]) for n in names]
    except Exception as e:  # noqa: BLE001 - any failure to read a user's file is the file's fault
        raise KinaUsageError(f"cannot read {path}: {numpy_why(e)}") from None


def numpy_why(e: Exception) -> str:
    """numpy's reason, without its advice to unpickle (kinac never loads pickles)."""
    text = str(e)
    if "allow_pickle" in text:
        return "it holds an object (pickled) array; kinac reads numeric arrays only"
    return text
