"""The scalar formula language: elementwise primitives are formulas over a few base operations.

Why: a primitive's meaning used to be written four to six times (folder, interpreter, host
emitter, GPU emitter, test references) and could drift. Now each stage implements the small
:class:`Algebra` below once, on its own values (Python numbers, numpy arrays, xDSL SSA values,
LLVM text values), and every primitive is a Python function over :class:`S` wrappers of those
values, written once in :mod:`kinac.prims.elementwise`. Accuracy-critical base operations
(``exp``, ``log``, ``tanh``, ``erf``, ``pow``, ``sqrt``) keep their careful per-stage
implementations; composites (``gelu``, ``silu``, ``softplus``, ...) are just their formula.

A formula sees only ``S`` values: Python operators (``+ - * /``, unary ``-``, ``< <= > >=``)
and the functions of this module. Python numbers mixed in become constants of the other
operand's type (``x * 0.5`` on an f32 register is an f32 multiply by 0.5).
"""

from __future__ import annotations

from typing import Any, Protocol

COMPARE_PREDICATES = ("lt", "le", "gt", "ge", "eq", "ne")
"""``compare`` predicates. On floats all are ordered (false on NaN) except ``ne``."""


class Algebra(Protocol):
    """The base scalar operations one stage implements on its own values.

    Values carry their type (a register type, a numpy dtype, a Python ``bool``/``int``/
    ``float``), and each operation dispatches on it: on integers ``div`` is floor division with
    ``x // 0 == 0`` and ``pow`` is exact; on ``bool`` ``add``/``maximum`` are *or* and
    ``mul``/``minimum`` are *and*; float ``maximum``/``minimum`` propagate NaN.
    """

    def const(self, value: float | int | bool, like: Any) -> Any:
        """``value`` as a constant of ``like``'s type."""
        ...

    def add(self, a: Any, b: Any) -> Any: ...
    def sub(self, a: Any, b: Any) -> Any: ...
    def mul(self, a: Any, b: Any) -> Any: ...
    def div(self, a: Any, b: Any) -> Any:
        """IEEE division on floats (the ``div`` primitive); floor division on integers."""
        ...

    def approx_div(self, a: Any, b: Any) -> Any:
        """A float quotient inside a composite whose last ulp does not matter (the GPU may use
        its 2-ulp division); exactly ``div`` elsewhere."""
        ...

    def fma(self, a: Any, b: Any, c: Any) -> Any:
        """``a * b + c`` rounded once (range reductions rely on it)."""
        ...

    def neg(self, a: Any) -> Any: ...
    def abs(self, a: Any) -> Any: ...
    def floor(self, a: Any) -> Any: ...
    def sqrt(self, a: Any) -> Any: ...
    def exp(self, a: Any) -> Any: ...
    def log(self, a: Any) -> Any: ...
    def tanh(self, a: Any) -> Any: ...
    def erf(self, a: Any) -> Any: ...
    def pow(self, a: Any, b: Any) -> Any: ...
    def maximum(self, a: Any, b: Any) -> Any: ...
    def minimum(self, a: Any, b: Any) -> Any: ...
    def compare(self, pred: str, a: Any, b: Any) -> Any:
        """A ``bool`` value; ``pred`` is one of :data:`COMPARE_PREDICATES`."""
        ...

    def select(self, c: Any, a: Any, b: Any) -> Any: ...
    def libm(self, name: str, a: Any) -> Any:
        """The C math library's ``name`` (``sin``, ``log1p``, ...) as the exact reference: the
        folder and the interpreter call Python's / numpy's, the host calls libm on f64; a stage
        that has no such library refuses with ``NotImplementedError``."""
        ...


