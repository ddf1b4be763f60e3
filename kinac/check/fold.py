"""Folding weak scalars (literals, dims used as values, and ops over them) to Python numbers.

Why: ``(rsqrt Dh)`` at ``Dh = 64`` is just ``0.125``; specialisation folds such expressions so
the graph carries one ``const`` of the dtype of the tensor the value meets. The folder does not
know any primitive: it evaluates the primitive's formula (:mod:`kinac.prims.defs`) over
:class:`PyAlgebra`, Python numbers with IEEE semantics (``1/0 = inf``, ``log(0) = -inf``,
overflow to ``inf``, NaN in NaN out) instead of Python's exceptions.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any

from kinac.prims.elementwise import ELEMENTWISE, Elementwise, apply, lookup

Num = float | int | bool


def _safe_div(a: float, b: float) -> float:
    try:
        return a / b
    except ZeroDivisionError:
        if a == 0 or math.isnan(a):
            return math.nan
        return math.copysign(math.inf, a) * math.copysign(1.0, b)


def _ieee(f: Callable[..., float], *xs: float) -> float:
    """``f`` with numpy's answer where Python's math raises (domain error, overflow)."""
    try:
        return f(*xs)
    except (ValueError, OverflowError, ZeroDivisionError):
        import numpy as np

        with np.errstate(all="ignore"):
            return float(getattr(np, f.__name__)(*(np.float64(x) for x in xs)))


class PyAlgebra:
    """The base operations on Python numbers (see :class:`kinac.prims.scalar.Algebra`)."""

    def const(self, value: Num, like: Num) -> Num:
        if isinstance(like, bool):
            return bool(value)
        if isinstance(like, int):
            return int(value)
        return float(value)

    def add(self, a: Num, b: Num) -> Num:
        return (a or b) if isinstance(a, bool) else a + b

    def sub(self, a: Num, b: Num) -> Num:
        return a - b

    def mul(self, a: Num, b: Num) -> Num:
        return (a and b) if isinstance(a, bool) else a * b

    def div(self, a: Num, b: Num) -> Num:
        if isinstance(a, int) and isinstance(b, int) and not isinstance(a, bool):
            return 0 if b == 0 else a // b
        return _safe_div(float(a), float(b))

    approx_div = div

    def fma(self, a: float, b: float, c: float) -> float:
        return a * b + c

    def neg(self, a: Num) -> Num:
        return -a

    def abs(self, a: Num) -> Num:
        return abs(a)

    def floor(self, a: float) -> float:
        return float(math.floor(a)) if math.isfinite(a) else a

    def sqrt(self, a: float) -> float:
        return math.sqrt(a) if a >= 0 else math.nan

    def exp(self, a: float) -> float:
        return _ieee(math.exp, a)

    def log(self, a: float) -> float:
        return _ieee(math.log, a)

    def tanh(self, a: float) -> float:
        return math.tanh(a)

    def erf(self, a: float) -> float:
        return math.erf(a)

    def pow(self, a: Num, b: Num) -> Num:
        try:
            return float(a) ** float(b)
        except (OverflowError, ZeroDivisionError):
            return math.inf

    def maximum(self, a: Num, b: Num) -> Num:
        if isinstance(a, float) and math.isnan(a) or isinstance(b, float) and math.isnan(b):
            return math.nan
        return max(a, b)

    def minimum(self, a: Num, b: Num) -> Num:
        if isinstance(a, float) and math.isnan(a) or isinstance(b, float) and math.isnan(b):
            return math.nan
        return min(a, b)

    def compare(self, pred: str, a: Num, b: Num) -> bool:
        ops: dict[str, Callable[[Num, Num], bool]] = {
            "lt": lambda x, y: x < y, "le": lambda x, y: x <= y, "gt": lambda x, y: x > y,
            "ge": lambda x, y: x >= y, "eq": lambda x, y: x == y, "ne": lambda x, y: x != y,
        }  # fmt: skip
        return ops[pred](a, b)

    def select(self, c: bool, a: Num, b: Num) -> Num:
        return a if c else b

    def libm(self, name: str, a: float) -> float:
        return _ieee(getattr(math, name), a)


_ALG = PyAlgebra()


def _unary(d: Elementwise) -> Callable[[float], float]:
    return lambda x: apply(d, _ALG, [float(x)])


UNARY: Mapping[str, Callable[[float], float]] = {
    n: _unary(d) for n, d in ELEMENTWISE.items() if d.arity == 1
}
"""Each unary elementwise primitive on a weak float."""


def binary(op: str, a: float, b: float, is_float: bool) -> Any:
    """``op`` over two weak scalars (integer arithmetic when both are integers and the op keeps
    integers weak; ``div`` and ``pow`` fold to floats, as the ``weak_int_to_float`` trait says)."""
    d = ELEMENTWISE[op]
    if is_float or "weak_int_to_float" in d.traits:
        a, b = float(a), float(b)
    return apply(d, _ALG, [a, b])


def fold_elementwise(op: str, values: list[Num], is_float: list[bool]) -> tuple[Num, bool] | None:
    """The elementwise primitive ``op`` over weak scalars: ``(value, is_float)``, or ``None``
    when ``op`` is not one the folder folds (comparisons, ``cast``, ``where`` are kept)."""
    d = lookup(op)
    if d is None or d.kind == "compare":
        return None
    if d.arity == 1:
        return UNARY[op](float(values[0])), True
    isf = any(is_float) or "weak_int_to_float" in d.traits
    return binary(op, values[0], values[1], isf), isf
