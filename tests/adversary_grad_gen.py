"""Random Kina loss programs aimed at reverse mode, with a torch float64 autograd reference.

Builds on :mod:`adversary_gen` (its ops, dims and per-op rounding) and adds what a gradient
gets wrong and a forward run does not notice: a parameter used twice (its cotangents must be
summed), norms (``std/nn.kina``'s ``rms-norm``/``layer-norm`` and an inline L2 norm), the
stable-softmax pattern ``x - max(x)`` (the max reduction's gradient), explicit
``broadcast-to`` (its transpose is a sum), integer and bool parts that must pass no gradient
(a comparison cast to a float, a float truncated through ``i32``, an ``i32`` parameter, an
``iota``), and a leaky ``where`` on the value's own sign. Inputs may be drawn from a few
values only (``ties``): then binary ``max``/``min`` and the reductions see exact ties, where
the documented convention is torch's (split evenly; ``docs/language.md``, "Gradients").

The loss around the body is one of: ``sum(body * w)`` (a random cotangent), ``mean(body^2)``,
a ``max`` over every element (one winner, or a tie), or a log-sum-exp.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
import torch
from adversary_gen import INTS, SIZES, TD, Dim, Gen, Node, Prog, dot_loss
from hypothesis import strategies as st

TIE_VALUES = np.array([-1.0, -0.5, 0.0, 0.5, 1.0, 2.0])


class GradProg(Prog):
    """A float program whose inputs may carry ties and whose parameters may be ``i32``."""

    ties: bool = False
    loss_kind: str = "dot"
    index_bound: dict[str, int] | None = None  # an i32 parameter used as gather indices
    wrt_subset: tuple[str, ...] | None = None  # differentiate only these (None: every one)

    def inputs(self, seed: int) -> list[np.ndarray]:
        rng = np.random.default_rng(seed)
        out = []
        for n, s, dt in self.params:
            shape = tuple(d.val for d in s)
            if dt == "bool":
                out.append(np.asarray(rng.random(shape) < 0.6))
            elif dt == "i32" and self.index_bound and n in self.index_bound:
                out.append(rng.integers(0, self.index_bound[n], shape).astype(np.int32))
            elif dt == "i32":
                out.append(rng.integers(-3, 4, shape).astype(np.int32))
            else:
                x = rng.choice(TIE_VALUES, shape) if self.ties else rng.standard_normal(shape)
                t = torch.from_numpy(np.asarray(x)).to(TD[self.dtype])
                bf = self.dtype == "bf16"  # as uint16 bit patterns (numpy has no bf16)
                out.append(t.view(torch.int16).numpy().view(np.uint16) if bf else t.numpy())
        return out

    def env(self, inputs: list[np.ndarray]) -> dict[str, torch.Tensor]:
        e = {}
        for (n, _, dt), a in zip(self.params, inputs, strict=True):
            t = torch.from_numpy(np.array(a, copy=True))
            if dt == "T" and self.dtype == "bf16":
                t = t.view(torch.bfloat16)
            e[n] = t if dt == "bool" else t.to(torch.float64)
        return e

    def call_args(self, inputs: list[np.ndarray]) -> list[Any]:
        """``inputs`` as kinac takes them: bf16 bit patterns as torch bf16 tensors."""
        if self.dtype != "bf16":
            return inputs
        return [
            torch.from_numpy(a).view(torch.bfloat16) if dt == "T" else a
            for a, (_, _, dt) in zip(inputs, self.params, strict=True)
        ]

    def wrt(self) -> list[str]:
        """The parameters to differentiate: every float one, or the drawn subset in its drawn
        order (the gradients come back in ``wrt``'s order, not the signature's)."""
        every = [n for n, _, dt in self.params if dt == "T"]
        return list(self.wrt_subset) if self.wrt_subset else every


class GradGen(Gen):
    """:class:`adversary_gen.Gen` with the reverse-mode ops (float programs only)."""

    EXTRA = ("norm", "reuse", "nograd", "stablemax", "bcast", "leaky", "redmax", "gather")

    def __init__(
        self, draw: Any, dtype: str, var_mode: bool, dtype_var: bool, sizes: tuple[int, ...]
    ) -> None:
        super().__init__(draw, dtype, var_mode, dtype_var, sizes)
        self.p: GradProg = GradProg(dtype, dtype_var, var_mode=var_mode)

    def node(self, depth: int) -> Node:
        if depth == 0:
            return self.param(self.new_shape(self.draw(st.integers(1, 3))))
        if self.draw(st.integers(0, 2)) > 0:
            return super().node(depth)
        x = self.node(depth - 1)
        k = self.draw(st.sampled_from(self.EXTRA))
        self.p.ops.append(k)
        return getattr(self, "op_" + k)(x)

    def rd(self, t: torch.Tensor) -> torch.Tensor:
        return self.p.rd(t)

    def op_norm(self, x: Node) -> Node:
        if not x.shape:
            return x
        d = x.shape[-1]
        w = self.param((d,))
        kind = self.draw(st.sampled_from(["rms-norm", "layer-norm", "l2"]))
        rd = self.rd
        if kind == "l2":
            src = f"(div {x.src} (sqrt (add (sum (square {x.src}) :axis -1 :keepdims true) 0.25)))"

            def ev_l2(e: dict[str, torch.Tensor]) -> torch.Tensor:
                v = x.ev(e)
                den = rd(torch.sqrt(rd(rd(rd(v * v).sum(-1, keepdim=True)) + 0.25)))
                return rd(v / den)

            return Node(f"(mul {src} {w.src})", x.shape, lambda e: rd(ev_l2(e) * e[w.src]))
        self.p.uses_prelude = True
        if kind == "rms-norm":

            def ev(e: dict[str, torch.Tensor]) -> torch.Tensor:
                v = x.ev(e)
                ms = rd(rd(rd(v * v).mean(-1, keepdim=True)) + 1e-6)
                return rd(rd(v / rd(torch.sqrt(ms))) * e[w.src])

            return Node(f"(rms-norm {x.src} {w.src})", x.shape, ev)
        b = self.param((d,))

        def ev_ln(e: dict[str, torch.Tensor]) -> torch.Tensor:
            v = x.ev(e)
            xc = rd(v - rd(v.mean(-1, keepdim=True)))
            var = rd(rd(xc * xc).mean(-1, keepdim=True))
            return rd(rd(rd(xc * rd(torch.rsqrt(rd(var + 1e-5)))) * e[w.src]) + e[b.src])

        return Node(f"(layer-norm {x.src} {w.src} {b.src})", x.shape, ev_ln)

    def compatible(self, shape: tuple[Dim, ...]) -> list[str]:
        """Existing float parameters that broadcast against ``shape`` unchanged."""
        out = []
        for n, s, dt in self.p.params:
            if dt != "T" or len(s) > len(shape):
                continue
            tail = shape[len(shape) - len(s) :]
            ok = (
                a.val == 1 and a.expr == "1" or a.expr == b.expr
                for a, b in zip(s, tail, strict=True)
            )
            if all(ok):
                out.append(n)
        return out

    def op_reuse(self, x: Node) -> Node:
        """``x`` combined with a parameter already used (its gradient is a sum of two)."""
        names = self.compatible(x.shape)
        if not names:
            return self.op_leaky(x)
        n = self.draw(st.sampled_from(names))
        op = self.draw(st.sampled_from(["mul", "add", "sub"]))
        fs: dict[str, Callable[..., Any]] = {"mul": torch.mul, "add": torch.add, "sub": torch.sub}
        f = fs[op]
        return Node(f"({op} {x.src} {n})", x.shape, lambda e: self.rd(f(x.ev(e), e[n])))

    def op_nograd(self, x: Node) -> Node:
        """``x`` times (or plus) something integer or boolean: no gradient through it."""
        k = self.draw(st.sampled_from(["cmp", "trunc", "iparam", "iota"]))
        t, rd = self.p.tname, self.rd
        if k == "cmp":
            src = f"(mul {x.src} (cast (gt {x.src} 0.25) :to {t}))"
            return Node(src, x.shape, lambda e: rd(x.ev(e) * (x.ev(e) > 0.25).to(torch.float64)))
        if k == "trunc":
            src = f"(add {x.src} (cast (cast (mul {x.src} 3) :to i32) :to {t}))"

            def ev(e: dict[str, torch.Tensor]) -> torch.Tensor:
                v = x.ev(e)
                return rd(v + torch.trunc(rd(v * 3).detach()))

            return Node(src, x.shape, ev)
        if k == "iparam":
            name = f"p{len(self.p.params)}"
            self.p.params.append((name, self.bshape(x.shape), "i32"))
            src = f"(mul {x.src} (cast {name} :to {t}))"
            return Node(src, x.shape, lambda e: rd(x.ev(e) * e[name]))
        if not x.shape:
            return x
        ax = self.draw(st.integers(0, len(x.shape) - 1))
        dims = " ".join(d.expr for d in x.shape)
        shape = tuple(d.val for d in x.shape)
        src = f"(mul {x.src} (cast (iota i32 [{dims}] :axis {ax}) :to {t}))"

        def ev_iota(e: dict[str, torch.Tensor]) -> torch.Tensor:
            r = [1] * len(shape)
            r[ax] = shape[ax]
            io = torch.arange(shape[ax], dtype=torch.float64).reshape(r)
            return rd(x.ev(e) * io)

        return Node(src, x.shape, ev_iota)

    def op_stablemax(self, x: Node) -> Node:
        """``x - max(x, axis)`` (or ``min``): the reduction's gradient meets ties."""
        if not x.shape:
            return x
        ax, written = self.axis(len(x.shape))
        op = self.draw(st.sampled_from(["max", "min"]))
        f = torch.amax if op == "max" else torch.amin
        src = f"(sub {x.src} ({op} {x.src} :axis {written} :keepdims true))"
        return Node(src, x.shape, lambda e: self.rd(x.ev(e) - f(x.ev(e), ax, keepdim=True)))

    def op_redmax(self, x: Node) -> Node:
        """A ``max``/``min`` reduction without keepdims (its cotangent is broadcast back)."""
        if not x.shape:
            return x
        ax, written = self.axis(len(x.shape))
        op = self.draw(st.sampled_from(["max", "min"]))
        f = torch.amax if op == "max" else torch.amin
        shape = tuple(d for i, d in enumerate(x.shape) if i != ax)
        return Node(f"({op} {x.src} :axis {written})", shape, lambda e: f(x.ev(e), ax))

    def op_bcast(self, x: Node) -> Node:
        """``broadcast-to``: a new leading axis, and each 1 of ``x`` maybe widened (literal
        sizes: a dim variable must come from a parameter)."""
        lit = [Dim(v, str(v)) for v in (1, 2, 3)]
        lead = self.draw(st.sampled_from(lit))
        body = tuple(
            self.draw(st.sampled_from(lit[1:])) if d.val == 1 and self.draw(st.booleans()) else d
            for d in x.shape
        )
        new = ((lead,) if self.draw(st.booleans()) else ()) + body
        if len(new) > 4:
            return x
        vals = tuple(d.val for d in new)
        return Node(
            f"(broadcast-to {x.src} [{' '.join(d.expr for d in new)}])",
            new,
            lambda e: x.ev(e).expand(vals),
        )

    def op_gather(self, x: Node) -> Node:
        """Rows of ``x`` itself (rank 2: its gradient is a scatter-add over repeated
        indices), or of a new table added to ``x`` (rank >= 1)."""
        if not x.shape:
            return x
        name = f"p{len(self.p.params)}"
        if self.p.index_bound is None:
            self.p.index_bound = {}
        if len(x.shape) == 2:
            v = x.shape[0]
            k = self.dim(self.draw(st.sampled_from((1, 3, 5))))
            self.p.params.append((name, (k,), "i32"))
            self.p.index_bound[name] = v.val
            return Node(
                f"(gather {x.src} {name})",
                (k, x.shape[1]),
                lambda e: x.ev(e)[e[name].long()],
            )
        v = self.dim(self.draw(st.sampled_from((1, 2, 4))))
        table = self.param((v, x.shape[-1]))
        name = f"p{len(self.p.params)}"
        self.p.params.append((name, x.shape[:-1], "i32"))
        self.p.index_bound[name] = v.val
        return Node(
            f"(add {x.src} (gather {table.src} {name}))",
            x.shape,
            lambda e: self.rd(x.ev(e) + e[table.src][e[name].long()]),
        )

    def op_leaky(self, x: Node) -> Node:
        """``where(x > 0, x, x * 0.125)``: the condition is the value's own sign."""
        rd = self.rd
        src = f"(where (gt {x.src} 0) {x.src} (mul {x.src} 0.125))"
        return Node(src, x.shape, lambda e: torch.where(x.ev(e) > 0, x.ev(e), rd(x.ev(e) * 0.125)))


