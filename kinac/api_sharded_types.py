"""The argument types of a sharded call, remembered by each argument's form.

Why: a sharded call (:class:`kinac.api_sharded.ShardedDefn`) typed every argument with
:func:`kinac.api_types.arg_type` on every call: the dtype's name read and mapped, the shape's
ints converted, the DLPack device asked and a ``TType`` built, ~7-9 us per array on this
CPU (20-40 us a call for the entries measured last session), and the same answer every time
the arguments have the same form. Here the answer is remembered by everything it depends
on: the argument's Python type, its shape, its dtype object, its ``kina_dtype`` (a host bf16
array's) and its DLPack device. A different shape, dtype or device is a different key, so
the cache cannot return another form's type; an argument whose form does not hash (a list
as its shape) is typed uncached, and an argument :func:`~kinac.api_types.arg_type` refuses is never
remembered (it raises, with its own message, every time).
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Any

from kinac.api_types import arg_type

MAX_FORMS = 256  # argument forms remembered per sharded defn (then it starts afresh)


def form(x: Any) -> tuple[Any, ...] | None:
    """What :func:`kinac.api_types.arg_type` reads of ``x`` (None: not an array; let it say so)."""
    try:
        return (type(x), x.shape, x.dtype, getattr(x, "kina_dtype", None), _device(x))
    except AttributeError:
        return None


def _device(x: Any) -> Any:
    """What decides ``x``'s DLPack device: a torch tensor's ``device`` (torch's own
    ``__dlpack_device__`` is ~5 us of Python; the device determines it: CPU, pinned or not,
    is a CPU argument, ``cuda:i`` is GPU ``i``), else the DLPack device itself."""
    torch = sys.modules.get("torch")
    if (
        torch is not None
        and getattr(type(x), "__dlpack_device__", None) is torch.Tensor.__dlpack_device__
    ):
        return x.device
    dlpack = getattr(x, "__dlpack_device__", None)
    return dlpack() if dlpack is not None else None


class ArgTypes:
    """One sharded defn's memory of its arguments' types (see the module docstring)."""

    def __init__(self) -> None:
        self._types: dict[tuple[Any, ...], Any] = {}

    def __call__(self, arrays: Sequence[Any], names: Sequence[str]) -> tuple[Any, ...]:
        out = []
        for a, n in zip(arrays, names, strict=True):
            key = form(a)
            try:
                t = self._types.get(key) if key is not None else None
            except TypeError:  # a form that does not hash (a list as its shape)
                key = None
            if key is None:  # typed every call
                out.append(arg_type(a, n))
                continue
            if t is None:
                t = arg_type(a, n)  # refused: raises, nothing remembered
                if len(self._types) >= MAX_FORMS:
                    self._types.clear()
                self._types[key] = t
            out.append(t)
        return tuple(out)
