"""The cases of the GPU differential suite (``tests/test_gpu_parity.py``) and its error measure.

One :class:`Case` is a Graph with several outputs (so one compile covers many primitives), its
inputs, and per output the primitive's name and dtype. Cases cover every elementwise primitive
of :mod:`kinac.prims` in every dtype it lowers for, reductions, softmax, matmul, casts between
all dtypes and ``where``, at odd sizes (1, 3, 7, 129, non-multiples of the tiles), with special
values (0, -0, +-inf, NaN) among the float inputs. Errors are measured in ulps of the output
dtype against the reference interpreter (float64, then one rounding) and against the host
back end; integers and bools must be equal.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass, field

import numpy as np

from kinac.ir.testing import GraphBuilder
from kinac.prims.elementwise import ELEMENTWISE
from kinac.tir.graph import Graph
from kinac.tir.interp import bf16_to_f32, f32_to_bf16

FLOATS = ("f64", "f32", "f16", "bf16")
INTS = ("i64", "i32")
ALL = (*FLOATS, *INTS, "bool")
SHAPES = ((1,), (3,), (7,), (129,), (3, 67))
MANTISSA = {"f64": 52, "f32": 23, "f16": 10, "bf16": 7}
MIN_EXP = {"f64": -1022, "f32": -126, "f16": -14, "bf16": -126}
SPECIALS = (0.0, -0.0, math.inf, -math.inf, math.nan)
# ulp bounds against the float64 reference: f16/bf16 compute in f32 and round once; f32 code
# uses the GPU's 2-ulp ex2 and division inside composites (the host's own tests allow erf
# 1e-6 and gelu 8e-6 absolute, i.e. 8 and 67 ulps of 1); f64 code has no approximation.
BOUND = {"f64": 2.0, "f32": 4.0, "f16": 1.0, "bf16": 1.0}
EXTRA = {
    "f32": {
        "sigmoid": 3.0,
        "silu": 3.0,
        "softplus": 2.0,
        "gelu": 12.0,
        "erf": 4.0,
        "tanh": 1.0,
        "softmax": 4.0,
    },
    "f64": {"sigmoid": 1.0, "silu": 1.0, "softplus": 1.0, "tanh": 1.0, "softmax": 2.0},
}
# where the formula cancels (1 + erf(x) for x < -1): ulps of max(|ref|, 1), as the host's tests
ABSOLUTE = ("erf", "gelu")
# sums of mixed signs cancel, and a GPU sums in another order than numpy: ulps of the output's
# largest value, plus the rounding of the terms (a few per term of the K <= 129 summed)
SCALED = {"reduce_sum": 16.0, "reduce_mean": 16.0, "matmul": 16.0}


@dataclass
class Case:
    """A graph, its inputs, and per output: (row label, its dtype column, the output's dtype)."""

    graph: Graph
    inputs: list[np.ndarray]
    outputs: list[tuple[str, str, str]] = field(default_factory=list)


def accepted(kind: str, name: str) -> tuple[str, ...]:
    """The dtypes an elementwise primitive lowers for (as the checker's kinds say)."""
    if kind == "float":
        return FLOATS
    if kind == "numeric":
        return (*FLOATS, *INTS)
    if kind == "compare":
        return ALL if name == "eq" else (*FLOATS, *INTS)
    return (*FLOATS, *INTS)  # arith: bool has only `eq` (K0602 otherwise)


def values(rng: np.random.Generator, shape: tuple[int, ...], dt: str, op: str = "") -> np.ndarray:
    """Random inputs of ``dt`` (bf16 as uint16 bits), float ones with the special values."""
    n = math.prod(shape)
    if dt == "bool":
        return rng.random(shape) < 0.5
    if dt in INTS:
        lo = 0 if op == "pow" else -9
        return rng.integers(lo, 10, size=shape).astype(np.int64 if dt == "i64" else np.int32)
    x = rng.standard_normal(n) * 3
    if n >= 7:
        x[: len(SPECIALS)] = SPECIALS
    x = x.reshape(shape)
    if dt == "bf16":
        return f32_to_bf16(x.astype(np.float32))
    return x.astype({"f64": np.float64, "f32": np.float32, "f16": np.float16}[dt])


def to_f64(a: np.ndarray, dt: str) -> np.ndarray:
    a = np.asarray(a)
    return bf16_to_f32(a).astype(np.float64) if dt == "bf16" else a.astype(np.float64)


def ulp_error(got: np.ndarray, want: np.ndarray, dt: str, floor: float = 0.0) -> float:
    """Max error in ulps of ``dt`` (of ``max(|want|, floor)``); NaN against NaN and equal values
    count 0; integers and bools: 0 if equal, else inf."""
    if dt not in FLOATS:
        return 0.0 if np.array_equal(np.asarray(got), np.asarray(want)) else math.inf
    g, w = to_f64(got, dt), to_f64(want, dt)
    same = (np.isnan(g) & np.isnan(w)) | (g == w)
    mag = np.maximum(np.abs(np.where(np.isfinite(w), w, 0.0)), floor)
    e = np.floor(np.log2(np.maximum(mag, 2.0 ** MIN_EXP[dt])))
    with np.errstate(invalid="ignore"):
        err = np.abs(g - w) / np.exp2(e - MANTISSA[dt])
    err = np.where(same, 0.0, np.nan_to_num(err, nan=np.inf, posinf=np.inf))
    return float(np.max(err)) if err.size else 0.0


def bound(prim: str, dt: str) -> float:
    if dt not in FLOATS:
        return 0.0
    scaled = SCALED.get(prim, 0.0) if dt in ("f64", "f32") else float(prim in SCALED)
    return BOUND[dt] + EXTRA.get(dt, {}).get(prim, 0.0) + scaled


def floor_of(prim: str, ref: np.ndarray, dt: str) -> float:
    """The magnitude below which errors are measured in absolute terms (see ABSOLUTE, SCALED)."""
    if prim in SCALED and dt in FLOATS:
        r = to_f64(ref, dt)
        r = r[np.isfinite(r)]
        return float(np.max(np.abs(r))) if r.size else 0.0
    return 1.0 if prim in ABSOLUTE else 0.0


def elementwise_cases(shapes: tuple[tuple[int, ...], ...] = SHAPES) -> Iterator[Case]:
    """Per (dtype, shape): one graph applying every elementwise primitive that takes ``dtype``."""
    for dt in ALL:
        for k, shape in enumerate(shapes):
            rng = np.random.default_rng(ALL.index(dt) * 10 + k)
            g = GraphBuilder(f"ew_{dt}_{k}")
            x, y = g.param("x", dt, shape), g.param("y", dt, shape)
            e = g.param("e", dt, shape)  # pow's exponents (small, for integers >= 0)
            outs, names = [], []
            for name, d in ELEMENTWISE.items():
                if dt not in accepted(d.kind, name):
                    continue
                args = [x] if d.arity == 1 else [x, e if name == "pow" else y]
                outs.append(g.unary(name, x) if d.arity == 1 else g.binary(name, *args))
                names.append((name, dt, "bool" if d.kind == "compare" else dt))
            if not outs:
                continue
            ins = [values(rng, shape, dt), values(rng, shape, dt), values(rng, shape, dt, "pow")]
            yield Case(g.build(*outs), ins, names)


def structural_cases() -> Iterator[Case]:
    """Reductions, softmax, matmul, casts between every pair of dtypes, ``where``."""
    for dt in (*FLOATS, *INTS):
        rng = np.random.default_rng(len(dt) * 7 + ALL.index(dt))
        g = GraphBuilder(f"red_{dt}")
        x = g.param("x", dt, (3, 129))
        outs, names = [], []
        kinds = ("sum", "mean", "max", "min") if dt in FLOATS else ("sum", "max", "min")
        for kind in kinds:
            for axis in (0, 1):
                outs.append(g.reduce(f"reduce_{kind}", x, axis))
                names.append((f"reduce_{kind}", dt, dt))
        if dt in FLOATS:
            outs.append(g.softmax(x, 1))
            names.append(("softmax", dt, dt))
        ins = [values(rng, (3, 129), dt)]
        if dt in FLOATS:  # finite inputs: a reduction over inf and NaN says little
            ins = [values(rng, (3, 129), dt)]
            f = to_f64(ins[0], dt)
            f[~np.isfinite(f)] = 0.5
            ins = [f32_to_bf16(f.astype(np.float32)) if dt == "bf16" else f.astype(ins[0].dtype)]
        yield Case(g.build(*outs), ins, names)
    for dt in FLOATS:
        rng = np.random.default_rng(11 + FLOATS.index(dt))
        g = GraphBuilder(f"mm_{dt}")
        a, b = g.param("a", dt, (3, 7)), g.param("b", dt, (7, 129))
        c, d = g.param("c", dt, (2, 5, 7)), g.param("d", dt, (2, 7, 3))
        outs = [g.matmul(a, b), g.matmul(c, d)]
        ins = [_finite(rng, s, dt) for s in ((3, 7), (7, 129), (2, 5, 7), (2, 7, 3))]
        yield Case(g.build(*outs), ins, [("matmul", dt, dt), ("matmul", dt, dt)])
    for src in ALL:
        rng = np.random.default_rng(23 + ALL.index(src))
        g = GraphBuilder(f"cast_{src}")
        x = g.param("x", src, (129,))
        outs = [g.cast(x, dst) for dst in ALL]
        yield Case(
            g.build(*outs), [values(rng, (129,), src)], [(f"cast to {d}", src, d) for d in ALL]
        )
    for dt in ALL:
        rng = np.random.default_rng(31 + ALL.index(dt))
        g = GraphBuilder(f"where_{dt}")
        c, a, b = g.param("c", "bool", (7, 3)), g.param("a", dt, (7, 3)), g.param("b", dt, (7, 3))
        ins = [values(rng, (7, 3), "bool"), values(rng, (7, 3), dt), values(rng, (7, 3), dt)]
        yield Case(g.build(g.where(c, a, b)), ins, [("where", dt, dt)])


def values_finite(rng: np.random.Generator, shape: tuple[int, ...], dt: str) -> np.ndarray:
    """Standard normal inputs of a float ``dt`` (bf16 as uint16 bits)."""
    return _finite(rng, shape, dt)


def _finite(rng: np.random.Generator, shape: tuple[int, ...], dt: str) -> np.ndarray:
    x = rng.standard_normal(shape)
    if dt == "bf16":
        return f32_to_bf16(x.astype(np.float32))
    return x.astype({"f64": np.float64, "f32": np.float32, "f16": np.float16}[dt])


def table(rows: dict[tuple[str, str], tuple[float, float, bool]], title: str) -> str:
    """The markdown table: primitive, dtype, max error (ulps) vs reference and vs host, pass."""
    lines = [f"## {title}", "", "| primitive | dtype | max err vs f64 ref (ulp) | "
             "max err vs host (ulp) | pass |", "|---|---|---|---|---|"]  # fmt: skip
    for (prim, dt), (eref, ehost, ok) in sorted(rows.items()):
        host = "-" if ehost != ehost else f"{ehost:.3g}"
        lines.append(f"| {prim} | {dt} | {eref:.3g} | {host} | {'yes' if ok else 'NO'} |")
    return "\n".join(lines) + "\n"
