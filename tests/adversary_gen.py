"""Random small valid Kina programs with an independent PyTorch float64 reference.

The adversary tests (``tests/test_adversary_*.py``) draw a program with hypothesis, write it as
Kina source, and compare what kinac computes (host, emulated GPU, gradients, simulated mesh)
with the reference this module evaluates from the same random tree, never from kinac's graph:
a checker, specialisation or lowering bug shows up as a difference.

Dims are either literals or dimension variables bound from the arguments (``N0``, ``N1``, …);
a variable dim that is sliced gets a ``where`` bound, a merged pair of dims is written as their
product so that reshapes stay provable. Each op's reference result is rounded to the program's
dtype (kinac computes op by op in that dtype), so tolerances only cover summation order and
the rounding of one op.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

TD = {"f64": torch.float64, "f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16}
SIZES = (1, 2, 3, 4, 5, 17)
INTS = {"i32": np.int32, "i64": np.int64}
# what an integer program may use: no float primitives (K0602), no float literals (K0603)
INT_KINDS = ("binary", "reduce", "transpose", "reshape", "slice", "matmul", "where", "concat",
             "repeat", "let", "combine", "dimval")  # fmt: skip


@dataclass(frozen=True)
class Dim:
    """One axis: its value, how the source writes it, and the dims a product merged."""

    val: int
    expr: str
    parts: tuple[Dim, ...] = ()


@dataclass
class Node:
    src: str
    shape: tuple[Dim, ...]
    ev: Any  # (env: dict[str, torch.Tensor]) -> torch.Tensor (float64)
    is_param: bool = False


@dataclass
class Prog:
    dtype: str
    dtype_var: bool
    params: list[tuple[str, tuple[Dim, ...], str]] = field(default_factory=list)
    wheres: list[str] = field(default_factory=list)
    uses_prelude: bool = False
    body: Node | None = None
    nvars: int = 0
    var_mode: bool = False
    ops: list[str] = field(default_factory=list)
    via_call: bool = False  # the body in a callee defn, called with the parameters

    @property
    def tname(self) -> str:
        return "T" if self.dtype_var else self.dtype

    def rd(self, t: torch.Tensor) -> torch.Tensor:
        """Round a float64 value to the program's dtype (and back to float64); integers stay
        exact (the generated values stay far below 2^31)."""
        if self.dtype in INTS:
            return t
        return t.to(TD[self.dtype]).to(torch.float64)

    def source(self, name: str = "f") -> str:
        assert self.body is not None
        ps = " ".join(
            f"({n} : (tensor {dt if dt != 'T' else self.tname} [{' '.join(d.expr for d in s)}]))"
            for n, s, dt in self.params
        )
        res = self.body.shape
        rt = self.tname if not res else f"(tensor {self.tname} [{' '.join(d.expr for d in res)}])"
        wh = f"\n  (where {' '.join(self.wheres)})" if self.wheres else ""
        imp = '(import "std/nn.kina")\n' if self.uses_prelude else ""
        if not self.via_call:
            return f"{imp}(defn {name} [{ps}] -> {rt}{wh}\n  {self.body.src})\n"

        # the body in a callee whose parameters and dims have other names: the call binds
        # them by position and instantiates its dims (and where clauses) from the arguments
        def callee(text: str) -> str:
            return re.sub(r"\bN(\d+)\b", r"M\1", re.sub(r"\bp(\d+)\b", r"q\1", text))

        args = " ".join(n for n, _, _ in self.params)
        return (
            f"{imp}(defn {name}_callee [{callee(ps)}] -> {callee(rt)}{callee(wh)}\n"
            f"  {callee(self.body.src)})\n"
            f"(defn {name} [{ps}] -> {rt}{wh}\n  ({name}_callee {args}))\n"
        )

    def inputs(self, seed: int) -> list[np.ndarray]:
        """Arguments (bf16 as uint16 bit patterns), in parameter order."""
        rng = np.random.default_rng(seed)
        out = []
        for _, s, dt in self.params:
            shape = tuple(d.val for d in s)
            if dt == "bool":
                out.append(np.asarray(rng.random(shape) < 0.6))
                continue
            if self.dtype in INTS:
                out.append(rng.integers(-5, 6, shape).astype(INTS[self.dtype]))
                continue
            x = torch.from_numpy(rng.standard_normal(shape)).to(TD[self.dtype])
            out.append(
                x.view(torch.int16).numpy().view(np.uint16) if self.dtype == "bf16" else x.numpy()
            )
        return out

    def env(self, inputs: list[np.ndarray]) -> dict[str, torch.Tensor]:
        e = {}
        for (n, _, dt), a in zip(self.params, inputs, strict=True):
            t = torch.from_numpy(np.array(a, copy=True))
            if dt == "bool":
                e[n] = t
            elif self.dtype == "bf16":
                e[n] = t.view(torch.bfloat16).to(torch.float64)
            elif self.dtype in INTS:
                e[n] = t.to(torch.float64)
            else:
                e[n] = t.to(torch.float64)
        return e

    def reference(self, inputs: list[np.ndarray]) -> torch.Tensor:
        return self.reference_env(self.env(inputs))

    def reference_env(self, env: dict[str, torch.Tensor]) -> torch.Tensor:
        """The body at ``env`` (float64; differentiable where the ops are)."""
        assert self.body is not None
        return self.body.ev(env)


class Gen:
    """Draws one program; ``draw`` is hypothesis's."""

    def __init__(
        self, draw: Any, dtype: str, var_mode: bool, dtype_var: bool, sizes: tuple[int, ...] = SIZES
    ) -> None:
        self.draw = draw
        self.sizes = sizes
        self.p = Prog(dtype, dtype_var, var_mode=var_mode)
        self.vars: dict[int, list[Dim]] = {}

    # ------------------------------------------------------------------ dims
    def dim(self, val: int) -> Dim:
        if val == 1 or not self.p.var_mode or self.draw(st.integers(0, 4)) == 0:
            return Dim(val, str(val))
        pool = self.vars.setdefault(val, [])
        if pool and self.draw(st.booleans()):
            return pool[0]
        d = Dim(val, f"N{self.p.nvars}")
        self.p.nvars += 1
        pool.append(d)
        return d

    def new_shape(self, rank: int) -> tuple[Dim, ...]:
        return tuple(self.dim(self.draw(st.sampled_from(self.sizes))) for _ in range(rank))

    def param(self, shape: tuple[Dim, ...], dt: str = "T") -> Node:
        name = f"p{len(self.p.params)}"
        self.p.params.append((name, shape, dt))
        return Node(name, shape, lambda e, n=name: e[n], is_param=True)

    # ------------------------------------------------------------------ ops
    def node(self, depth: int) -> Node:
        if depth == 0:
            return self.param(self.new_shape(self.draw(st.integers(1, 3))))
        x = self.node(depth - 1)
        kinds = ["unary", "binary", "reduce", "transpose", "reshape", "slice", "matmul"]
        kinds += ["softmax", "where", "concat", "repeat", "let", "attention", "cast", "combine"]
        kinds += ["dimval"]
        if self.p.dtype in INTS:
            kinds = list(INT_KINDS)
        k = self.draw(st.sampled_from(kinds))
        self.p.ops.append(k)
        return getattr(self, "op_" + k)(x)

    def op_unary(self, x: Node) -> Node:
        op = self.draw(
            st.sampled_from(
                ["neg", "exp", "tanh", "sigmoid", "relu", "gelu", "silu", "abs", "square",
                 "sin", "cos", "erf", "softplus", "sqrt", "log", "rsqrt", "recip"]
            )
        )  # fmt: skip
        fs = {
            "neg": torch.neg, "exp": torch.exp, "tanh": torch.tanh, "sigmoid": torch.sigmoid,
            "relu": torch.relu, "gelu": torch.nn.functional.gelu,
            "silu": torch.nn.functional.silu, "abs": torch.abs, "square": torch.square,
            "sin": torch.sin, "cos": torch.cos, "erf": torch.erf,
            "softplus": torch.nn.functional.softplus, "sqrt": torch.sqrt, "log": torch.log,
            "rsqrt": torch.rsqrt, "recip": torch.reciprocal,
        }  # fmt: skip
        f = fs[op]
        if op in ("sqrt", "log", "rsqrt", "recip"):
            # keep the domain away from 0 and negatives (a sign flip at rounding is not a bug)
            inner = f"(add (abs {x.src}) 0.5)"
            return Node(
                f"({op} {inner})",
                x.shape,
                lambda e: self.p.rd(f(self.p.rd(self.p.rd(torch.abs(x.ev(e))) + 0.5))),
            )
        return Node(f"({op} {x.src})", x.shape, lambda e: self.p.rd(f(x.ev(e))))

    def bshape(self, s: tuple[Dim, ...]) -> tuple[Dim, ...]:
        """A shape that broadcasts against ``s``: a suffix, some dims 1, maybe one more axis."""
        k = self.draw(st.integers(0, len(s)))
        out = tuple(Dim(1, "1") if self.draw(st.integers(0, 2)) == 0 else d for d in s[k:])
        return out

    def op_binary(self, x: Node) -> Node:
        ints = self.p.dtype in INTS
        ops = (
            ["add", "sub", "mul", "max", "min"]
            if ints
            else ["add", "sub", "mul", "div", "max", "min", "pow"]
        )
        op = self.draw(st.sampled_from(ops))
        flip = self.draw(st.booleans())
        if self.draw(st.integers(0, 3)) == 0:
            y = Node(
                str(self.draw(st.sampled_from([2, -1, 3] if ints else [2, 0.5, -1.5, 3]))), (), None
            )
            yv = float(y.src)
            y.ev = lambda e: torch.tensor(yv, dtype=torch.float64)
        else:
            y = self.param(self.bshape(x.shape))
        a, b = (y, x) if flip else (x, y)
        out = x.shape if len(x.shape) >= len(y.shape) else y.shape
        fs: dict[str, Callable[..., Any]] = {
            "add": torch.add, "sub": torch.sub, "mul": torch.mul, "div": torch.div,
            "max": torch.maximum, "min": torch.minimum,
        }  # fmt: skip
        if op == "pow":
            # base |a| + 0.5, exponent b: both real-valued
            src = f"(pow (add (abs {a.src}) 0.5) {b.src})"

            def ev(e: dict[str, torch.Tensor]) -> torch.Tensor:
                r = self.p.rd
                return r(torch.pow(r(r(torch.abs(a.ev(e))) + 0.5), b.ev(e)))

            return Node(src, out, ev)
        if op == "div":
            src = f"(div {a.src} (add (abs {b.src}) 0.5))"
            return Node(
                src, out, lambda e: self.p.rd(a.ev(e) / self.p.rd(self.p.rd(b.ev(e).abs()) + 0.5))
            )
        f = fs[op]
        return Node(f"({op} {a.src} {b.src})", out, lambda e: self.p.rd(f(a.ev(e), b.ev(e))))

    def axis(self, rank: int) -> tuple[int, int]:
        ax = self.draw(st.integers(0, rank - 1))
        return ax, (ax - rank if self.draw(st.booleans()) else ax)

    def op_reduce(self, x: Node) -> Node:
        if not x.shape:
            return x
        op = self.draw(
            st.sampled_from(
                ["sum", "max", "min"] if self.p.dtype in INTS else ["sum", "mean", "max", "min"]
            )
        )
        ax, written = self.axis(len(x.shape))
        keep = self.draw(st.booleans())
        shape = tuple(
            Dim(1, "1") if i == ax else d for i, d in enumerate(x.shape) if keep or i != ax
        )
        kw = " :keepdims true" if keep else ""

        def ev(e: dict[str, torch.Tensor]) -> torch.Tensor:
            v = x.ev(e)
            if op == "sum":
                r = v.sum(ax, keepdim=keep)
            elif op == "mean":
                r = v.mean(ax, keepdim=keep)
            elif op == "max":
                r = v.amax(ax, keepdim=keep)
            else:
                r = v.amin(ax, keepdim=keep)
            return self.p.rd(r)

        return Node(f"({op} {x.src} :axis {written}{kw})", shape, ev)

    def op_transpose(self, x: Node) -> Node:
        if len(x.shape) < 2:
            return x
        perm = tuple(self.draw(st.permutations(range(len(x.shape)))))
        return Node(
            f"(transpose {x.src} :perm [{' '.join(map(str, perm))}])",
            tuple(x.shape[p] for p in perm),
            lambda e: x.ev(e).permute(perm),
        )

    def op_reshape(self, x: Node) -> Node:
        s = list(x.shape)
        if not self.p.var_mode:
            n = math.prod(d.val for d in s)
            divs = [d for d in range(1, n + 1) if n % d == 0]
            a = self.draw(st.sampled_from(divs))
            vals = self.draw(st.sampled_from([(n,), (a, n // a), (n // a, 1, a), (1, a, n // a)]))
            new = tuple(Dim(v, str(v)) for v in vals)
        else:
            k = self.draw(st.integers(0, 2))
            if k == 0 and len(s) >= 2:  # merge two adjacent dims
                i = self.draw(st.integers(0, len(s) - 2))
                a, b = s[i], s[i + 1]
                if a.val == 1:
                    m = b
                elif b.val == 1:
                    m = a
                elif a.expr.isdigit() and b.expr.isdigit():
                    m = Dim(a.val * b.val, str(a.val * b.val))
                else:
                    m = Dim(a.val * b.val, f"(* {a.expr} {b.expr})", (a, b))
                s[i : i + 2] = [m]
            elif k == 1 and any(d.parts for d in s):  # split a merged dim back
                i = next(i for i, d in enumerate(s) if d.parts)
                s[i : i + 1] = list(s[i].parts)
            else:  # insert a 1
                s.insert(self.draw(st.integers(0, len(s))), Dim(1, "1"))
            new = tuple(s)
        shape = tuple(d.val for d in new)
        return Node(
            f"(reshape {x.src} [{' '.join(d.expr for d in new)}])",
            new,
            lambda e: x.ev(e).reshape(shape),
        )

    def op_slice(self, x: Node) -> Node:
        cands = [i for i, d in enumerate(x.shape) if d.val > 1]
        if not cands:
            return x
        ax = self.draw(st.sampled_from(cands))
        d = x.shape[ax]
        s = self.draw(st.integers(0, d.val - 1))
        e_ = self.draw(st.integers(s + 1, d.val))
        if not d.expr.isdigit():
            self.p.wheres.append(f"(<= {e_} {d.expr})")
        shape = tuple(Dim(e_ - s, str(e_ - s)) if i == ax else dd for i, dd in enumerate(x.shape))
        written = ax - len(x.shape) if self.draw(st.booleans()) else ax
        return Node(
            f"(slice {x.src} :axis {written} :start {s} :stop {e_})",
            shape,
            lambda e: x.ev(e).narrow(ax, s, e_ - s),
        )

    def op_matmul(self, x: Node) -> Node:
        if len(x.shape) < 2:
            x = self.op_reshape_to2(x)
        k = x.shape[-1]
        n = self.dim(self.draw(st.sampled_from((1, 3, 17, 127, 2))))
        batch = x.shape[:-2]
        kb = self.draw(st.integers(0, len(batch)))
        yb = tuple(Dim(1, "1") if self.draw(st.integers(0, 3)) == 0 else d for d in batch[kb:])
        extra: tuple[Dim, ...] = ()
        if not batch and self.draw(st.integers(0, 3)) == 0:
            extra = (self.dim(self.draw(st.sampled_from((2, 3)))),)
        y = self.param(extra + yb + (k, n))
        flip = False
        out_b = extra or batch
        shape = out_b + (x.shape[-2], n)
        return Node(
            f"(matmul {x.src} {y.src})",
            shape,
            lambda e: self.p.rd(torch.matmul(x.ev(e), y.ev(e))) if not flip else None,
        )

    def op_reshape_to2(self, x: Node) -> Node:
        shape = (Dim(1, "1"),) + x.shape if x.shape else (Dim(1, "1"), Dim(1, "1"))
        vals = tuple(d.val for d in shape)
        return Node(
            f"(reshape {x.src} [{' '.join(d.expr for d in shape)}])",
            shape,
            lambda e: x.ev(e).reshape(vals),
        )

    def op_softmax(self, x: Node) -> Node:
        if not x.shape:
            return x
        ax, written = self.axis(len(x.shape))
        if self.draw(st.booleans()):
            m = self.param(x.shape, "bool")
            inner = f"(where {m.src} {x.src} -inf)"

            def ev(e: dict[str, torch.Tensor]) -> torch.Tensor:
                v = torch.where(e[m.src], x.ev(e), torch.tensor(-math.inf, dtype=torch.float64))
                return self.p.rd(torch.softmax(v, ax))

            return Node(f"(softmax {inner} :axis {written})", x.shape, ev)
        return Node(
            f"(softmax {x.src} :axis {written})",
            x.shape,
            lambda e: self.p.rd(torch.softmax(x.ev(e), ax)),
        )

    def op_where(self, x: Node) -> Node:
        a = self.param(self.bshape(x.shape))
        b = self.param(self.bshape(x.shape))
        cmp = self.draw(st.sampled_from(["lt", "le", "gt", "ge"]))
        fs = {"lt": torch.lt, "le": torch.le, "gt": torch.gt, "ge": torch.ge}
        c = fs[cmp]
        other = f"(mul {x.src} -2)" if self.p.dtype in INTS else f"(neg {x.src})"
        k = -2.0 if self.p.dtype in INTS else -1.0
        return Node(
            f"(where ({cmp} {a.src} {b.src}) {x.src} {other})",
            x.shape,
            lambda e: torch.where(c(a.ev(e), b.ev(e)), x.ev(e), k * x.ev(e)),
        )

    def op_concat(self, x: Node) -> Node:
        if not x.shape:
            return x
        ax, written = self.axis(len(x.shape))
        d = x.shape[ax]
        other = self.dim(self.draw(st.sampled_from((1, 2, 3))))
        y = self.param(tuple(other if i == ax else dd for i, dd in enumerate(x.shape)))
        if d.expr.isdigit() and other.expr.isdigit():
            nd = Dim(d.val + other.val, str(d.val + other.val))
        else:
            nd = Dim(d.val + other.val, f"(+ {d.expr} {other.expr})")
        shape = tuple(nd if i == ax else dd for i, dd in enumerate(x.shape))
        return Node(
            f"(concat [{x.src} {y.src}] :axis {written})",
            shape,
            lambda e: torch.cat([x.ev(e), y.ev(e)], ax),
        )

    def op_repeat(self, x: Node) -> Node:
        if not x.shape:
            return x
        ax, written = self.axis(len(x.shape))
        r = self.draw(st.integers(1, 3))
        d = x.shape[ax]
        if d.val == 1:
            nd = Dim(r, str(r))
        elif d.expr.isdigit():
            nd = Dim(d.val * r, str(d.val * r))
        else:
            nd = Dim(d.val * r, f"(* {d.expr} {r})" if r > 1 else d.expr)
        shape = tuple(nd if i == ax else dd for i, dd in enumerate(x.shape))
        return Node(
            f"(repeat-interleave {x.src} :repeats {r} :axis {written})",
            shape,
            lambda e: torch.repeat_interleave(x.ev(e), r, dim=ax),
        )

    def op_let(self, x: Node) -> Node:
        name = f"t{len(self.p.ops)}"
        inner = self.draw(st.sampled_from(["add", "mul", "sub"]))
        fs: dict[str, Callable[..., Any]] = {"add": torch.add, "mul": torch.mul, "sub": torch.sub}
        f = fs[inner]
        if self.p.dtype in INTS:
            return Node(
                f"(let [({name} {x.src})] ({inner} {name} (max {name} 1)))",
                x.shape,
                lambda e: f(x.ev(e), torch.clamp(x.ev(e), min=1)),
            )
        return Node(
            f"(let [({name} {x.src})] ({inner} {name} (tanh {name})))",
            x.shape,
            lambda e: self.p.rd(f(x.ev(e), self.p.rd(torch.tanh(x.ev(e))))),
        )

    def op_combine(self, x: Node) -> Node:
        """``x`` with a second branch of its shape: a parameter through a shape-keeping op."""
        y = self.param(x.shape)
        if self.p.dtype in INTS:
            pass
        elif x.shape and self.draw(st.booleans()):
            y = self.op_softmax(y)
        else:
            y = self.op_unary(y)
        op = self.draw(st.sampled_from(["add", "mul", "max", "sub"]))
        if self.p.dtype in INTS and op == "mul":
            op = "add"
        fs: dict[str, Callable[..., Any]] = {
            "add": torch.add, "mul": torch.mul, "max": torch.maximum, "sub": torch.sub
        }  # fmt: skip
        f = fs[op]
        return Node(f"({op} {x.src} {y.src})", x.shape, lambda e: self.p.rd(f(x.ev(e), y.ev(e))))

    def op_dimval(self, x: Node) -> Node:
        """A dimension variable used as a value (a weak scalar taking the tensor's dtype):
        ``x + N`` for integers, ``x * rsqrt(N)`` for floats (spec section 8's ``rsqrt Dh``)."""
        dims = [d for d in x.shape if re.fullmatch(r"N\d+", d.expr)]
        if not dims:
            return x
        d = dims[0]
        bound = {"i32": 2147483647, "f16": 65519}.get(self.p.dtype)
        if bound is not None:
            self.p.wheres.append(f"(<= {d.expr} {bound})")
        n = float(d.val)
        if self.p.dtype in INTS:
            return Node(f"(add {x.src} {d.expr})", x.shape, lambda e: x.ev(e) + n)
        r = self.p.rd(torch.tensor(1.0 / math.sqrt(n), dtype=torch.float64))
        return Node(f"(mul {x.src} (rsqrt {d.expr}))", x.shape, lambda e: self.p.rd(x.ev(e) * r))

    def op_cast(self, x: Node) -> Node:
        to = self.draw(st.sampled_from(["f64", "f32", "f16", "bf16"]))
        if self.p.dtype_var:
            return x
        src = f"(cast (cast {x.src} :to {to}) :to {self.p.dtype})"

        def ev(e: dict[str, torch.Tensor]) -> torch.Tensor:
            return self.p.rd(x.ev(e).to(TD[self.p.dtype]).to(TD[to]).to(torch.float64))

        return Node(src, x.shape, ev)

    def op_attention(self, x: Node) -> Node:
        """``softmax(q k^T * scale + causal-mask) @ v`` with q = x viewed as [.. S D]."""
        if len(x.shape) < 2 or x.shape[-2].val == 1:
            return self.op_softmax(x)
        s_, d_ = x.shape[-2], x.shape[-1]
        batch = x.shape[:-2]
        k = self.param(batch + (s_, d_))
        v = self.param(batch + (s_, self.dim(self.draw(st.sampled_from((1, 3, 4))))))
        self.p.uses_prelude = True
        nb = len(batch)
        perm = " ".join(map(str, [*range(nb), nb + 1, nb]))
        mask = f"(causal-mask {s_.expr})"
        if self.p.dtype != "f32" or self.p.dtype_var:
            mask = f"(cast {mask} :to {self.p.tname})"
        scale = self.draw(st.sampled_from([0.5, 0.25, 1]))
        src = (
            f"(matmul (softmax (add (mul (matmul {x.src} (transpose {k.src} :perm [{perm}])) "
            f"{scale}) {mask}) :axis -1) {v.src})"
        )
        sv = s_.val

        def ev(e: dict[str, torch.Tensor]) -> torch.Tensor:
            rd = self.p.rd
            sc = rd(rd(torch.matmul(x.ev(e), e[k.src].transpose(-1, -2))) * scale)
            m = torch.triu(torch.full((sv, sv), -math.inf, dtype=torch.float64), 1)
            p = rd(torch.softmax(rd(sc + m), -1))
            return rd(torch.matmul(p, e[v.src]))

        return Node(src, batch + (s_, v.shape[-1]), ev)


@st.composite
def programs(
    draw: st.DrawFn,
    dtypes: tuple[str, ...] = ("f32", "f64", "f16", "bf16"),
    max_depth: int = 4,
    sizes: tuple[int, ...] = SIZES,
) -> Prog:
    dtype = draw(st.sampled_from(dtypes))
    var_mode, dtype_var = draw(st.booleans()), draw(st.integers(0, 3)) == 0
    dtype_var = dtype_var and dtype not in INTS  # dtype variables range over the floats
    g = Gen(draw, dtype, var_mode, dtype_var, sizes)
    g.p.body = g.node(draw(st.integers(1, max_depth)))
    g.p.via_call = draw(st.integers(0, 3)) == 0
    return g.p


TOL = {"f64": 1e-9, "f32": 2e-4, "f16": 2e-2, "bf16": 8e-2}


def compare(got: np.ndarray, want: torch.Tensor, dtype: str, what: str = "") -> None:
    """``got`` (kinac's, bf16 as uint16) equals ``want`` (float64) within ``dtype``'s tolerance,
    relative to the largest finite magnitude; NaNs and infinities must match exactly."""
    if dtype in INTS:
        assert got.dtype == INTS[dtype], (what, got.dtype)
        np.testing.assert_array_equal(got, want.numpy().astype(INTS[dtype]), err_msg=what)
        return
    g = torch.from_numpy(np.array(got, copy=True))
    g = g.view(torch.bfloat16) if dtype == "bf16" else g
    g64 = g.to(torch.float64).numpy()
    w = want.numpy()
    assert g64.shape == w.shape, (what, g64.shape, w.shape)
    fin = np.abs(w[np.isfinite(w)])
    scale = max(1.0, float(fin.max()) if fin.size else 1.0)
    tol = TOL[dtype]
    np.testing.assert_allclose(g64, w, rtol=tol, atol=tol * scale, equal_nan=True, err_msg=what)


def hunt_settings(n: int) -> Any:
    """The adversary tests' hypothesis settings: ``n`` examples (``ADV_EXAMPLES`` overrides it:
    a hunt draws many), no deadline (a compile takes seconds), no health checks (a program is a
    large draw)."""
    return settings(
        max_examples=int(os.environ.get("ADV_EXAMPLES", n)),
        deadline=None,
        suppress_health_check=list(HealthCheck),
    )


seeds = st.integers(0, 2**31)  # the seed of a drawn program's random inputs


def dot_loss(p: Prog) -> None:
    """Makes ``p``'s body ``sum(body * w)`` over every axis, ``w`` a new parameter (a
    non-uniform cotangent: each output element's gradient is its own)."""
    b = p.body
    assert b is not None
    w = f"p{len(p.params)}"
    p.params.append((w, b.shape, "T"))
    src = f"(mul {b.src} {w})"
    for _ in b.shape:
        src = f"(sum {src} :axis 0)"
    p.body = Node(src, (), lambda e: (b.ev(e) * e[w]).sum())
