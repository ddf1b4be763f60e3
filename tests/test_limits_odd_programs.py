"""Odd but well-typed programs build and run on the host without a traceback, and match numpy.

A seeded generator writes Kina defns at the edges lowering must handle: rank-0 tensors, size-1
axes that broadcast, bool and integer dtypes, reductions, views (transpose, reshape, slice,
concat), nesting as deep as the reader allows, and many parameters, at dims from 1 up. Each
program is checked, specialised, lowered, compiled and run through the Python API, and its
result is compared with the reference interpreter. Any exception other than a ``KinaError``
is a bug; so is a checked program that does not build. ``KINAC_ODD_PROGRAMS=N`` explores more.
"""

from __future__ import annotations

import os
import random
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pytest

import kinac
from kinac import pipeline
from kinac.pipeline_support import EntryKey
from kinac.reader.sexpr import MAX_DEPTH
from kinac.tir.interp import evaluate

COUNT = int(os.environ.get("KINAC_ODD_PROGRAMS", "12"))
FLOAT_UNARY = ("neg", "abs", "relu", "tanh", "sigmoid", "square", "exp")
ARITH = ("add", "sub", "mul", "max", "min")
NP = {"f32": np.float32, "f64": np.float64, "i32": np.int32, "i64": np.int64, "bool": np.bool_}


@dataclass
class Program:
    """A defn being generated: its parameters (name, dtype, dims) and dim values."""

    rng: random.Random
    dims: dict[str, int]
    params: list[tuple[str, str, tuple[str, ...]]] = field(default_factory=list)

    def param(self, dtype: str, shape: tuple[str, ...]) -> str:
        name = f"p{len(self.params)}"
        self.params.append((name, dtype, shape))
        return name

    def leaf(self, dtype: str, shape: tuple[str, ...], loose: bool = True) -> str:
        """A parameter, a literal, or a broadcasting parameter with size-1 axes (or fewer);
        exactly ``shape`` unless ``loose``."""
        r = self.rng.random() if loose else 1.0
        if r < 0.2 and dtype != "bool":
            return str(self.rng.choice([1, 2, -3])) + (".5" if dtype.startswith("f") else "")
        if r < 0.45 and shape:
            cut = self.rng.randrange(len(shape) + 1)  # drop leading axes, or make some 1
            sub = tuple("1" if self.rng.random() < 0.4 else d for d in shape[cut:])
            return self.param(dtype, sub)
        return self.param(dtype, shape)

    def side(self, depth: int) -> int:
        """The depth of a second operand: shallow, so a deep program is a spine, not a tree
        (a full binary tree 60 deep would never be written down)."""
        return min(depth, self.rng.randint(1, 3))

    def expr(self, dtype: str, shape: tuple[str, ...], depth: int, loose: bool = True) -> str:
        """An expression of ``dtype`` and ``shape`` nested at most ``depth`` lists deep; a
        tensor of exactly ``shape`` unless ``loose`` (a weak literal or a broadcast operand)."""
        rng = self.rng
        x = loose  # the spine keeps the caller's exactness; other operands are loose
        if depth <= 1:
            return self.leaf(dtype, shape, loose)
        r = rng.random()
        if dtype == "bool":
            if r < 0.5:
                src = rng.choice(["f32", "i32"])
                op = rng.choice(["lt", "le", "gt", "ge", "eq"])
                a = self.expr(src, shape, depth - 1, x)
                return f"({op} {a} {self.expr(src, shape, self.side(depth))})"
            return self.leaf(dtype, shape, loose)
        if r < 0.12:  # where
            c = self.expr("bool", shape, self.side(depth))
            # a strong branch: `(where c 1 2)` is f32 to the checker, whatever meets it
            a, b = (
                self.expr(dtype, shape, depth - 1, False),
                self.expr(dtype, shape, self.side(depth)),
            )
            return f"(where {c} {a} {b})"
        if r < 0.22 and len(shape) < 3:  # a reduction over a new axis
            n = rng.choice(["1", "R"])
            ax = rng.randrange(len(shape) + 1)
            inner = shape[:ax] + (n,) + shape[ax:]
            red = rng.choice(["sum", "max"] if dtype != "bool" else ["max"])
            return f"({red} {self.expr(dtype, inner, depth - 1, False)} :axis {ax})"
        if r < 0.3 and len(shape) >= 2:
            perm = list(range(len(shape)))
            rng.shuffle(perm)
            src = tuple(shape[perm.index(i)] for i in range(len(shape)))  # type: ignore[assignment]
            return f"(transpose {self.expr(dtype, src, depth - 1, False)} :perm [{' '.join(map(str, perm))}])"  # type: ignore[arg-type]
        if r < 0.36 and shape:
            return (
                f"(reshape {self.expr(dtype, shape[::-1], depth - 1, False)} [{' '.join(shape)}])"
            )
        if r < 0.42 and shape and shape[-1] != "1":
            a = self.expr(dtype, shape, depth - 1, False)
            b = self.expr(dtype, shape, self.side(depth), False)
            both = f"(concat [{a} {b}] :axis {len(shape) - 1})"
            return f"(slice {both} :axis {len(shape) - 1} :start 1 :stop (+ {shape[-1]} 1))"
        if r < 0.5:
            src = rng.choice(["f32", "f64", "i32", "i64"])
            return f"(cast {self.expr(src, shape, depth - 1, False)} :to {dtype})"
        if r < 0.7 and dtype.startswith("f"):
            op = rng.choice(FLOAT_UNARY)
            return f"({op} {self.expr(dtype, shape, depth - 1, x)})"
        op = rng.choice(ARITH)
        a, b = self.expr(dtype, shape, depth - 1, x), self.expr(dtype, shape, self.side(depth))
        return f"({op} {a} {b})" if rng.random() < 0.5 else f"({op} {b} {a})"


