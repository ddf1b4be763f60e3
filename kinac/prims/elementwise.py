"""The elementwise primitives, each defined once: typing kind, traits, scalar formula, slots.

Why: this table is the single place a new elementwise primitive is written. The checker
(``kinac.check.prims.elementwise``) registers a typing rule per entry from its ``kind``; the
constant folder and the reference interpreter evaluate ``formula`` on Python numbers and numpy
arrays; the ``kina`` dialect makes one op per entry; the host and GPU emitters evaluate
``formula`` (or ``kernel_f32``, the careful algorithm for generated f32 code) over their base
operations. Nothing else names a primitive. The definitions themselves are in
:mod:`kinac.prims.defs` (imported at the end of this module).

Kinds (the typing rule): ``float`` unary on float dtypes; ``numeric`` unary whose graph op and
lowering also take integer dtypes (the Kina checker still asks for a float, K0602); ``arith`` binary with broadcasting and one dtype; ``compare`` binary with a
``bool`` result. Traits name facts later passes use: ``expensive`` (worth materialising rather
than recomputing per use), ``weak_int_to_float`` (weak integer operands fold to a float).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kinac.prims.dual import derive_vjp, nondifferentiable
from kinac.prims.scalar import Algebra, S

KINDS = ("float", "numeric", "arith", "compare")
ARITY = {"float": 1, "numeric": 1, "arith": 2, "compare": 2}
LOW_PRECISION_KERNEL_DTYPES = ("f32", "f16", "bf16")
"""Dtypes whose generated code computes in f32 registers (and so uses ``kernel_f32``)."""


@dataclass(frozen=True)
class Elementwise:
    """One elementwise primitive.

    ``formula`` is its meaning over base operations (exact references through ``libm`` where
    the math library has the function); ``kernel_f32``, when given, is how generated f32 code
    computes it (range reduction and polynomials), and must agree with ``formula`` within the
    ulp bound its tests state. ``vjp`` is the primitive's vector-Jacobian product over
    :class:`S` (:mod:`kinac.prims.dual`: derived from ``formula`` unless given);
    ``shard_factors`` is the sharding slot.
    """

    name: str
    kind: str
    formula: Callable[..., S]
    traits: frozenset[str] = frozenset()
    kernel_f32: Callable[..., S] | None = None
    doc: str = ""
    vjp: Callable[..., Any] | None = None
    shard_factors: Callable[..., Any] | None = None

    @property
    def arity(self) -> int:
        return ARITY[self.kind]

    @property
    def graph_op(self) -> str:
        """The op name of this primitive in a :class:`kinac.tir.graph.Graph`."""
        return self.name

    def __call__(self, *xs: S) -> S:
        """Use this primitive inside another's formula (same mode as the caller)."""
        if xs[0].kernel and self.kernel_f32 is not None:
            return self.kernel_f32(*xs)
        return self.formula(*xs)


ELEMENTWISE: dict[str, Elementwise] = {}


def define(
    name: str,
    kind: str,
    formula: Callable[..., S],
    *traits: str,
    kernel_f32: Callable[..., S] | None = None,
    doc: str = "",
    vjp: Callable[..., Any] | None = None,
) -> Elementwise:
    """Add one primitive to :data:`ELEMENTWISE` (its name is its graph op name).

    ``vjp`` (``(x..., out, g) -> cotangents`` over :class:`S`) defaults to the derivative of
    ``formula`` (:func:`kinac.prims.dual.derive_vjp`); comparisons are not differentiable."""
    assert kind in KINDS and name not in ELEMENTWISE, (name, kind)
    if vjp is None:
        vjp = nondifferentiable if kind == "compare" else derive_vjp(formula, ARITY[kind])
    d = Elementwise(name, kind, formula, frozenset(traits), kernel_f32, doc, vjp=vjp)
    ELEMENTWISE[name] = d
    return d


def lookup(name: str) -> Elementwise | None:
    """The definition of the elementwise primitive ``name``, if it is one."""
    return ELEMENTWISE.get(name)


def apply(d: Elementwise, alg: Algebra, args: list[Any], kernel_dtype: str | None = None) -> Any:
    """Evaluate ``d`` over ``alg`` on raw values; ``kernel_dtype`` is the dtype of generated
    code (``None`` for the folder and the interpreter, which evaluate the exact meaning)."""
    kernel = kernel_dtype in LOW_PRECISION_KERNEL_DTYPES
    return d(*(S(alg, a, kernel) for a in args)).v


def names(kind: str | None = None) -> tuple[str, ...]:
    """The primitives of one kind (all when ``None``), in definition order."""
    return tuple(n for n, d in ELEMENTWISE.items() if kind is None or d.kind == kind)


from kinac.prims import defs  # noqa: E402  (fills ELEMENTWISE)

_ = defs
