"""A numpy reference evaluator of a :class:`~kinac.tir.graph.Graph`.

It pins down what each op means on the host (the compiled code must agree with it, and tests
compare both against PyTorch): integer ``div`` is floor division and ``x // 0 == 0``; integer
``pow`` with a negative exponent truncates toward zero; float ``max``/``min`` propagate NaN;
float-to-int ``cast`` truncates toward zero, saturates, and maps NaN to 0; reductions of ints
stay in their dtype (wrapping). Elementwise primitives are not written here: each is its formula
from :mod:`kinac.prims.defs`, evaluated in float64 over :mod:`kinac.tir.np_algebra` and rounded
once to the node's dtype, so low-precision floats round after every op, as PyTorch does on the
CPU. At the boundary, bf16 arrays are ``uint16`` bit patterns (numpy has no
bf16) and f16 arrays are ``float16``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from kinac.dtypes import FLOAT_DTYPES
from kinac.prims.elementwise import Elementwise, apply, lookup
from kinac.tir.graph import Graph, Node
from kinac.tir.np_algebra import NumpyAlgebra

NP_DTYPES: dict[str, Any] = {
    "f64": np.float64,
    "f32": np.float32,
    "f16": np.float16,
    "bf16": np.uint16,
    "i64": np.int64,
    "i32": np.int32,
    "bool": np.bool_,
}


def bf16_to_f32(bits: np.ndarray) -> np.ndarray:
    """Widen bf16 bit patterns (uint16) to float32 values."""
    return (np.asarray(bits, dtype=np.uint16).astype(np.uint32) << 16).view(np.float32)


def f32_to_bf16(x: np.ndarray) -> np.ndarray:
    """Round float32 to bf16 bit patterns (nearest even, NaN kept quiet)."""
    f = np.asarray(x, dtype=np.float32)
    # ascontiguousarray makes a rank-0 array rank 1: keep the shape
    u = np.ascontiguousarray(f).view(np.uint32).reshape(f.shape).astype(np.uint64)
    rounded = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)
    nan = np.isnan(np.asarray(x, dtype=np.float32))
    return np.where(nan, ((u >> 16) | 0x40).astype(np.uint16), rounded)


def _compute_dtype(dt: str) -> Any:
    return np.float32 if dt in ("f16", "bf16") else NP_DTYPES[dt]


def _round(x: np.ndarray, dt: str) -> np.ndarray:
    """Round a compute-dtype value to what storing it as ``dt`` keeps."""
    if dt == "bf16":
        return bf16_to_f32(f32_to_bf16(x))
    if dt == "f16":
        return np.asarray(x, dtype=np.float32).astype(np.float16).astype(np.float32)
    return np.asarray(x).astype(NP_DTYPES[dt], copy=False)


_NP = NumpyAlgebra()


def _elementwise(d: Elementwise, a: list[np.ndarray], dt: str) -> np.ndarray:
    """``d``'s formula on numpy values: floats widened to float64, the result rounded once."""
    args = [x.astype(np.float64) if x.dtype.kind == "f" else x for x in a]
    with np.errstate(all="ignore"):  # IEEE results (inf, NaN) are the meaning, not errors
        r = np.asarray(apply(d, _NP, args))
        return r if d.kind == "compare" else _round(r, dt)


def _cast(x: np.ndarray, src: str, dst: str) -> np.ndarray:
    if dst == "bool":
        return x != 0
    target = _compute_dtype(dst)
    if src in FLOAT_DTYPES and dst in ("i32", "i64"):
        info = np.iinfo(target)
        with np.errstate(invalid="ignore"):
            t = np.trunc(np.nan_to_num(x.astype(np.float64), nan=0.0))
            out = np.clip(t, info.min, info.max).astype(target)
        # i64's max is 2^63 - 1, which float64 rounds to 2^63: saturate after the conversion
        return np.where(t >= 2.0**63, info.max, out).astype(target) if dst == "i64" else out
    return x.astype(target)