def product(shape: tuple[Dim, ...]) -> str:
    """The element count of ``shape`` as a dim expression (literal when every dim is)."""
    if all(d.expr.isdigit() for d in shape):
        return str(math.prod(d.val for d in shape))
    expr = shape[0].expr
    for d in shape[1:]:
        expr = f"(* {expr} {d.expr})"
    return expr


def add_loss(p: GradProg, kind: str) -> GradProg:
    """Reduce ``p``'s body to a scalar loss of ``kind`` (dot, meansq, max, lse)."""
    b = p.body
    assert b is not None
    rd = p.rd
    flat = f"(reshape {b.src} [{product(b.shape)}])"
    p.loss_kind = kind
    if kind == "dot":
        dot_loss(p)
    elif kind == "meansq":
        src = f"(mean (square {flat}) :axis 0)"
        p.body = Node(src, (), lambda e: rd(rd(b.ev(e).reshape(-1) ** 2).mean()))
    elif kind == "max":
        p.body = Node(f"(max {flat} :axis 0)", (), lambda e: b.ev(e).reshape(-1).amax())
    else:
        src = f"(let [(z {flat}) (m (max z :axis 0))] (add (log (sum (exp (sub z m)) :axis 0)) m))"

        def ev(e: dict[str, torch.Tensor]) -> torch.Tensor:
            z = b.ev(e).reshape(-1)
            m = z.amax()
            return rd(rd(torch.log(rd(rd(torch.exp(rd(z - m))).sum()))) + m)

        p.body = Node(src, (), ev)
    return p


