"""Reading static arguments of primitives from expression syntax.

Why: the reader is syntactic, so ``[B S (* H Dh)]``, ``:axis -1``, ``i32``, ``@cuda(0)`` arrive
as ordinary expressions; this module gives them their static meaning (shapes over the defn's
dims, integers, dtypes, placements) and reports what does not fit (K0207, K0302).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kinac.check import dims as D
from kinac.check.codes import at, error
from kinac.check.dims import Poly
from kinac.check.formula import Rel
from kinac.check.shard import annotation_problems
from kinac.check.types import Shard, SShape, device_of
from kinac.diag.model import Diagnostic
from kinac.reader import ast
from kinac.tir.graph import DTYPES

FLOAT_CONSTS = {"inf": float("inf"), "-inf": float("-inf"), "nan": float("nan")}


class Bad(Exception):
    """A static argument could not be read (the diagnostic is already recorded)."""


class Statics:
    """Reads static arguments of one defn's body; ``dims`` and ``groups`` are in scope."""

    def __init__(
        self,
        file: str,
        defn: str,
        dims: frozenset[str],
        groups: frozenset[str],
        dtype_vars: frozenset[str],
        diags: list[Diagnostic],
    ) -> None:
        self.file, self.defn = file, defn
        self.dims, self.groups, self.dtype_vars = dims, groups, dtype_vars
        self.diags = diags
        self.divs: list[tuple[Rel, int]] = []
        self.is_tensor: Callable[[str], bool] = lambda _name: False

    def bad(self, code: str, msg: str, nid: int, help: str | None = None) -> Bad:
        self.diags.append(error(code, msg, at(self.file, self.defn, nid), help=help))
        return Bad()

    def dim(self, e: ast.Expr, allow_zero: bool = False) -> Poly:
        if isinstance(e, ast.Num) and not e.is_float and isinstance(e.value, int):
            if e.value < 0 and allow_zero:  # a slice bound: a position, from 0
                raise self.bad(
                    "K0207",
                    f"position {e.value} is negative",
                    e.nid,
                    help="slice positions count from 0 (a negative one does not count from the "
                    "end); to slice the last k of a dim, write the dim as a sum, `[(+ M k)]`, "
                    "and start at M",
                )
            if e.value < (0 if allow_zero else 1):
                raise self.bad(
                    "K0207",
                    f"dimension {e.value} is not positive",
                    e.nid,
                    help="dimensions are positive integers",
                )
            return D.const(e.value)
        if isinstance(e, ast.Var):
            if e.name in self.dims:
                return D.var(e.name)
            if self.is_tensor(e.name):
                raise self.bad(
                    "K0207",
                    f"`{e.name}` is a tensor, but a dimension is expected here",
                    e.nid,
                    help="pass a dimension: an integer or a dimension variable of the signature",
                )
            raise self.bad(
                "K0302",
                f"unknown dimension variable `{e.name}`",
                e.nid,
                help="a dimension used here must appear in the defn's signature",
            )
        if isinstance(e, ast.Call) and e.head in ("+", "*", "/") and not e.kwargs and e.args:
            args = [self.dim(a, allow_zero) for a in e.args]
            if e.head == "+":
                return D.add(*args)
            if e.head == "*":
                return D.mul(*args)
            if len(args) == 2:
                if D.exact_div(args[0], args[1]) is None:
                    self.divs.append((Rel("dvd", args[1], args[0]), e.nid))
                return D.div(args[0], args[1])
        raise self.bad(
            "K0207",
            "expected a dimension (an integer, a dimension variable, or "
            "(+ …), (* …), (/ a b) of those)",
            e.nid,
            help="dimensions are static: write a positive integer or a dim of the signature "
            "(a `(D : dim)` parameter passes one); a tensor's value cannot be a dimension",
        )

    def shape(self, e: ast.Expr) -> SShape:
        if not isinstance(e, ast.ListLit):
            raise self.bad(
                "K0207",
                "expected a shape `[DIM …]`",
                e.nid,
                help="write the shape as a list of dims: `[B S (* H Dh)]`",
            )
        group: str | None = None
        out: list[Poly] = []
        for i, it in enumerate(e.items):
            if isinstance(it, ast.Var) and it.name.startswith(".."):
                g = it.name
                if i != 0:
                    raise self.bad(
                        "K0303",
                        "a variadic group may only lead a shape",
                        it.nid,
                        help=f"a group stands for leading dims: write it first, `[{g} S D]`",
                    )
                if g != "..." and g not in self.groups:
                    raise self.bad(
                        "K0302",
                        f"unknown variadic group `{g}`",
                        it.nid,
                        help="a group used in a body must appear in the signature",
                    )
                group = g
            else:
                out.append(self.dim(it))
        return SShape(group, tuple(out))

    def int_(self, e: ast.Expr) -> int:
        if isinstance(e, ast.Num) and not e.is_float:
            return int(e.value)
        raise self.bad(
            "K0207",
            "expected an integer",
            e.nid,
            help="write a literal integer here (axes count from 0, or from -1 at the end)",
        )

    def ints(self, e: ast.Expr) -> tuple[int, ...]:
        if isinstance(e, ast.ListLit):
            return tuple(self.int_(x) for x in e.items)
        raise self.bad(
            "K0207",
            "expected a list of integers `[0 2 1 3]`",
            e.nid,
            help="write the integers in brackets, one per axis: `:perm [1 0]`",
        )

    def bool_(self, e: ast.Expr) -> bool:
        if isinstance(e, ast.Var) and e.name in ("true", "false"):
            return e.name == "true"
        if isinstance(e, ast.Num) and not e.is_float and e.value in (0, 1):
            return bool(e.value)
        raise self.bad("K0207", "expected `true` or `false`", e.nid, help="write `true` or `false`")

    def dtype(self, e: ast.Expr) -> str:
        if isinstance(e, ast.Var):
            if e.name in DTYPES or e.name in self.dtype_vars:
                return e.name
            raise self.bad(
                "K0207",
                f"`{e.name}` is not a dtype of this defn",
                e.nid,
                help="dtypes are f64 f32 f16 bf16 i64 i32 bool, or a dtype variable "
                "of the signature",
            )
        raise self.bad(
            "K0207",
            "expected a dtype",
            e.nid,
            help="dtypes are f64 f32 f16 bf16 i64 i32 bool, or a dtype variable of the signature",
        )

    def scalar(self, e: ast.Expr) -> Any:
        if isinstance(e, ast.Num):
            return e.value
        if isinstance(e, ast.Var) and e.name in FLOAT_CONSTS:
            return FLOAT_CONSTS[e.name]
        if isinstance(e, ast.Var) and e.name in self.dims:
            return D.var(e.name)
        raise self.bad(
            "K0207",
            "expected a literal value (a number, inf, -inf, nan, or a dimension)",
            e.nid,
            help="the value is static; to fill with a tensor's values, broadcast it: "
            "(broadcast-to x [DIM …])",
        )

    def device(self, e: ast.Expr) -> str:
        if isinstance(e, ast.AnnotExpr) and e.annotation.name in ("cpu", "cuda"):
            a = e.annotation
            args = tuple((x.key, x.value) for x in a.args)
            if a.name == "cuda" and (len(args) != 1 or not isinstance(args[0][1], int)):
                raise self.bad(
                    "K0702",
                    "malformed placement `@cuda`",
                    e.nid,
                    help="write `@cuda(N)` with a device number N",
                )
            if a.name == "cpu" and args:
                raise self.bad(
                    "K0702",
                    "`@cpu` takes no argument",
                    e.nid,
                    help="write `@cpu` (the host), or `@cuda(N)` for GPU N",
                )
            return device_of(((a.name, args),))
        raise self.bad(
            "K0207",
            "expected a placement `@cpu` or `@cuda(N)`",
            e.nid,
            help="write `@cpu` or `@cuda(N)` with a device number N",
        )

    def shards(self, es: tuple[ast.Expr, ...]) -> tuple[Shard, ...]:
        out: list[Shard] = []
        for e in es:
            if isinstance(e, ast.AnnotExpr) and e.annotation.name in (
                "replicated",
                "sharded",
                "partial",
            ):
                a = e.annotation
                args = tuple((x.key, x.value) for x in a.args)
                for msg, help in annotation_problems(a.name, args):
                    raise self.bad("K0702", msg, e.nid, help=help)
                out.append(Shard(a.name, args))
            else:
                raise self.bad(
                    "K0702",
                    "expected a sharding annotation (@replicated, @sharded(…), @partial(…))",
                    e.nid,
                    help="write @replicated, @sharded(axis=I, mesh=M) or @partial(sum, mesh=M); "
                    "placements move with to-device / to-host",
                )
        return tuple(out)
