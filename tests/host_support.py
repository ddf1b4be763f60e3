"""Shared helpers of the host back-end tests: compile once per session, evaluate with PyTorch.

``torch_eval`` is the differential reference: it runs a Graph op by op with PyTorch's own CPU
kernels (never with kinac code), so a kinac result that matches it matches PyTorch.
"""

from __future__ import annotations

import functools
import math
from typing import Any

import numpy as np
import torch
from check_support import F64_UNARY

from kinac.graph_build import compile_graph
from kinac.rt.host import HostEntry
from kinac.tir.graph import Graph, Node

TORCH_DTYPES = {
    "f64": torch.float64,
    "f32": torch.float32,
    "f16": torch.float16,
    "bf16": torch.bfloat16,
    "i64": torch.int64,
    "i32": torch.int32,
    "bool": torch.bool,
}


@functools.cache
def compiled(graph: Graph) -> HostEntry:
    """The graph compiled for this machine (cached for the test session)."""
    return compile_graph(graph)


def run(graph: Graph, *inputs: Any) -> tuple[np.ndarray, ...]:
    out = compiled(graph)(*inputs)
    return out if isinstance(out, tuple) else (out,)


def to_torch(a: np.ndarray, dtype: str) -> torch.Tensor:
    a = np.asarray(a)
    t = torch.from_numpy(a if a.flags.c_contiguous else a.copy())
    return t.view(torch.bfloat16) if dtype == "bf16" else t


def from_torch(t: torch.Tensor) -> np.ndarray:
    if t.dtype == torch.bfloat16:
        return t.contiguous().view(torch.int16).numpy().view(np.uint16)
    return t.contiguous().numpy()


def _reduce(n: Node, x: torch.Tensor) -> torch.Tensor:
    ax, keep = n.attr("axis"), bool(n.attr("keepdims"))
    if n.op == "reduce_sum":
        return torch.sum(x, dim=ax, keepdim=keep, dtype=x.dtype)
    if n.op == "reduce_mean":
        return torch.mean(x, dim=ax, keepdim=keep)
    if x.dtype == torch.bool:
        f = torch.any if n.op == "reduce_max" else torch.all
        return f(x, dim=ax, keepdim=keep)
    return (torch.amax if n.op == "reduce_max" else torch.amin)(x, dim=ax, keepdim=keep)


_UNARY = {
    "neg": torch.neg, "exp": torch.exp, "log": torch.log, "sqrt": torch.sqrt,
    "rsqrt": torch.rsqrt, "tanh": torch.tanh, "sigmoid": torch.sigmoid, "relu": torch.relu,
    "gelu": torch.nn.functional.gelu, "silu": torch.nn.functional.silu, "abs": torch.abs,
    "recip": torch.reciprocal, "square": torch.square, "erf": torch.erf, "log1p": torch.log1p,
    "softplus": torch.nn.functional.softplus, "sin": torch.sin, "cos": torch.cos,
}  # fmt: skip


