"""normlib: a small library built on kinac (docs/library-guide.md).

Its defns are written in Kina (``ops.kina``, next to this file) and compiled by kinac on first
use, once per distinct set of dims and dtypes (cached on disk like every kinac artifact, so a
second process reuses them). The functions take numpy arrays, torch tensors or any DLPack
producer and return DLPack producers (``numpy.from_dlpack`` / ``torch.from_dlpack`` copy
nothing). ``normlib.gpu`` adds a hand-written CUDA kernel next to the compiled entries.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import kinac

OPS = Path(__file__).resolve().parent / "ops.kina"
_COMPILED: dict[tuple[str, str], Any] = {}


def compiled(name: str, target: str = "cpu") -> Any:
    """The compiled defn ``name`` of ``ops.kina`` for ``target`` ("cpu" or "cuda"), made once."""
    key = (name, target)
    if key not in _COMPILED:
        _COMPILED[key] = kinac.compile(str(OPS), name, target=target)
    return _COMPILED[key]


def scale_shift(x: Any, g: Any, b: Any, target: str = "cpu") -> Any:
    """``x * g + b`` over the last dim."""
    return compiled("scale-shift", target)(x, g, b)


def rms_scale_shift(x: Any, g: Any, b: Any, target: str = "cpu") -> Any:
    """The prelude's ``rms-norm`` of ``x`` with weight ``g``, plus ``b``."""
    return compiled("rms-scale-shift", target)(x, g, b)


def soft_clip(x: Any, c: Any, target: str = "cpu") -> Any:
    """``c * tanh(x / c)``: ``x`` smoothly limited to ``(-c, c)`` per last-dim channel."""
    return compiled("soft-clip", target)(x, c)
