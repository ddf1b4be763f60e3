"""A random generator of Kina programs that are well-typed by construction (or, mutated, often
not), for the checker's property tests.

The generator tracks shapes with its own tiny algebra (a dim is a sorted tuple of factors: dim
variables and integers), independent of the checker's, and writes a defn whose declared types
follow from it. ``where`` equalities (``P = A*B``) make the checker's normalisation work.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

Dim = tuple  # sorted factors: ints first, then names; () is the literal 1

VARS = ("A", "B", "C", "D", "E")
UNARY = "neg exp tanh sigmoid relu gelu silu abs square".split()
BINARY = "add sub mul max min".split()


def canon(factors: list) -> Dim:
    k = 1
    names: list[str] = []
    for f in factors:
        if isinstance(f, int):
            k *= f
        else:
            names.extend(("A", "B") if f == "P" else (f,))
    return ((k,) if k != 1 else ()) + tuple(sorted(names))


def kina(d: Dim) -> str:
    parts = [str(f) for f in d]
    if not parts:
        return "1"
    return parts[0] if len(parts) == 1 else "(* " + " ".join(parts) + ")"


def evaluate(d: Dim, env: dict[str, int]) -> int:
    v = 1
    for f in d:
        v *= f if isinstance(f, int) else env[f]
    return v


@dataclass
class Prog:
    """A generated defn: its text, the dims it mentions, whether it uses ``P = A*B``."""

    text: str
    uses_p: bool
    params: list[tuple[str, list[str]]] = field(default_factory=list)


class Gen:
    def __init__(self, seed: int) -> None:
        self.r = random.Random(seed)
        self.params: list[tuple[str, list[str], list[Dim]]] = []  # name, written, canonical
        self.pool: list[tuple[str, list[Dim]]] = []
        self.binds: list[tuple[str, str]] = []
        self.uses_p = self.r.random() < 0.3
        self.known: set[str] = set()

    def param(self, written: list[str]) -> str:
        name = f"p{len(self.params)}"
        dims = [
            canon([int(w)] if w.isdigit() else ([w] if not w.startswith("(") else _factors(w)))
            for w in written
        ]
        self.params.append((name, written, dims))
        for w in written:
            if not w.startswith("(") and not w.isdigit():
                self.known.add(w)
        self.pool.append((name, dims))
        return name

    def bind(self, text: str, dims: list[Dim]) -> None:
        name = f"v{len(self.binds)}"
        self.binds.append((name, text))
        self.pool.append((name, dims))

    def pick(self) -> tuple[str, list[Dim]]:
        return self.r.choice(self.pool[-3:] if self.r.random() < 0.7 else self.pool)

    def run(self, steps: int) -> Prog:
        r = self.r
        rank = r.randint(1, 3)
        first = [r.choice(VARS[:3]) for _ in range(rank)]
        if self.uses_p:
            first[0] = "P"
            self.param(["A", "B"])
        self.param(first)
        for _ in range(steps):
            getattr(self, "op_" + r.choice(OPS))()
        body_name, body_dims = self.pool[-1]
        lets = "\n        ".join(f"({n} {t})" for n, t in self.binds)
        ps = " ".join(f"({n} : (tensor f32 [{' '.join(w)}]))" for n, w, _ in self.params)
        ret = " ".join(kina(d) for d in body_dims)
        where = "\n  (where (= P (* A B)))" if self.uses_p else ""
        body = f"(let [{lets}]\n    {body_name})" if self.binds else body_name
        text = f'(import "std/nn.kina")\n(defn f [{ps}] -> (tensor f32 [{ret}]){where}\n  {body})\n'
        return Prog(text, self.uses_p, [(n, w) for n, w, _ in self.params])

    # ---------------------------------------------------------------- operations

    def op_unary(self) -> None:
        v, d = self.pick()
        self.bind(f"({self.r.choice(UNARY)} {v})", d)

    def op_binary(self) -> None:
        v, d = self.pick()
        cands = [(w, e) for w, e in self.pool if _bcast(d, e) is not None]
        if cands and self.r.random() < 0.6:
            w, e = self.r.choice(cands)
        else:
            k = self.r.randint(0, len(d))
            e = [x if self.r.random() < 0.7 else () for x in d[len(d) - k :]]
            w = self.param([kina(x) for x in e])
        if self.r.random() < 0.5:
            self.bind(f"({self.r.choice(BINARY)} {v} {w})", _bcast(d, e))  # type: ignore[arg-type]
        else:
            self.bind(f"({self.r.choice(BINARY)} {w} {v})", _bcast(e, d))  # type: ignore[arg-type]

    def op_literal(self) -> None:
        v, d = self.pick()
        k = self.r.choice(sorted(self.known))
        self.bind(f"(mul {v} {self.r.choice(['0.5', '2', k, f'(rsqrt {k})'])})", d)

    def op_reduce(self) -> None:
        v, d = self.pick()
        if not d:
            return self.op_unary()
        ax = self.r.randrange(-len(d), len(d))
        keep = self.r.random() < 0.5
        op = self.r.choice(["sum", "mean", "max", "min"])
        nd = list(d)
        if keep:
            nd[ax] = ()
        else:
            del nd[ax]
        self.bind(f"({op} {v} :axis {ax} :keepdims {'true' if keep else 'false'})", nd)

    def op_softmax(self) -> None:
        v, d = self.pick()
        if not d:
            return self.op_unary()
        self.bind(f"(softmax {v} :axis {self.r.randrange(-len(d), len(d))})", d)

    def op_transpose(self) -> None:
        v, d = self.pick()
        if len(d) < 2:
            return self.op_unary()
        perm = list(range(len(d)))
        self.r.shuffle(perm)
        self.bind(f"(transpose {v} :perm [{' '.join(map(str, perm))}])", [d[p] for p in perm])

    def op_merge(self) -> None:
        v, d = self.pick()
        if len(d) < 2:
            return self.op_split()
        i = self.r.randrange(len(d) - 1)
        nd = d[:i] + [canon(list(d[i]) + list(d[i + 1]))] + d[i + 2 :]
        self.bind(f"(reshape {v} [{' '.join(kina(x) for x in nd)}])", nd)

    def op_split(self) -> None:
        v, d = self.pick()
        idx = [i for i, x in enumerate(d) if len(x) >= 2]
        if not idx:
            nd = [()] + list(d)  # add a leading 1
        else:
            i = self.r.choice(idx)
            fs = list(d[i])
            k = self.r.randint(1, len(fs) - 1)
            nd = d[:i] + [canon(fs[:k]), canon(fs[k:])] + d[i + 1 :]
        self.bind(f"(reshape {v} [{' '.join(kina(x) for x in nd)}])", nd)

    def op_matmul(self) -> None:
        v, d = self.pick()
        if len(d) < 2:
            return self.op_unary()
        n = self.r.choice(VARS)
        w = self.param([kina(d[-1]), n])
        self.bind(f"(matmul {v} {w})", d[:-1] + [canon([n])])

    def op_concat(self) -> None:
        v, d = self.pick()
        if not d:
            return self.op_unary()
        ax = self.r.randrange(-len(d), len(d))
        nd = list(d)
        nd[ax] = canon([2, *d[ax]])
        self.bind(f"(concat [{v} (neg {v})] :axis {ax})", nd)

    def op_slice(self) -> None:
        v, d = self.pick()
        if not d:
            return self.op_unary()
        ax = self.r.randrange(len(d))
        x = d[ax]
        if x and isinstance(x[0], int) and x[0] % 2 == 0:
            half = canon([x[0] // 2, *x[1:]])
            nd = list(d)
            nd[ax] = half
            s = f"(slice {v} :axis {ax} :start {kina(half)} :stop {kina(x)})"
        else:
            nd = list(d)
            nd[ax] = ()
            s = f"(slice {v} :axis {ax} :start 0 :stop 1)"
        self.bind(s, nd)

    def op_repeat(self) -> None:
        v, d = self.pick()
        if not d:
            return self.op_unary()
        ax = self.r.randrange(-len(d), len(d))
        rep = self.r.choice(["2", *sorted(self.known)])
        nd = list(d)
        nd[ax] = canon([int(rep) if rep.isdigit() else rep, *d[ax]])
        self.bind(f"(repeat-interleave {v} :repeats {rep} :axis {ax})", nd)

    def op_bcast(self) -> None:
        v, d = self.pick()
        lead = self.r.choice(sorted(self.known))
        nd = [canon([lead])] + [x if x else canon([self.r.choice(sorted(self.known))]) for x in d]
        self.bind(f"(broadcast-to {v} [{' '.join(kina(x) for x in nd)}])", nd)

    def op_where(self) -> None:
        v, d = self.pick()
        self.bind(f"(where (gt {v} 0.0) {v} (neg {v}))", d)

    def op_cast(self) -> None:
        v, d = self.pick()
        self.bind(f"(cast (cast {v} :to bf16) :to f32)", d)

    def op_norm(self) -> None:
        v, d = self.pick()
        if not d or not d[-1]:
            return self.op_unary()
        w = self.param([kina(d[-1])])
        self.bind(f"(rms-norm {v} {w})", d)


OPS = [n[3:] for n in dir(Gen) if n.startswith("op_")]


def _factors(w: str) -> list:
    return [int(x) if x.isdigit() else x for x in w.strip("()").split()[1:]]


def _bcast(a: list[Dim], b: list[Dim]) -> list[Dim] | None:
    out: list[Dim] = []
    n = max(len(a), len(b))
    for k in range(1, n + 1):
        x = a[-k] if k <= len(a) else None
        y = b[-k] if k <= len(b) else None
        if x is None or x == ():
            out.append(y if y is not None else ())
        elif y is None or y == () or x == y:
            out.append(x)
        else:
            return None
    return list(reversed(out))


def mutate(text: str, seed: int) -> str:
    """Swap one dimension variable in one parameter type for another (often ill-typed)."""
    r = random.Random(seed)
    head, _, rest = text.partition("->")
    toks = head.split(" ")
    idx = [i for i, t in enumerate(toks) if t.strip("[]()") in VARS]
    if not idx:
        return text
    i = r.choice(idx)
    old = toks[i].strip("[]()")
    new = r.choice([v for v in VARS if v != old])
    toks[i] = toks[i].replace(old, new)
    return " ".join(toks) + "->" + rest
