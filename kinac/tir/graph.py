"""The concrete graph: the contract between checking and lowering.

A :class:`Graph` is one entry point at concrete dims, in SSA form: ``nodes[i].args`` index
earlier nodes. All defn calls are inlined, dims are integers, negative axes are normalised,
weak scalar literals have taken their dtype, and keyword arguments are ``attrs``.

Ops (``Node.op``) and their attrs:

=====================  =====================================================================
``param``              ``index``: position among the entry's tensor parameters
``const``              ``value`` (float, int or bool): a scalar of the node's dtype; its
                       shape is ``()`` and elementwise ops broadcast it
unary                  ``neg exp log sqrt rsqrt tanh sigmoid relu gelu silu abs recip square``
                       and every other unary definition of :mod:`kinac.prims.defs` (its
                       formula is the meaning; ``gelu`` is the exact erf form)
``cast``               to the node's dtype
binary                 ``add sub mul div max min pow`` and ``lt le gt ge eq`` (result bool):
                       numpy broadcasting from the right
``where``              ``(c, a, b)``, broadcasting over the three
``reduce_sum``         ``axis`` (>= 0), ``keepdims`` (bool); also ``reduce_mean``,
                       ``reduce_max``, ``reduce_min``
``matmul``             numpy ``matmul`` of two tensors of rank >= 2, batch dims broadcast
``transpose``          ``perm``
``reshape``            target shape is the node's shape
``broadcast_to``       target shape is the node's shape
``concat``             ``axis``; any number of args
``slice``              ``axis``, ``start``, ``stop``
``gather``             ``(table [V, D], idx int [..b])`` -> ``[..b, D]``; an index outside
                       ``[0, V)`` is a runtime error, never garbage
``scatter_add``        ``(idx int [..b], src [..b, D])`` -> the node's shape ``[V, D]``: zeros,
                       then ``out[idx[p]] += src[p]`` for every position ``p`` in row-major
                       order (deterministic: each row accumulated in that order; gather's
                       VJP). An index outside ``[0, V)`` contributes nothing (the gather of
                       the same indices reports it)
``softmax``            ``axis``
``repeat_interleave``  ``repeats``, ``axis``
``iota``               ``axis``: values 0..n-1 along ``axis``, broadcast along the others
``full``               ``value``
``to_device``          copy to the node's device; ``to_host`` copies to ``cpu``
``reshard``            ``kind`` (``reshard``, ``all-reduce``, ``all-gather``,
                       ``reduce-scatter``, ``all-to-all``: the primitive written),
                       ``layout`` (its sharding annotations as written:
                       ``((name, ((key, value), …)), …)``, key None when positional),
                       ``site`` (``(file, defn, nid)``: where it was written). The same
                       global value (the identity on one device); sharding pins its
                       result's layout and redistributes into it (:mod:`kinac.shard`)
=====================  =====================================================================

``attrs`` is a tuple of ``(name, value)`` pairs sorted by name; use :meth:`Node.attr`.
"""

from __future__ import annotations

from typing import Any

from kinac.dtypes import DTYPES as DTYPES
from kinac.dtypes import FLOAT_DTYPES as FLOAT_DTYPES
from kinac.rules.codec import record


@record
class TType:
    """A concrete tensor type: dtype name, shape, and device (``cpu`` or ``cuda:N``)."""

    dtype: str
    shape: tuple[int, ...]
    device: str = "cpu"

    @property
    def rank(self) -> int:
        return len(self.shape)

    @property
    def numel(self) -> int:
        n = 1
        for d in self.shape:
            n *= d
        return n


def lookup_attr(attrs: tuple[tuple[str, Any], ...], name: str, default: Any = None) -> Any:
    """The value of ``name`` in a tuple of ``(name, value)`` attr pairs, else ``default``.

    Shared by :meth:`Node.attr` and the typed IR's ``TPrim.attr`` (same attrs, before and after
    specialisation)."""
    for k, v in attrs:
        if k == name:
            return v
    return default


@record
class Node:
    """One operation; see the module docstring for ops and attrs."""

    op: str
    args: tuple[int, ...]
    attrs: tuple[tuple[str, Any], ...]
    type: TType

    def attr(self, name: str, default: Any = None) -> Any:
        return lookup_attr(self.attrs, name, default)


@record
class Graph:
    """An entry point at concrete dims.

    The first ``len(params)`` nodes are ``param`` nodes, in order. ``outputs`` index ``nodes``
    (one output for a defn; a tuple leaves room for more).
    """

    name: str
    params: tuple[tuple[str, TType], ...]
    nodes: tuple[Node, ...]
    outputs: tuple[int, ...]


def make_node(op: str, args: tuple[int, ...], ttype: TType, **attrs: Any) -> Node:
    """Build a node with its attrs in canonical (sorted) order."""
    return Node(op, tuple(args), tuple(sorted(attrs.items())), ttype)