@st.composite
def grad_programs(
    draw: st.DrawFn,
    dtypes: tuple[str, ...] = ("f64", "f32"),
    max_depth: int = 4,
    sizes: tuple[int, ...] = SIZES,
) -> GradProg:
    dtype = draw(st.sampled_from(dtypes))
    assert dtype not in INTS
    g = GradGen(draw, dtype, draw(st.booleans()), draw(st.integers(0, 3)) == 0, sizes)
    p = g.p
    assert isinstance(p, GradProg)
    p.body = g.node(draw(st.integers(1, max_depth)))
    p.via_call = draw(st.integers(0, 3)) == 0
    p.ties = draw(st.booleans())
    if draw(st.integers(0, 4)) == 0:  # a float parameter the loss never reads: zeros
        p.params.append((f"p{len(p.params)}", g.new_shape(draw(st.integers(0, 2))), "T"))
    floats = [n for n, _, dt in p.params if dt == "T"]
    if draw(st.booleans()):
        p.wrt_subset = tuple(draw(st.lists(st.sampled_from(floats), min_size=1, unique=True)))
    return add_loss(p, draw(st.sampled_from(["dot", "dot", "meansq", "max", "lse"])))


def sharded_source(p: Prog, chosen: list[tuple[int, int | str, str]], mesh: str) -> str:
    """``p``'s source on mesh ``m`` (``mesh``: ``(mesh m [2])`` or a 2x2 ``(mesh m [2 2]
    :axes [a b])``) with, for each ``(i, a, over)`` of ``chosen``, parameter ``i`` split on
    its axis ``a`` (``a == "partial"``: ``@partial(sum)``) over mesh axis ``over`` (``""``:
    the whole mesh); a parameter may be chosen twice (two mesh axes)."""
    src = p.source()
    notes: dict[int, list[str]] = {}
    for i, a, over in chosen:
        o = f", over={over}" if over else ""
        ann = f"@partial(sum, mesh=m{o})" if a == "partial" else f"@sharded(axis={a}, mesh=m{o})"
        notes.setdefault(i, []).append(ann)
    for i, anns in notes.items():
        n, s, dt = p.params[i]
        ty = f"(tensor {p.tname if dt == 'T' else dt} [{' '.join(d.expr for d in s)}]"
        src = src.replace(f"({n} : {ty}))", f"({n} : {ty} {' '.join(anns)}))", 1)
    return mesh + "\n" + src