def _binary(op: str, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    if a.dtype == torch.bool and op in ("add", "max", "mul", "min"):
        return {"add": a | b, "max": a | b, "mul": a & b, "min": a & b}[op]
    if op == "div" and not a.is_floating_point():
        return torch.div(a, b, rounding_mode="floor")
    f = {"add": torch.add, "sub": torch.sub, "mul": torch.mul, "div": torch.div}
    f |= {"max": torch.maximum, "min": torch.minimum, "pow": torch.pow}
    f |= {"lt": torch.lt, "le": torch.le, "gt": torch.gt, "ge": torch.ge, "eq": torch.eq}
    return f[op](a, b)  # type: ignore[operator]


def _node(g: Graph, n: Node, v: list[torch.Tensor], inputs: tuple[Any, ...]) -> torch.Tensor:
    op, t = n.op, n.type
    a = [v[i] for i in n.args]
    dt = TORCH_DTYPES[t.dtype]
    if op == "param":
        return to_torch(inputs[n.attr("index")], t.dtype)
    if op in ("const", "full"):
        return torch.full(t.shape, n.attr("value"), dtype=dt)
    if op == "iota":
        ax = n.attr("axis")
        r = torch.arange(t.shape[ax], dtype=dt)
        return r.reshape([-1 if i == ax else 1 for i in range(len(t.shape))]).expand(t.shape)
    if op in _UNARY:
        return _UNARY[op](a[0])
    if op == "cast":
        return a[0].to(dt)
    if op == "where":
        return torch.where(a[0], a[1], a[2])
    if op.startswith("reduce_"):
        return _reduce(n, a[0])
    if op == "matmul":
        return torch.matmul(a[0], a[1])
    if op == "transpose":
        return a[0].permute(n.attr("perm"))
    if op == "reshape":
        return a[0].reshape(t.shape)
    if op == "broadcast_to":
        return a[0].expand(t.shape)
    if op == "concat":
        return torch.cat(a, dim=n.attr("axis"))
    if op == "slice":
        s = n.attr("start")
        return a[0].narrow(n.attr("axis"), s, n.attr("stop") - s)
    if op == "gather":
        return a[0][a[1].long()]
    if op == "softmax":
        return torch.softmax(a[0], dim=n.attr("axis"))
    if op == "repeat_interleave":
        return torch.repeat_interleave(a[0], n.attr("repeats"), dim=n.attr("axis"))
    if op in ("to_device", "to_host"):
        return a[0]
    return _binary(op, a[0], a[1])


def f64_unary(op: str, x: np.ndarray, dtype: str) -> np.ndarray:
    """``op`` at ``x`` from its formula in float64, rounded to ``dtype`` (bf16 as bit patterns).

    The reference for special values (infinities, NaN, signed zeros, subnormals, overflow).
    """
    assert op in F64_UNARY, f"no float64 reference for {op!r}: add its formula to F64_UNARY"
    with np.errstate(all="ignore"):
        y = F64_UNARY[op](as_f64(x, dtype))
    return round_to(y, dtype)


def round_to(x: Any, dtype: str) -> np.ndarray:
    """Float values rounded to a Kina float dtype (bf16 as uint16 bit patterns)."""
    y = np.asarray(x, dtype=np.float64)
    with np.errstate(over="ignore"):  # overflow rounds to infinity, as it should
        if dtype == "bf16":
            return from_torch(torch.from_numpy(y.astype(np.float32)).to(torch.bfloat16))
        return np.asarray(y, dtype={"f64": np.float64, "f32": np.float32, "f16": np.float16}[dtype])


def torch_eval(graph: Graph, *inputs: Any) -> tuple[np.ndarray, ...]:
    """Evaluate ``graph`` with PyTorch (CPU) ops; bf16 in and out as uint16 bit patterns."""
    v: list[torch.Tensor] = []
    with torch.no_grad():
        for n in graph.nodes:
            v.append(_node(graph, n, v, inputs))
    return tuple(from_torch(v[o]) for o in graph.outputs)


def as_f64(a: np.ndarray, dtype: str) -> np.ndarray:
    if dtype == "bf16":
        return (a.astype(np.uint32) << 16).view(np.float32).astype(np.float64)
    return a.astype(np.float64)


def max_rel_err(got: np.ndarray, want: np.ndarray, dtype: str = "f32") -> float:
    """``max |got - want| / max |want|``: the error measure of the acceptance tests."""
    g, w = as_f64(got, dtype), as_f64(want, dtype)
    scale = float(np.max(np.abs(w))) or 1.0
    return float(np.max(np.abs(g - w))) / scale if g.size else 0.0


def assert_close(
    got: np.ndarray,
    want: np.ndarray,
    dtype: str,
    rtol: float,
    atol: float,
    scaled: bool = False,
    what: str = "",
) -> None:
    """Elementwise closeness with NaNs and infinities required to match exactly.

    ``scaled``: ``atol`` is relative to the largest magnitude (sums and products, whose
    rounding depends on the order of summation).
    """
    assert got.shape == want.shape, (got.shape, want.shape)
    if dtype in ("i32", "i64", "bool"):
        np.testing.assert_array_equal(got, want)
        return
    g, w = as_f64(got, dtype), as_f64(want, dtype)
    if scaled and w.size:
        finite = np.abs(w[np.isfinite(w)])
        atol *= max(1.0, float(finite.max()) if finite.size else 1.0)
    np.testing.assert_allclose(g, w, rtol=rtol, atol=atol, equal_nan=True, err_msg=what)


def randn(
    rng: np.random.Generator, shape: tuple[int, ...], dtype: str, scale: float = 1.0
) -> np.ndarray:
    """Random data of a Kina dtype (bf16 as rounded bit patterns)."""
    if dtype == "bool":
        return np.asarray(rng.random(shape) < 0.5)
    if dtype in ("i32", "i64"):
        return np.asarray(
            rng.integers(-20, 20, shape), dtype=np.int32 if dtype == "i32" else np.int64
        )
    x = np.asarray(rng.standard_normal(shape) * scale)
    if dtype == "bf16":
        return from_torch(torch.from_numpy(x.astype(np.float32)).to(torch.bfloat16))
    return np.asarray(x, dtype={"f64": np.float64, "f32": np.float32, "f16": np.float16}[dtype])


def glorot(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    """A weight of sensible scale (so activations stay O(1) through a model)."""
    fan_in = shape[0] if len(shape) == 2 else 1
    return (rng.standard_normal(shape) / math.sqrt(fan_in)).astype(np.float32)
