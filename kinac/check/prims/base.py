"""The primitive table: one entry per primitive, JAX style.

Why: each primitive's whole typing story lives in one place: how its arguments are read
(``args``/``kwargs`` specs), its symbolic shape/dtype rule (``rule``: types with dims, emits
obligations through a :class:`RuleCtx`), its concrete evaluator (``concrete``: integer shapes,
used by specialisation, the soundness tests and the counterexample-validity tests), the op name
and attributes it becomes in a :class:`kinac.tir.graph.Graph`, and a ``shard_rule`` slot for
the sharding issue. ``traits`` (elementwise, reduction, contraction, view, expensive, ...) are
what later passes ask about a primitive instead of listing names; ``vjp_rule`` is the slot the
differentiation issue fills. Elementwise primitives are not written here: their entries are made
from :mod:`kinac.prims.defs` (one definition each) by :mod:`kinac.check.prims.elementwise`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from kinac.check.formula import Rel
from kinac.check.types import SType
from kinac.tir.graph import TType

REQ = object()
"""Marks a keyword argument without a default."""


class ShapeError(Exception):
    """A concrete evaluator's verdict that the arguments break the primitive's rule."""


class RuleCtx(Protocol):
    """What a symbolic rule may do: prove, report, and describe its arguments."""

    def require(
        self,
        rel: Rel,
        code: str,
        what: str,
        args: tuple[int, ...] = (),
        help: str | None = None,
        kw: str | None = None,
        hint: tuple[Rel, ...] = (),
    ) -> bool: ...

    def proves(self, rel: Rel) -> bool: ...

    def fail(
        self,
        code: str,
        msg: str,
        arg: int | None = None,
        help: str | None = None,
        kw: str | None = None,
        label: str = "",
    ) -> None: ...

    def name(self, i: int) -> str: ...

    def set_attr(self, key: str, value: Any) -> None: ...


@dataclass
class Args:
    """Read arguments: tensor types (positional order) and static values by name."""

    t: list[SType]
    v: dict[str, Any]


@dataclass
class CArgs:
    """Concrete arguments: tensor types and static values at concrete dims."""

    t: list[TType]
    v: dict[str, Any]
    default_device: str = "cpu"


Rule = Callable[[RuleCtx, Args], SType | None]
Concrete = Callable[[CArgs], tuple[TType, dict[str, Any]]]


@dataclass
class Prim:
    """One primitive. ``args``: positional ``(name, kind)``; ``kwargs``: ``(name, kind,
    default)`` (``REQ`` when required). Kinds: tensor, tensors, dtype, shape, scalar, int, ints,
    bool, dim, device, device?, annots. ``family`` is always one of ``traits``; ``definition``
    links an elementwise primitive to its :class:`kinac.prims.elementwise.Elementwise`."""

    name: str
    op: str
    args: tuple[tuple[str, str], ...]
    kwargs: tuple[tuple[str, str, Any], ...]
    rule: Rule
    concrete: Concrete
    family: str
    shard_rule: Callable[..., Any] | None = None
    doc: str = ""
    traits: frozenset[str] = frozenset()
    vjp_rule: Callable[..., Any] | None = None
    definition: Any = None

    def __post_init__(self) -> None:
        self.traits = self.traits | {self.family} | FAMILY_TRAITS.get(self.family, frozenset())


FAMILY_TRAITS: dict[str, frozenset[str]] = {
    "elementwise": frozenset(),
    "reduce": frozenset({"reduction"}),
    "matmul": frozenset({"contraction", "expensive"}),
}
"""Traits every primitive of a family has; an entry adds its own (``view``, ``expensive``)."""


PRIMS: dict[str, list[Prim]] = {}


def register(p: Prim) -> Prim:
    """Add an entry; a name may have two (``max``: binary and reduction)."""
    PRIMS.setdefault(p.name, []).append(p)
    return p


def find(head: str, n_pos: int, kw: set[str]) -> Prim | None:
    """The entry for ``head`` called with ``n_pos`` positional args and keywords ``kw``."""
    cands = PRIMS.get(head)
    if not cands:
        return None
    if len(cands) == 1:
        return cands[0]
    for p in cands:
        n_t = sum(1 for _, k in p.args if not k.endswith("?"))
        if n_t == n_pos and (not kw or kw <= {k for k, _, _ in p.kwargs}):
            return p
    return cands[0]