def _reduce(op: str, x: np.ndarray, axis: int, keep: bool) -> np.ndarray:
    if op == "reduce_sum":
        return np.sum(x, axis=axis, keepdims=keep, dtype=x.dtype)
    if op == "reduce_mean":
        return np.mean(x, axis=axis, keepdims=keep, dtype=x.dtype)
    if x.dtype == np.bool_:
        if op == "reduce_max":
            return np.any(x, axis=axis, keepdims=keep)
        return np.all(x, axis=axis, keepdims=keep)
    if op == "reduce_max":
        return np.max(x, axis=axis, keepdims=keep)
    return np.min(x, axis=axis, keepdims=keep)


def _eval_node(
    g: Graph, n: Node, vals: list[np.ndarray], inputs: tuple[np.ndarray, ...]
) -> np.ndarray:
    op, dt, shape = n.op, n.type.dtype, n.type.shape
    cd = _compute_dtype(dt)
    a = [vals[i] for i in n.args]
    if op == "param":
        x = np.asarray(inputs[n.attr("index")])
        return bf16_to_f32(x) if dt == "bf16" else x.astype(cd)
    if op in ("const", "full"):
        return _round(np.full(shape, n.attr("value"), dtype=cd), dt)
    if op == "iota":
        ax = n.attr("axis")
        r = np.arange(shape[ax]).reshape([-1 if i == ax else 1 for i in range(len(shape))])
        return _round(np.broadcast_to(r, shape).astype(cd), dt)
    d = lookup(op)
    if d is not None:
        return _elementwise(d, a, dt)
    if op == "cast":
        return _round(_cast(a[0], g.nodes[n.args[0]].type.dtype, dt), dt)
    if op == "where":
        return np.where(a[0], a[1], a[2])
    if op.startswith("reduce_"):
        return _round(_reduce(op, a[0], n.attr("axis"), bool(n.attr("keepdims"))), dt)
    if op == "matmul":
        return _round(np.matmul(a[0], a[1]), dt)
    if op == "transpose":
        return np.transpose(a[0], n.attr("perm"))
    if op in ("reshape", "broadcast_to"):
        f = np.reshape if op == "reshape" else np.broadcast_to
        return np.ascontiguousarray(f(a[0], shape)).reshape(shape)  # rank 0 stays rank 0
    if op == "concat":
        return np.concatenate(a, axis=n.attr("axis"))
    if op == "slice":
        sl = [slice(None)] * len(shape)
        sl[n.attr("axis")] = slice(n.attr("start"), n.attr("stop"))
        return a[0][tuple(sl)]
    if op == "gather":
        table, idx = a
        bad = (idx < 0) | (idx >= table.shape[0])
        if bad.any():
            pos = tuple(int(i) for i in np.argwhere(bad)[0])
            raise IndexError(
                f"gather index {int(idx[pos])} at {pos} is outside [0, {table.shape[0]})"
            )
        return table[idx]
    if op == "scatter_add":
        idx, src = a
        out = np.zeros(shape, dtype=cd)
        flat = idx.reshape(-1)
        ok = (flat >= 0) & (flat < shape[0])
        # np.add.at is unbuffered and goes in order: row p is added after row p - 1
        np.add.at(out, flat[ok], src.reshape(-1, shape[1])[ok].astype(cd))
        return _round(out, dt)
    if op == "softmax":
        ax = n.attr("axis")
        with np.errstate(invalid="ignore"):
            e = np.exp(a[0] - np.max(a[0], axis=ax, keepdims=True))
            return _round(e / np.sum(e, axis=ax, keepdims=True), dt)
    if op == "repeat_interleave":
        return np.repeat(a[0], n.attr("repeats"), axis=n.attr("axis"))
    if op in ("to_device", "to_host", "reshard"):  # reshard: the same global value
        return a[0]
    raise ValueError(f"interp: unknown op {op!r}")


def evaluate(graph: Graph, *inputs: np.ndarray) -> tuple[np.ndarray, ...]:
    """Evaluate ``graph`` on numpy ``inputs`` (one per param); returns one array per output."""
    assert len(inputs) == len(graph.params), "one input per param"
    vals: list[np.ndarray] = []
    for n in graph.nodes:
        vals.append(np.asarray(_eval_node(graph, n, vals, inputs)))
    outs = []
    for o in graph.outputs:
        t = graph.nodes[o].type
        v = vals[o]
        v = f32_to_bf16(v) if t.dtype == "bf16" else v.astype(NP_DTYPES[t.dtype])
        outs.append(np.ascontiguousarray(v).reshape(t.shape))
    return tuple(outs)
