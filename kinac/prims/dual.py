"""Derivatives of elementwise primitives, derived from their formulas (dual numbers).

Why: a primitive's meaning is written once, as a formula over the base operations of
:mod:`kinac.prims.scalar`; its derivative should not be written a second time where the formula
already says it. :class:`DualAlgebra` wraps any :class:`~kinac.prims.scalar.Algebra` (numpy
arrays, graph nodes, ...) with forward-mode tangents: evaluating a formula on duals whose
tangent is the cotangent ``g`` on argument ``i`` and zero elsewhere gives ``g * df/dx_i``, which
is exactly the vector-Jacobian product of an elementwise function (its Jacobian is diagonal).
A tangent of ``None`` is a symbolic zero, so no work is emitted for arguments that do not vary.

A VJP formula has the signature ``vjp(x_1, ..., x_n, out, g) -> (cot_1, ..., cot_n)`` over
:class:`S` values (``out`` is the primitive's result, ``None`` for "no cotangent"). Definitions
whose derived derivative is numerically poor (``sigmoid``'s ``exp(-x)`` overflows) give their
own in :mod:`kinac.prims.defs`; comparisons are :func:`nondifferentiable`.

Conventions (those of ``torch.autograd``): ``abs`` has derivative 0 at 0; ``max``/``min`` split
the cotangent evenly on ties and give it all to a NaN operand (the result); ``pow``'s exponent
gets no gradient where the base is 0.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kinac.prims.scalar import Algebra, S

VjpFormula = Callable[..., tuple[S | None, ...]]
TWO_OVER_SQRT_PI = 2.0 / math.sqrt(math.pi)


@dataclass(frozen=True)
class Dual:
    """A primal value and its tangent (``None``: zero) in the base algebra."""

    p: Any
    t: Any


class DualAlgebra:
    """Forward-mode derivatives over a base algebra (see the module docstring)."""

    def __init__(self, base: Algebra) -> None:
        self.b = base

    # ---- tangent helpers (None is zero) ---------------------------------------------------
    def _zero(self, like: Any) -> Any:
        return self.b.const(0, like)

    def _tadd(self, a: Any, b: Any) -> Any:
        if a is None:
            return b
        return a if b is None else self.b.add(a, b)

    def _tscale(self, t: Any, f: Any) -> Any:
        return None if t is None else self.b.mul(t, f)

    # ---- the Algebra ------------------------------------------------------------------------
    def const(self, value: float | int | bool, like: Any) -> Dual:
        return Dual(self.b.const(value, like.p), None)

    def add(self, a: Dual, b: Dual) -> Dual:
        return Dual(self.b.add(a.p, b.p), self._tadd(a.t, b.t))

    def sub(self, a: Dual, b: Dual) -> Dual:
        nb = None if b.t is None else self.b.neg(b.t)
        t = nb if a.t is None else (a.t if b.t is None else self.b.sub(a.t, b.t))
        return Dual(self.b.sub(a.p, b.p), t)

    def mul(self, a: Dual, b: Dual) -> Dual:
        t = self._tadd(self._tscale(a.t, b.p), self._tscale(b.t, a.p))
        return Dual(self.b.mul(a.p, b.p), t)

    def div(self, a: Dual, b: Dual) -> Dual:
        q = self.b.div(a.p, b.p)
        # d(a/b) = (da - q db) / b
        num = self._tadd(a.t, None if b.t is None else self.b.neg(self.b.mul(q, b.t)))
        return Dual(q, None if num is None else self.b.div(num, b.p))

    def approx_div(self, a: Dual, b: Dual) -> Dual:
        return self.div(a, b)

    def fma(self, a: Dual, b: Dual, c: Dual) -> Dual:
        t = self._tadd(self._tadd(self._tscale(a.t, b.p), self._tscale(b.t, a.p)), c.t)
        return Dual(self.b.fma(a.p, b.p, c.p), t)

    def neg(self, a: Dual) -> Dual:
        return Dual(self.b.neg(a.p), None if a.t is None else self.b.neg(a.t))

    def abs(self, a: Dual) -> Dual:
        t = None
        if a.t is not None:
            z = self._zero(a.p)
            neg = self.b.select(self.b.compare("lt", a.p, z), self.b.neg(a.t), self._zero(a.t))
            t = self.b.select(self.b.compare("gt", a.p, z), a.t, neg)
        return Dual(self.b.abs(a.p), t)

    def floor(self, a: Dual) -> Dual:
        return Dual(self.b.floor(a.p), None)

    def sqrt(self, a: Dual) -> Dual:
        r = self.b.sqrt(a.p)
        t = None if a.t is None else self.b.div(a.t, self.b.mul(r, self.b.const(2, r)))
        return Dual(r, t)

    def exp(self, a: Dual) -> Dual:
        e = self.b.exp(a.p)
        return Dual(e, self._tscale(a.t, e))

    def log(self, a: Dual) -> Dual:
        return Dual(self.b.log(a.p), None if a.t is None else self.b.div(a.t, a.p))

    def tanh(self, a: Dual) -> Dual:
        y = self.b.tanh(a.p)
        if a.t is None:
            return Dual(y, None)
        return Dual(y, self.b.mul(a.t, self.b.sub(self.b.const(1, y), self.b.mul(y, y))))

    def erf(self, a: Dual) -> Dual:
        y = self.b.erf(a.p)
        if a.t is None:
            return Dual(y, None)
        d = self.b.exp(self.b.neg(self.b.mul(a.p, a.p)))
        d = self.b.mul(d, self.b.const(TWO_OVER_SQRT_PI, d))
        return Dual(y, self.b.mul(a.t, d))

    def pow(self, a: Dual, b: Dual) -> Dual:
        y = self.b.pow(a.p, b.p)
        t = None
        if a.t is not None:  # b a^(b-1)
            am1 = self.b.pow(a.p, self.b.sub(b.p, self.b.const(1, b.p)))
            t = self.b.mul(a.t, self.b.mul(b.p, am1))
        if b.t is not None:  # a^b log a (0 where a == 0, as torch)
            lg = self.b.mul(y, self.b.log(a.p))
            at0 = self.b.compare("eq", a.p, self._zero(a.p))
            t = self._tadd(t, self.b.mul(b.t, self.b.select(at0, self._zero(lg), lg)))
        return Dual(y, t)

    def _extremum(self, a: Dual, b: Dual, win: str, lose: str) -> Any:
        """The tangent of ``max``/``min``: the operand that gives the result. On a tie, and
        when both are NaN, half of each; when one is NaN, the NaN's (it is the result, since
        float ``maximum``/``minimum`` propagate NaN). Splitting that case in half, as before,
        gave half to an operand that did not reach the result (docs/language.md,
        "Gradients"; torch's ``Tensor.max()`` backward)."""
        if a.t is None and b.t is None:
            return None
        ta = a.t if a.t is not None else self._zero(b.t)
        tb = b.t if b.t is not None else self._zero(a.t)
        half = self.b.mul(self.b.add(ta, tb), self.b.const(0.5, ta))
        a_num = self.b.compare("eq", a.p, a.p)  # ordered: false exactly on NaN
        b_num = self.b.compare("eq", b.p, b.p)
        # neither ordered: a tie (half each) unless exactly one operand is NaN (it gets all)
        unordered = self.b.select(
            a_num, self.b.select(b_num, half, tb), self.b.select(b_num, ta, half)
        )
        inner = self.b.select(self.b.compare(lose, a.p, b.p), tb, unordered)
        return self.b.select(self.b.compare(win, a.p, b.p), ta, inner)

    def maximum(self, a: Dual, b: Dual) -> Dual:
        return Dual(self.b.maximum(a.p, b.p), self._extremum(a, b, "gt", "lt"))

    def minimum(self, a: Dual, b: Dual) -> Dual:
        return Dual(self.b.minimum(a.p, b.p), self._extremum(a, b, "lt", "gt"))

    def compare(self, pred: str, a: Dual, b: Dual) -> Dual:
        return Dual(self.b.compare(pred, a.p, b.p), None)

    def select(self, c: Dual, a: Dual, b: Dual) -> Dual:
        t = None
        if a.t is not None or b.t is not None:
            ta = a.t if a.t is not None else self._zero(b.t)
            tb = b.t if b.t is not None else self._zero(a.t)
            t = self.b.select(c.p, ta, tb)
        return Dual(self.b.select(c.p, a.p, b.p), t)

    def libm(self, name: str, a: Dual) -> Dual:
        y = self.b.libm(name, a.p)
        if a.t is None:
            return Dual(y, None)
        if name == "log1p":
            t = self.b.div(a.t, self.b.add(self.b.const(1, a.p), a.p))
        elif name == "sin":
            t = self.b.mul(a.t, self.b.libm("cos", a.p))
        elif name == "cos":
            t = self.b.neg(self.b.mul(a.t, self.b.libm("sin", a.p)))
        else:
            raise NotImplementedError(f"no derivative for libm {name!r}")
        return Dual(y, t)


def derive_vjp(formula: Callable[..., S], arity: int) -> VjpFormula:
    """The VJP of an elementwise ``formula`` of ``arity`` arguments, by one forward-mode
    evaluation per argument (the tangent seeded with the cotangent ``g``)."""

    def vjp(*xs_out_g: S) -> tuple[S | None, ...]:
        xs, g = xs_out_g[:arity], xs_out_g[-1]
        dual = DualAlgebra(g.alg)
        cots: list[S | None] = []
        for i in range(arity):
            ds = [S(dual, Dual(x.v, g.v if j == i else None)) for j, x in enumerate(xs)]
            r = formula(*ds).v
            cots.append(None if r.t is None else S(g.alg, r.t))
        return tuple(cots)

    vjp.__doc__ = f"The VJP of {getattr(formula, '__name__', 'a formula')}, derived."
    return vjp


def nondifferentiable(*xs_out_g: S) -> tuple[S | None, ...]:
    """The VJP slot of a primitive with no derivative (comparisons): no cotangent flows."""
    return (None,) * (len(xs_out_g) - 2)


nondifferentiable.nondifferentiable = True  # type: ignore[attr-defined]
