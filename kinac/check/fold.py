"""Folding weak scalars (literals, dims used as values, and ops over them) to Python numbers.

Why: ``(rsqrt Dh)`` at ``Dh = 64`` is just ``0.125``; specialisation folds such expressions so
the graph carries one ``const`` of the dtype of the tensor the value meets.
"""

from __future__ import annotations

import math
from collections.abc import Callable


def _safe_div(a: float, b: float) -> float:
    try:
        return a / b
    except ZeroDivisionError:
        if a == 0 or math.isnan(a):
            return math.nan
        return math.copysign(math.inf, a) * (math.copysign(1.0, b) if b == 0 else 1.0)


def _rsqrt(x: float) -> float:
    return _safe_div(1.0, math.sqrt(x)) if x >= 0 else math.nan


def _log(x: float) -> float:
    if x == 0:
        return -math.inf
    return math.log(x) if x > 0 else math.nan


def _exp(x: float) -> float:
    try:
        return math.exp(x)
    except OverflowError:
        return math.inf


def _sigmoid(x: float) -> float:
    return 1.0 / (1.0 + _exp(-x))


UNARY: dict[str, Callable[[float], float]] = {
    "neg": lambda x: -x,
    "exp": _exp,
    "log": _log,
    "sqrt": lambda x: math.sqrt(x) if x >= 0 else math.nan,
    "rsqrt": _rsqrt,
    "tanh": math.tanh,
    "sigmoid": _sigmoid,
    "relu": lambda x: x if x > 0 else 0.0,
    "gelu": lambda x: 0.5 * x * (1.0 + math.erf(x / math.sqrt(2.0))),
    "silu": lambda x: x * _sigmoid(x),
    "abs": abs,
    "recip": lambda x: _safe_div(1.0, x),
    "square": lambda x: x * x,
}


def binary(op: str, a: float, b: float, is_float: bool) -> float | int | bool:
    """``op`` over two weak scalars (integer arithmetic when both are integers)."""
    if op == "add":
        return a + b
    if op == "sub":
        return a - b
    if op == "mul":
        return a * b
    if op == "div":
        if not is_float and b != 0:
            return int(a / b)
        return _safe_div(float(a), float(b))
    if op == "max":
        return max(a, b)
    if op == "min":
        return min(a, b)
    if op == "pow":
        try:
            return float(a) ** float(b)
        except (OverflowError, ZeroDivisionError):
            return math.inf
    if op == "lt":
        return a < b
    if op == "le":
        return a <= b
    if op == "gt":
        return a > b
    if op == "ge":
        return a >= b
    if op == "eq":
        return a == b
    raise KeyError(op)
