"""Helpers of the gradient tests: a Graph evaluated by PyTorch (the autograd reference), a
scalar loss wrapped around any graph, and central finite differences on the numpy interpreter.

Why a torch evaluator: every differentiable primitive is checked by differentiating a Graph
with kinac and the *same* Graph with ``torch.autograd``, so one mapping from ops to torch
functions serves every case (and random graphs) instead of a hand-written reference per test.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from kinac.ir.testing import GraphBuilder
from kinac.tir.graph import Graph, Node
from kinac.tir.interp import evaluate

TORCH_DTYPES = {"f64": "float64", "f32": "float32", "i32": "int32", "i64": "int64", "bool": "bool"}


def _torch_ops() -> dict[str, Any]:
    import torch

    F = torch.nn.functional
    return {
        "neg": torch.neg,
        "exp": torch.exp,
        "log": torch.log,
        "sqrt": torch.sqrt,
        "rsqrt": torch.rsqrt,
        "tanh": torch.tanh,
        "sigmoid": torch.sigmoid,
        "relu": torch.relu,
        "gelu": F.gelu,
        "silu": F.silu,
        "abs": torch.abs,
        "recip": torch.reciprocal,
        "square": torch.square,
        "erf": torch.erf,
        "log1p": torch.log1p,
        "softplus": F.softplus,
        "sin": torch.sin,
        "cos": torch.cos,
        "add": torch.add,
        "sub": torch.sub,
        "mul": torch.mul,
        "div": torch.div,
        "max": torch.maximum,
        "min": torch.minimum,
        "pow": torch.pow,
        "lt": torch.lt,
        "le": torch.le,
        "gt": torch.gt,
        "ge": torch.ge,
        "eq": torch.eq,
    }


def torch_eval(graph: Graph, inputs: list[Any]) -> list[Any]:
    """Evaluate ``graph`` with torch ops on torch tensors (autograd follows)."""
    import torch

    ops = _torch_ops()
    vals: list[Any] = []
    for n in graph.nodes:
        a = [vals[i] for i in n.args]
        dt = getattr(torch, TORCH_DTYPES[n.type.dtype])
        op = n.op
        if op == "param":
            v = inputs[n.attr("index")]
        elif op in ("const", "full"):
            v = torch.full(n.type.shape, n.attr("value"), dtype=dt)
        elif op == "iota":
            ax = n.attr("axis")
            shape = [1] * len(n.type.shape)
            shape[ax] = n.type.shape[ax]
            v = torch.arange(n.type.shape[ax], dtype=dt).reshape(shape).expand(n.type.shape)
        elif op in ops:
            v = ops[op](*a)
        elif op == "cast":
            v = a[0].to(dt)
        elif op == "where":
            v = torch.where(*a)
        elif op.startswith("reduce_"):
            ax, keep = n.attr("axis"), bool(n.attr("keepdims"))
            f = {"reduce_sum": torch.sum, "reduce_mean": torch.mean}.get(op)
            if f is not None:
                v = f(a[0], dim=ax, keepdim=keep)
            else:
                v = (torch.amax if op == "reduce_max" else torch.amin)(a[0], dim=ax, keepdim=keep)
        elif op == "matmul":
            v = torch.matmul(*a)
        elif op == "transpose":
            v = a[0].permute(*n.attr("perm"))
        elif op == "reshape":
            v = a[0].reshape(n.type.shape)
        elif op == "broadcast_to":
            v = a[0].expand(n.type.shape)
        elif op == "concat":
            v = torch.cat(a, dim=n.attr("axis"))
        elif op == "slice":
            v = a[0].narrow(n.attr("axis"), n.attr("start"), n.attr("stop") - n.attr("start"))
        elif op == "gather":
            v = a[0][a[1].long()]
        elif op == "softmax":
            v = torch.softmax(a[0], dim=n.attr("axis"))
        elif op == "repeat_interleave":
            v = a[0].repeat_interleave(n.attr("repeats"), dim=n.attr("axis"))
        elif op in ("to_device", "to_host", "identity"):
            v = a[0]
        else:
            raise AssertionError(f"torch_eval: no mapping for {op}")
        vals.append(v)
    return [vals[o] for o in graph.outputs]


def with_loss(g: GraphBuilder, y: int) -> Graph:
    """Seal ``g`` as a scalar loss ``sum(y * r)``, ``r`` a new first param of ``y``'s shape (a
    random cotangent: each gradient is then exactly the VJP of ``r``)."""
    t = g.t(y)
    new = GraphBuilder(g.name)
    new.param("r", t.dtype, t.shape)
    for name, pt in g.params:
        new.param(name, pt.dtype, pt.shape, pt.device)
    for n in g.nodes[len(g.params) :]:
        new.nodes.append(Node(n.op, tuple(a + 1 for a in n.args), n.attrs, n.type))
    prod = new.binary("mul", y + 1, 0)
    flat = new.reshape(prod, (t.numel,)) if t.rank != 1 else prod
    return new.build(new.reduce("reduce_sum", flat, 0))


def central_differences(
    graph: Graph, arrays: list[np.ndarray], which: int, h: float = 1e-6
) -> np.ndarray:
    """d loss / d arrays[which] by central differences on the interpreter (f64)."""
    x = arrays[which]
    grad = np.zeros_like(x)
    for pos in np.ndindex(*x.shape):
        plus = [a.copy() for a in arrays]
        minus = [a.copy() for a in arrays]
        plus[which][pos] += h
        minus[which][pos] -= h
        (fp,) = evaluate(graph, *plus)
        (fm,) = evaluate(graph, *minus)
        grad[pos] = (float(fp) - float(fm)) / (2 * h)
    return grad
