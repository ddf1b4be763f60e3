"""Reverse mode over the concrete Graph: one rule table and a short walk (tinygrad style).

Why a transform and not a tape: the gradient is a Graph like any other entry's, so it is
type-checked by construction (each gradient node has its parameter's exact type), cached as a
query, sharded by propagation and lowered by the same back ends. The walk visits the forward
nodes in reverse order; each node that depends on a differentiated parameter and has a
cotangent asks its primitive's ``vjp_rule`` (:mod:`kinac.check.vjp_rules`) for its operands'
cotangents, which are reduced to the operands' shapes and summed in a fixed order (so two
builds give the same graph and two runs the same bits). Dead nodes are dropped at the end.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import cache
from typing import Any

from kinac.dtypes import FLOAT_DTYPES
from kinac.grad.builder import GraphBuilder
from kinac.tir.graph import Graph, Node, TType


class GradError(ValueError):
    """A request the transform cannot honour (non-scalar loss, unknown or integer ``wrt``):
    the callers turn it into a diagnostic or a usage error."""


@cache
def _rules() -> dict[str, Any]:
    """The VJP rule of each graph op, read from the checker's primitive table (the one rule
    table: a primitive's ``vjp_rule`` slot)."""
    from kinac.check.prims import PRIMS

    by_op: dict[str, Any] = {}
    for ps in PRIMS.values():
        for p in ps:
            if p.vjp_rule is not None:
                by_op.setdefault(p.op, p.vjp_rule)
    return by_op


def check_request(graph: Graph, wrt: Sequence[str]) -> None:
    """Raise :class:`GradError` unless ``graph``'s output is a float scalar and every ``wrt``
    names a distinct float parameter."""
    if len(graph.outputs) != 1:
        raise GradError(f"`{graph.name}` returns {len(graph.outputs)} values; grad needs one")
    out = graph.nodes[graph.outputs[0]].type
    if out.shape != () or out.dtype not in FLOAT_DTYPES:
        raise GradError(
            f"`{graph.name}` returns {out.dtype}{list(out.shape)} here: the loss of a gradient "
            "must be a scalar float (rank 0); reduce it first, e.g. (mean (reshape y [N]) :axis 0)"
        )
    params = dict(graph.params)
    if not wrt:
        raise GradError("grad needs at least one parameter in wrt")
    for w in wrt:
        if w not in params:
            names = ", ".join(n for n, _ in graph.params)
            raise GradError(f"`{graph.name}` has no tensor parameter `{w}` (it has: {names})")
        if params[w].dtype not in FLOAT_DTYPES:
            raise GradError(
                f"cannot differentiate with respect to `{w}`: it is {params[w].dtype}, and "
                "gradients exist only for float parameters"
            )
    if len(set(wrt)) != len(wrt):
        raise GradError(f"wrt names a parameter twice: {list(wrt)}")


def value_and_grad(graph: Graph, wrt: Sequence[str]) -> Graph:
    """The graph computing ``(loss, d loss / d wrt_1, ...)``: same params, one output per
    gradient after the value, each of its parameter's exact type."""
    check_request(graph, wrt)
    rules = _rules()
    b = GraphBuilder(graph)
    index = {name: i for i, (name, _) in enumerate(graph.params)}
    targets = {index[w] for w in wrt}
    needs = [False] * len(graph.nodes)
    for i, n in enumerate(graph.nodes):
        if n.type.dtype not in FLOAT_DTYPES:
            continue
        needs[i] = (n.op == "param" and n.attr("index") in targets) or any(needs[a] for a in n.args)
    out = graph.outputs[0]
    cot: dict[int, int] = {}
    if needs[out]:
        cot[out] = b.full(1.0, graph.nodes[out].type)
    for i in range(len(graph.nodes) - 1, -1, -1):
        n = graph.nodes[i]
        if i not in cot or n.op == "param":
            continue
        rule = rules.get(n.op)
        if rule is None:
            raise NotImplementedError(f"grad: no VJP rule for op {n.op!r}")
        cs = rule(b, n, i, cot[i])
        for a, c in zip(n.args, cs, strict=True):
            if c is None or not needs[a]:
                continue
            want = graph.nodes[a].type
            c = b.sum_to(c, want.shape)
            got = b.type(c)
            assert got == want, (n.op, "cotangent type", got, "for operand", want)
            cot[a] = b.add(cot[a], c) if a in cot else c
    grads = []
    for w in wrt:
        p = graph.nodes[index[w]]
        grads.append(cot.get(index[w], -1))
        if grads[-1] < 0:  # the loss does not depend on it
            grads[-1] = b.full(0.0, p.type)
    return prune(Graph(graph.name, graph.params, tuple(b.nodes), (out, *grads)))


def prune(graph: Graph) -> Graph:
    """Drop nodes no output reaches (params stay, in order) and renumber."""
    live = [False] * len(graph.nodes)
    for o in graph.outputs:
        live[o] = True
    for i in range(len(graph.nodes) - 1, -1, -1):
        if live[i]:
            for a in graph.nodes[i].args:
                live[a] = True
    new: dict[int, int] = {}
    nodes: list[Node] = []
    for i, n in enumerate(graph.nodes):
        if live[i] or n.op == "param":
            new[i] = len(nodes)
            nodes.append(Node(n.op, tuple(new[a] for a in n.args), n.attrs, n.type))
    return Graph(graph.name, graph.params, tuple(nodes), tuple(new[o] for o in graph.outputs))


def gradient_types(graph: Graph, wrt: Sequence[str]) -> tuple[TType, ...]:
    """The types of the gradients: exactly their parameters'."""
    params = dict(graph.params)
    return tuple(params[w] for w in wrt)