Params = list[tuple[str, str, tuple[str, ...]]]


def generate(seed: int) -> tuple[str, dict[str, int], Params]:
    """The source of defn ``odd``, its dims and its parameters."""
    rng = random.Random(seed)
    dims = {"N": rng.choice([1, 1, 2, 3, 17]), "M": rng.choice([1, 4, 5]), "R": rng.choice([1, 3])}
    prog = Program(rng, dims)
    rank = rng.choice([0, 1, 2, 2, 3])
    shape = tuple(rng.choice(["N", "M", "1"]) for _ in range(rank))
    dtype = rng.choice(["f32", "f32", "f64", "i32", "i64", "bool"])
    deep = MAX_DEPTH // 2 - 3  # a concat inside a slice nests two lists per level
    depth = rng.choice([3, 5, 8, deep]) if seed % 4 else deep
    body = prog.expr(dtype, shape, depth, loose=False)
    for _ in range(rng.choice([0, 0, 30])):  # many parameters: an unused tail is fine too
        extra = prog.param("f32", shape)
        if dtype == "f32":
            body = f"(add {body} {extra})"

    def ty(dt: str, s: tuple[str, ...]) -> str:
        return f"(tensor {dt} [{' '.join(s)}])" if s else dt

    params = " ".join(f"({n} : {ty(dt, s)})" for n, dt, s in prog.params)
    used = {d for _, _, s in prog.params for d in s if d in dims}
    src = f"(defn odd [{params}] -> {ty(dtype, shape)}\n  {body})\n"
    return src, {k: v for k, v in dims.items() if k in used}, prog.params


def _inputs(params: Params, dims: dict[str, int], seed: int) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    out = []
    for _, dt, s in params:
        shape = tuple(dims.get(d, 1) for d in s)
        if dt == "bool":
            out.append(rng.random(shape) < 0.5)
        elif dt.startswith("i"):
            out.append(rng.integers(-5, 6, size=shape).astype(NP[dt]))
        else:
            out.append(rng.standard_normal(shape).astype(NP[dt]))
    return out


@pytest.mark.parametrize("seed", range(COUNT))
def test_odd_program_builds_runs_and_matches(seed: int, tmp_path: Path) -> None:
    src, dims, params = generate(seed)
    path = tmp_path / "odd.kina"
    path.write_text(src)
    try:
        f = kinac.compile(str(path), "odd", no_cache=True)
    except kinac.KinaCompileError as e:  # the generator strays: fine, if it says why
        assert "error[" in str(e), str(e)
        pytest.skip(f"not well-typed: {str(e).splitlines()[0]}")
    ins = _inputs(params, dims, seed)
    with np.errstate(all="ignore"):
        got = np.asarray(f(*ins))
        key = EntryKey("odd.kina", "odd", tuple(sorted(dims.items())), (), "cpu")
        graph = pipeline.entry_graph(f.sess.db, key).graph
        (want,) = evaluate(graph, *ins)
    np.testing.assert_allclose(got.astype(np.float64), np.asarray(want).astype(np.float64),
                               rtol=2e-5, atol=1e-5, equal_nan=True, err_msg=src)  # fmt: skip
