"""Helpers for the checker's tests: environments from sources, a plain diagnostic renderer that
resolves node refs through the reader's span tables, and a numpy interpreter of graphs."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np

from kinac.check.env import InMemoryEnv, prelude_text
from kinac.diag.model import Diagnostic, NodeRef, Span
from kinac.pipeline_support import span_in
from kinac.reader.parse import parse_file
from kinac.tir.graph import Graph

ROOT = Path(__file__).resolve().parent.parent
PRELUDE = "@kinac/std/nn.kina"


class Workspace:
    """Sources, their parses and an in-memory checking environment."""

    def __init__(self, sources: dict[str, str], solve_cache: dict[Any, Any] | None = None) -> None:
        self.texts = dict(sources)
        self.texts.setdefault(PRELUDE, prelude_text())
        files = {p: parse_file(p, t) for p, t in self.texts.items()}
        self.env = InMemoryEnv(files, solve_cache=solve_cache)
        for p, pf in files.items():
            assert not pf.diagnostics, (p, pf.diagnostics)

    def resolve(self, loc: Span | NodeRef) -> Span | None:
        if isinstance(loc, Span):
            return loc
        pf = self.env.file(loc.file)
        return None if pf is None else span_in(pf, loc)

    def render(self, diags: list[Diagnostic] | tuple[Diagnostic, ...]) -> str:
        from kinac.diag.render import plain_text

        return plain_text(diags, self.resolve, self.texts.get)


def ws_sources(name: str) -> dict[str, str]:
    base = ROOT / "workspaces" / name
    return {p.relative_to(base).as_posix(): p.read_text() for p in base.rglob("*.kina")}


# ---------------------------------------------------------------- numpy graph interpreter

_NP = {
    "f64": np.float64,
    "f32": np.float32,
    "f16": np.float16,
    "bf16": np.float32,
    "i64": np.int64,
    "i32": np.int32,
    "bool": np.bool_,
}


def _erf(x: np.ndarray) -> np.ndarray:
    return np.vectorize(math.erf, otypes=[np.float64])(x)


# Each unary op's defining formula, evaluated in float64 IEEE arithmetic (numpy and ``math``).
# Why not PyTorch: at non-finite inputs it is not a reference. torch 2.13 CPU gives
# gelu(+inf) = nan for tensors of two or more elements (its vectorised erf path) and inf for a
# one-element tensor, so a test trusting it fails on a right answer. A formula cannot drift
# like that; where the formula itself is indeterminate (gelu(-inf) = -inf * 0, silu(-inf) =
# -inf / inf) the IEEE result, NaN, is the defined one (docs/language.md, "Activations at
# infinities"), as in PyTorch and JAX.
F64_UNARY: dict[str, Any] = {
    "neg": np.negative,
    "exp": np.exp,
    "log": np.log,
    "sqrt": np.sqrt,
    "rsqrt": lambda x: 1.0 / np.sqrt(x),
    "tanh": np.tanh,
    "sigmoid": lambda x: 1.0 / (1.0 + np.exp(-x)),
    "relu": lambda x: np.maximum(x, 0.0),
    "gelu": lambda x: 0.5 * x * (1.0 + _erf(x / math.sqrt(2.0))),
    "silu": lambda x: x / (1.0 + np.exp(-x)),
    "abs": np.abs,
    "recip": lambda x: 1.0 / x,
    "square": np.square,
    "erf": _erf,
    "log1p": np.log1p,
    "softplus": lambda x: np.maximum(x, 0.0) + np.log1p(np.exp(-np.abs(x))),
    "sin": np.sin,
    "cos": np.cos,
}


_BINARY: dict[str, Any] = {
    "add": np.add,
    "sub": np.subtract,
    "mul": np.multiply,
    "div": np.divide,
    "max": np.maximum,
    "min": np.minimum,
    "pow": np.power,
    "lt": np.less,
    "le": np.less_equal,
    "gt": np.greater,
    "ge": np.greater_equal,
    "eq": np.equal,
}


def run_graph(g: Graph, inputs: list[np.ndarray]) -> np.ndarray:
    """Evaluate a graph with numpy (f64 math, cast to each node's dtype); checks shapes."""
    vals: list[np.ndarray] = []
    for n in g.nodes:
        a = [vals[i] for i in n.args]
        op = n.op
        if op == "param":
            v = np.asarray(inputs[n.attr("index")])
        elif op == "const":
            v = np.asarray(n.attr("value"))
        elif op in F64_UNARY:
            v = F64_UNARY[op](a[0].astype(np.float64))
        elif op in _BINARY:
            v = _BINARY[op](a[0], a[1])
        elif op == "cast":
            v = a[0]
        elif op == "where":
            v = np.where(a[0], a[1], a[2])
        elif op.startswith("reduce_"):
            f = {"sum": np.sum, "mean": np.mean, "max": np.max, "min": np.min}[op[7:]]
            v = f(a[0], axis=n.attr("axis"), keepdims=n.attr("keepdims"))  # type: ignore[operator]
        elif op == "matmul":
            v = np.matmul(a[0], a[1])
        elif op == "transpose":
            v = np.transpose(a[0], n.attr("perm"))
        elif op in ("reshape", "broadcast_to"):
            v = (
                np.reshape(a[0], n.type.shape)
                if op == "reshape"
                else np.broadcast_to(a[0], n.type.shape)
            )
        elif op == "concat":
            v = np.concatenate(a, axis=n.attr("axis"))
        elif op == "slice":
            sl = [slice(None)] * a[0].ndim
            sl[n.attr("axis")] = slice(n.attr("start"), n.attr("stop"))
            v = a[0][tuple(sl)]
        elif op == "gather":
            v = a[0][a[1]]
        elif op == "softmax":
            x = a[0] - np.max(a[0], axis=n.attr("axis"), keepdims=True)
            ex = np.exp(x)
            v = ex / np.sum(ex, axis=n.attr("axis"), keepdims=True)
        elif op == "repeat_interleave":
            v = np.repeat(a[0], n.attr("repeats"), axis=n.attr("axis"))
        elif op == "iota":
            ax = n.attr("axis")
            shape = [1] * len(n.type.shape)
            shape[ax] = n.type.shape[ax]
            v = np.broadcast_to(np.arange(n.type.shape[ax]).reshape(shape), n.type.shape)
        elif op == "full":
            v = np.full(n.type.shape, n.attr("value"))
        elif op in ("to_device", "to_host"):
            v = a[0]
        else:
            raise AssertionError(f"unknown op {op}")
        with np.errstate(all="ignore"):
            v = np.asarray(v).astype(_NP[n.type.dtype])
        assert v.shape == n.type.shape, (op, v.shape, n.type.shape)
        vals.append(v)
    return vals[g.outputs[0]]
