"""The base scalar operations on numpy arrays: how the reference interpreter runs a formula.

Why: :mod:`kinac.tir.interp` evaluates every elementwise primitive from its one definition in
:mod:`kinac.prims.defs`; this is the numpy side of :class:`kinac.prims.scalar.Algebra`. Floats
are evaluated in float64 (the interpreter widens them and rounds the primitive's result once to
its dtype), so the reference is as exact as libm; integers keep their dtype with the documented
semantics (floor division with ``x // 0 == 0``, exact ``pow`` truncating negative exponents);
``bool`` arithmetic is logic (``add``/``max`` or, ``mul``/``min`` and).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

_erf = np.frompyfunc(math.erf, 1, 1)


def _is_int(a: np.ndarray) -> bool:
    return a.dtype.kind in "iu"


def _is_bool(a: np.ndarray) -> bool:
    return a.dtype == np.bool_


def _int_div(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    safe = np.where(b == 0, 1, b)
    return np.where(b == 0, 0, np.floor_divide(a, safe)).astype(a.dtype)


def _int_pow(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    a, b = np.broadcast_arrays(a, b)
    pos = np.power(a, np.maximum(b, 0))
    neg = np.where(a == 1, 1, np.where(a == -1, np.where(b % 2 == 0, 1, -1), 0))
    return np.where(b >= 0, pos, neg).astype(a.dtype)


class NumpyAlgebra:
    """:class:`kinac.prims.scalar.Algebra` on numpy arrays (warnings silenced by the caller)."""

    def const(self, value: float | int | bool, like: np.ndarray) -> np.ndarray:
        return np.asarray(value, dtype=like.dtype)

    def add(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        return np.logical_or(a, b) if _is_bool(a) else a + b

    def sub(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        return a - b

    def mul(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        return np.logical_and(a, b) if _is_bool(a) else a * b

    def div(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        return _int_div(a, b) if _is_int(a) else a / b

    approx_div = div

    def fma(self, a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
        return a * b + c

    def neg(self, a: np.ndarray) -> np.ndarray:
        return np.negative(a)

    def abs(self, a: np.ndarray) -> np.ndarray:
        return np.abs(a)

    def floor(self, a: np.ndarray) -> np.ndarray:
        return np.floor(a)

    def sqrt(self, a: np.ndarray) -> np.ndarray:
        return np.sqrt(a)

    def exp(self, a: np.ndarray) -> np.ndarray:
        return np.exp(a)

    def log(self, a: np.ndarray) -> np.ndarray:
        return np.log(a)

    def tanh(self, a: np.ndarray) -> np.ndarray:
        return np.tanh(a)

    def erf(self, a: np.ndarray) -> np.ndarray:
        return np.asarray(_erf(a), dtype=a.dtype)

    def pow(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        return _int_pow(a, b) if _is_int(a) else np.power(a, b)

    def maximum(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        return np.logical_or(a, b) if _is_bool(a) else np.maximum(a, b)

    def minimum(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        return np.logical_and(a, b) if _is_bool(a) else np.minimum(a, b)

    def compare(self, pred: str, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        ops: dict[str, Any] = {"lt": np.less, "le": np.less_equal, "gt": np.greater}
        ops |= {"ge": np.greater_equal, "eq": np.equal, "ne": np.not_equal}
        return np.asarray(ops[pred](a, b))

    def select(self, c: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        return np.where(c, a, b)

    def libm(self, name: str, a: np.ndarray) -> np.ndarray:
        return np.asarray(getattr(np, name)(a))