class S:
    """A value of some :class:`Algebra`, with Python operators, for writing formulas.

    ``kernel`` says whether the formula is being lowered to generated f32 code (where a
    primitive's careful f32 algorithm replaces its exact reference) or evaluated as the meaning.
    """

    __slots__ = ("alg", "kernel", "v")

    def __init__(self, alg: Algebra, v: Any, kernel: bool = False) -> None:
        self.alg, self.v, self.kernel = alg, v, kernel

    def _wrap(self, v: Any) -> S:
        return S(self.alg, v, self.kernel)

    def _lift(self, o: S | float | int) -> Any:
        return o.v if isinstance(o, S) else self.alg.const(o, self.v)

    def __add__(self, o: S | float) -> S:
        return self._wrap(self.alg.add(self.v, self._lift(o)))

    def __radd__(self, o: float) -> S:
        return self._wrap(self.alg.add(self._lift(o), self.v))

    def __sub__(self, o: S | float) -> S:
        return self._wrap(self.alg.sub(self.v, self._lift(o)))

    def __rsub__(self, o: float) -> S:
        return self._wrap(self.alg.sub(self._lift(o), self.v))

    def __mul__(self, o: S | float) -> S:
        return self._wrap(self.alg.mul(self.v, self._lift(o)))

    def __rmul__(self, o: float) -> S:
        return self._wrap(self.alg.mul(self._lift(o), self.v))

    def __truediv__(self, o: S | float) -> S:
        return self._wrap(self.alg.div(self.v, self._lift(o)))

    def __rtruediv__(self, o: float) -> S:
        return self._wrap(self.alg.div(self._lift(o), self.v))

    def __neg__(self) -> S:
        return self._wrap(self.alg.neg(self.v))

    def __lt__(self, o: S | float) -> S:  # type: ignore[override]
        return self._wrap(self.alg.compare("lt", self.v, self._lift(o)))

    def __le__(self, o: S | float) -> S:  # type: ignore[override]
        return self._wrap(self.alg.compare("le", self.v, self._lift(o)))

    def __gt__(self, o: S | float) -> S:  # type: ignore[override]
        return self._wrap(self.alg.compare("gt", self.v, self._lift(o)))

    def __ge__(self, o: S | float) -> S:  # type: ignore[override]
        return self._wrap(self.alg.compare("ge", self.v, self._lift(o)))


def _un(name: str) -> Any:
    def f(x: S) -> S:
        return x._wrap(getattr(x.alg, name)(x.v))

    f.__name__ = name
    f.__doc__ = f"The base operation ``{name}``."
    return f


exp = _un("exp")
log = _un("log")
tanh = _un("tanh")
erf = _un("erf")
sqrt = _un("sqrt")
floor = _un("floor")
fabs = _un("abs")


def eq(a: S, b: S | float) -> S:
    return a._wrap(a.alg.compare("eq", a.v, a._lift(b)))


def ne(a: S, b: S | float) -> S:
    return a._wrap(a.alg.compare("ne", a.v, a._lift(b)))


def maximum(a: S, b: S | float) -> S:
    return a._wrap(a.alg.maximum(a.v, a._lift(b)))


def minimum(a: S, b: S | float) -> S:
    return a._wrap(a.alg.minimum(a.v, a._lift(b)))


def power(a: S, b: S | float) -> S:
    return a._wrap(a.alg.pow(a.v, a._lift(b)))


def approx_div(a: S | float, b: S) -> S:
    return b._wrap(b.alg.approx_div(b._lift(a), b.v))


def fma(a: S, b: S | float, c: S | float) -> S:
    return a._wrap(a.alg.fma(a.v, a._lift(b), a._lift(c)))


def where(c: S, a: S | float, b: S | float) -> S:
    """``c ? a : b``; a number on one side takes the other side's type."""
    like = a if isinstance(a, S) else b
    assert isinstance(like, S), "where needs at least one value operand"
    return like._wrap(like.alg.select(c.v, like._lift(a), like._lift(b)))


def libm(name: str, x: S) -> S:
    return x._wrap(x.alg.libm(name, x.v))


def poly(x: S, coeffs: tuple[float, ...]) -> S:
    """Horner's rule with FMAs: ``coeffs[0] x^n + ... + coeffs[n]``."""
    r = x._wrap(x.alg.const(coeffs[0], x.v))
    for c in coeffs[1:]:
        r = fma(r, x, c)
    return r
