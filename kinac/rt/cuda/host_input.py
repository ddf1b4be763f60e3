"""Host arrays passed to a GPU entry: read through kinac's own DLPack consumer, every dtype.

Why: a GPU entry copies a host argument in (as the ``to-device`` of a host param). It used to
read it with ``numpy.from_dlpack``, and numpy has no bfloat16, so a CPU ``torch.bfloat16``
tensor raised a raw ``BufferError: Unsupported dtype in DLTensor``. kinac's consumer
(:func:`kinac.rt.cuda.dlpack.import_`) knows every Kina dtype and needs no GPU, so a host
DLPack producer (torch, jax, ...) is viewed through it (bf16 as ``uint16`` bit patterns, the
layout the kernels read), strided or not, and copied in. An argument kinac cannot read on the
host (another device type, a dtype Kina lacks) or whose dtype is not the parameter's is refused
with a :class:`~kinac.errors.KinaCallError` that says how to pass it; never a raw exception.
numpy arrays are taken as before (bf16 as ``uint16`` bit patterns).
"""

from __future__ import annotations

from typing import Any

from kinac.errors import KinaCallError

DL_NAMES = {"f64": "float64", "f32": "float32", "f16": "float16", "bf16": "bfloat16",
            "i64": "int64", "i32": "int32", "bool": "bool"}  # fmt: skip


def host_array(
    x: Any, name: str, entry: str, dtype: str, shape: tuple[int, ...]
) -> tuple[Any, Any]:
    """``(array, keep)``: a numpy array of ``x``'s elements (bf16 as ``uint16``), and an object
    to keep alive until the array has been copied (the producer's memory).

    A numpy array is returned as is; the caller casts numeric numpy arrays as before. A DLPack
    producer must have the parameter's dtype exactly (bf16: ``bfloat16``, or ``uint16``
    bits); anything else is a :class:`KinaCallError`.
    """
    import numpy as np

    if isinstance(x, np.ndarray | np.generic) or not hasattr(x, "__dlpack__"):
        try:
            a = np.asarray(x)
        except Exception as e:  # noqa: BLE001 - any unreadable object is the caller's
            raise KinaCallError(
                f"{entry}: argument `{name}` is not an array ({type(x).__name__}): {e}"
            ) from None
        if a.dtype.kind not in "biuf" and a.dtype.name != "bfloat16":
            raise KinaCallError(
                f"{entry}: argument `{name}` is not an array of numbers ({type(x).__name__}, "
                f"{a.dtype})"
            )
        if dtype == "bf16" and a.dtype.name not in ("uint16", "bfloat16"):
            raise KinaCallError(
                f"{entry}: argument `{name}` is {a.dtype.name} but the parameter is bf16: pass "
                "a torch.bfloat16 tensor, or a numpy uint16 array of bf16 bit patterns"
            )
        _check_shape(a.shape, shape, name, entry)
        return (a.view(np.uint16) if a.dtype.name == "bfloat16" else a), x
    from kinac.rt.cuda.dlpack import import_
    from kinac.rt.cuda.tensor import KDL_CPU, KDL_CUDA_HOST

    try:
        kind = int(x.__dlpack_device__()[0]) if hasattr(x, "__dlpack_device__") else KDL_CPU
        if kind not in (KDL_CPU, KDL_CUDA_HOST):  # CUDA producers were taken on the device
            raise BufferError(f"it lives on DLPack device type {kind}")
        t = import_(x)
    except (BufferError, TypeError, ValueError, RuntimeError) as e:
        raise KinaCallError(
            f"{entry}: argument `{name}` cannot be read on the host ({e}); move it to the CPU "
            "(x.cpu()) or to the entry's GPU (x.cuda()) in a Kina dtype "
            "(f64 f32 f16 bf16 i64 i32 bool)"
        ) from None
    got, want = t.dtype.name, DL_NAMES[dtype]
    if got != want and not (dtype == "bf16" and got == "uint16"):
        raise KinaCallError(
            f"{entry}: argument `{name}` is {got} but the parameter is {dtype}: convert it "
            f"first (torch: x.to(torch.{want}))"
        )
    _check_shape(t.shape, shape, name, entry)
    return t.numpy(), t


def _check_shape(got: tuple[int, ...], want: tuple[int, ...], name: str, entry: str) -> None:
    if tuple(got) != tuple(want):
        raise KinaCallError(
            f"{entry}: argument `{name}` has shape {list(got)}, expected {list(want)}"
        )
