"""The factor table of a graph op, read from the primitive registry's ``shard_rule`` slots.

Why a lookup and not a table: each primitive declares its factors where it is defined
(:mod:`kinac.check.shard_factors`, named in its :class:`kinac.check.prims.base.Prim`), so
propagation stays generic: it asks an op for its factors and never names one.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import cache

from kinac.check.shard_factors import FactorRule, OpFactors, opaque, pointwise, reshape_factors
from kinac.tir.graph import Node

__all__ = ["PARTIAL_LINEAR", "OpFactors", "factor_rule", "factors_of", "reshape_factors"]

_NO_PRIMITIVE = frozenset({"param", "const"})
"""Graph ops with no primitive: leaves, one factor per dim (never read: they have no operands)."""


@cache
def _by_op() -> dict[str, FactorRule]:
    """Each graph op's rule, from the registry (the first entry of an op, as specialisation
    maps ops to primitives); an empty slot is opaque (replicated, correct, never fast)."""
    from kinac.check.prims import PRIMS  # the package: importing it fills the table

    out: dict[str, FactorRule] = {}
    for entries in PRIMS.values():
        for p in entries:
            out.setdefault(p.op, p.shard_rule or opaque)
    return out


def factor_rule(op: str) -> FactorRule:
    """The rule for graph op ``op``."""
    if op in _NO_PRIMITIVE:
        return pointwise
    return _by_op().get(op, opaque)


def factors_of(node: Node, operand_shapes: Sequence[tuple[int, ...]]) -> OpFactors:
    """The factor table of ``node`` given its operands' shapes."""
    return factor_rule(node.op)(node, operand_shapes)


PARTIAL_LINEAR = frozenset(
    {
        "transpose",
        "reshape",
        "neg",
        "reduce_sum",
        "reduce_mean",
        "cast",
        "to_device",
        "to_host",
        "broadcast_to",
    }
)
"""Ops through which a ``@partial(sum)`` operand stays partial (linear in it); ``add``/``sub``
when every operand is partial over the same axes, ``mul`` and ``matmul`` when one is, ``div`` when the
numerator is, are decided in :mod:`kinac.shard.plan`."""
