"""A GPU entry's imports of the CUDA arrays passed to it, and when an import may be reused.

Split out of ``entry.py`` (issue 14, 2026-12-02e). A CUDA array passed again (a weight, an
activation buffer refilled in place) is not imported again: its import (a kinac
:class:`~kinac.rt.cuda.tensor.Tensor` at the array's address, holding the array's storage) is
remembered per (position, object) while the object lives. Reusing it is right only while the
array still *is* what was imported:

- at the same address: torch's ``set_``, a growing ``resize_`` and ``x.data = y`` move a tensor's
  memory (the last one without counting an in-place change), so the address is compared;
- of the same form: torch's ``t_``, ``transpose_``, ``squeeze_``, ``as_strided_`` change a
  tensor's shape or strides in place at the same address. Before this module the entry compared
  the address only, so a square weight transposed in place (``w.t_()``: same shape, same address,
  strides swapped) was read through its old import as if it were still row-major, a silent
  wrong result (``tests/test_latency_hot_forms.py``). Torch counts every such change in the
  tensor's ``_version``; an import remembers the version it was made or last checked at, and a
  tensor whose version moved has its form compared with the import's (:func:`same_form`):
  equal (a data write: ``copy_``, ``mul_``) the import stands, else the array is imported again
  (which checks it and reports what is wrong). Arrays without ``_version`` (kinac tensors,
  other DLPack producers) keep the address rule.
"""

from __future__ import annotations

import operator
import weakref
from typing import TYPE_CHECKING, Any

from kinac.rt.cuda.tensor import DTYPES, Tensor

if TYPE_CHECKING:
    from kinac.rt.cuda.entry import GpuEntry

VERSION = operator.attrgetter("_version")


def version(x: Any) -> int | None:
    """Torch's in-place change counter of ``x``; None for an array without one."""
    return getattr(x, "_version", None)


def versions(arrays: tuple[Any, ...]) -> tuple[int, ...] | None:
    """Every array's ``_version`` (one C-level map), or None when some array has none."""
    try:
        return tuple(map(VERSION, arrays))
    except AttributeError:
        return None


def same_form(x: Any, t: Tensor) -> bool:
    """Whether the torch tensor ``x`` still has the shape, strides and dtype of its import
    ``t`` (its address is compared apart). Anything unreadable counts as changed."""
    try:
        return (
            tuple(x.shape) == t.shape
            and tuple(x.stride()) == t.strides
            and DTYPES.get(str(x.dtype).removeprefix("torch.")) is t.dtype
        )
    except Exception:  # noqa: BLE001 - not a torch tensor after all: import it again
        return False


def changed_forms_same(
    arrays: tuple[Any, ...], ins: list[Tensor], was: tuple[int, ...], now: tuple[int, ...]
) -> bool:
    """Whether every array whose version moved (``was`` -> ``now``) kept its import's form."""
    for x, t, v0, v1 in zip(arrays, ins, was, now, strict=True):
        if v0 != v1 and not same_form(x, t):
            return False
    return True


def storage_gap(t: Tensor) -> str | None:
    """Why the torch storage ``t`` was imported from (its ``owner``, as
    :func:`~kinac.rt.cuda.entry_hot.torch_import` sets it) does not hold ``t``'s elements, or
    None. ``x.untyped_storage().resize_(0)`` (FSDP frees parameters so) frees a tensor's memory
    in place: torch counts no change, the tensor keeps its shape and its ``data_ptr()`` reads 0;
    imported as it stands, the kernels would read address 0 (a fault that ends the context)."""
    st = t.owner
    try:
        base, size = int(st.data_ptr()), int(st.nbytes())
    except (AttributeError, TypeError, RuntimeError):  # not a torch storage: nothing to read
        return None
    if t.numel and (t.ptr == 0 or t.ptr < base or t.ptr + t._span_bytes() > base + size):
        return f"its storage holds {size} bytes, fewer than its shape needs"
    return None


def known(entry: GpuEntry, i: int, x: Any, ptr: int | None = None) -> Tensor | None:
    """The remembered import of ``x`` at position ``i``, if ``x`` is the array imported, still
    at that address (``ptr``: its ``data_ptr()`` when the caller read it already) and, where it
    counts its in-place changes (torch's ``_version``), of the same form; None otherwise (a
    moved or reshaped tensor's import is forgotten, so it is imported again)."""
    key = (i, id(x))
    hit = entry._imports.get(key)
    if hit is None or hit[0]() is not x:
        return None
    t = hit[1]
    if ptr is None:
        dp = getattr(x, "data_ptr", None)
        if dp is not None and not isinstance(x, Tensor):
            try:
                ptr = dp()
            except Exception:  # noqa: BLE001 - a data_ptr that is not torch's: not used
                ptr = None
    if ptr is not None and ptr != t.ptr:
        del entry._imports[key]
        return None
    v = version(x)
    if v is not None and v != hit[2]:
        if not same_form(x, t):
            del entry._imports[key]
            return None
        entry._imports[key] = (hit[0], t, v)  # a data write: checked once per version
    return t


def remember(entry: GpuEntry, i: int, x: Any, t: Tensor) -> None:
    """Reuse the import of a CUDA array passed again (weights, most often) until it dies."""
    key = (i, id(x))
    imports = entry._imports
    box = entry._last_box

    def gone(_: Any) -> None:
        imports.pop(key, None)
        box[0] = None

    try:
        ref = weakref.ref(x, gone)
    except TypeError:
        return
    imports[key] = (ref, t, version(x))
