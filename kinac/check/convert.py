"""Conversion of written types and dim expressions (AST) to symbolic types and polynomials.

Why: signatures, ``the`` ascriptions and shape arguments in bodies (``[B S H Dh]``) all go
through the same conversion, which also records what a diagnostic needs: the first node where
each variable appears, the divisibility that every ``(/ a b)`` implies, and malformed pieces.
"""

from __future__ import annotations

from kinac.check import dims as D
from kinac.check.codes import at, error
from kinac.check.dims import Poly
from kinac.check.formula import Rel
from kinac.check.shard import annotation_problems
from kinac.check.types import ERR, Shard, SShape, SType, device_of
from kinac.diag.model import Diagnostic
from kinac.reader import ast

SHARDINGS = ("replicated", "sharded", "partial")


class TypeConv:
    """Converts types of one defn. ``known`` None: a signature (every variable is introduced);
    otherwise the set of variables in scope (a body): others are reported (K0302)."""

    def __init__(
        self,
        file: str,
        defn: str,
        known: frozenset[str] | None,
        groups: frozenset[str] = frozenset(),
    ) -> None:
        self.file, self.defn, self.known, self.groups = file, defn, known, groups
        self.diags: list[Diagnostic] = []
        self.first: dict[str, int] = {}
        self.order: list[str] = []
        self.group_first: dict[str, int] = {}
        self.div_rels: list[Rel] = []

    def note_var(self, name: str, nid: int) -> None:
        if name not in self.first:
            self.first[name] = nid
            self.order.append(name)

    def _err(self, code: str, msg: str, nid: int, label: str = "", help: str | None = None) -> None:
        self.diags.append(error(code, msg, at(self.file, self.defn, nid, label), help=help))

    def var(self, name: str, nid: int) -> Poly:
        if self.known is not None and name not in self.known:
            self._err(
                "K0302",
                f"unknown dimension variable `{name}`",
                nid,
                "not a dimension of this defn",
                help="dimension variables of a body must appear in the defn's signature",
            )
        self.note_var(name, nid)
        return D.var(name)

    def dim(self, e: ast.DimExpr) -> Poly:
        if isinstance(e, ast.DimLit):
            if e.value < 1:
                self._err(
                    "K0303",
                    f"dimension {e.value} is not positive",
                    e.nid,
                    help="dimensions are positive integers",
                )
                return D.const(1)
            return D.const(e.value)
        if isinstance(e, ast.DimVar):
            return self.var(e.name, e.nid)
        if isinstance(e, ast.DimVariadic):
            self._err(
                "K0303",
                "a variadic group may only lead a shape",
                e.nid,
                help="write the group first: `[..b S D]`",
            )
            return D.const(1)
        args = [self.dim(a) for a in e.args]
        if e.op == "+" and args:
            return D.add(*args)
        if e.op == "*" and args:
            return D.mul(*args)
        if e.op == "/" and len(args) == 2:
            return self.divide(args[0], args[1])
        self._err(
            "K0303",
            f"malformed dimension expression `({e.op} …)`",
            e.nid,
            help="dims use (+ a b …), (* a b …) and (/ a b)",
        )
        return D.const(1)

    def divide(self, a: Poly, b: Poly) -> Poly:
        q = D.div(a, b)
        if D.exact_div(a, b) is None:
            self.div_rels.append(Rel("dvd", b, a))
        return q

    def shape(self, dims: tuple[ast.DimExpr, ...]) -> SShape:
        group: str | None = None
        out: list[Poly] = []
        for i, e in enumerate(dims):
            if isinstance(e, ast.DimVariadic) and i == 0:
                group = "..." if e.name == "" else ".." + e.name
                if self.known is None:
                    self.group_first.setdefault(group, e.nid)
                elif group not in self.groups:
                    self._err(
                        "K0302",
                        f"unknown variadic group `{group}`",
                        e.nid,
                        help="a group in a body must appear in the defn's signature",
                    )
            else:
                out.append(self.dim(e))
        return SShape(group, tuple(out))

    def annotations(self, anns: tuple[ast.Annotation, ...]) -> tuple[str, tuple[Shard, ...]]:
        place: list[tuple[str, tuple[tuple[str | None, int | str], ...]]] = []
        shards: list[Shard] = []
        for a in anns:
            args = tuple((x.key, x.value) for x in a.args)
            if a.name in ("cpu", "cuda"):
                if a.name == "cuda" and (  # a bare `@cuda` too, as in a body (K0702's page)
                    len(args) != 1 or not isinstance(args[0][1], int)
                ):
                    self._err(
                        "K0702",
                        "malformed placement `@cuda`",
                        a.nid,
                        help="write `@cuda(N)` with a device number N",
                    )
                    args = ()
                elif a.name == "cpu" and args:
                    self._err(
                        "K0702",
                        "`@cpu` takes no argument",
                        a.nid,
                        help="write `@cpu` (the host), or `@cuda(N)` for GPU N",
                    )
                    args = ()
                elif a.name == "cuda" and args and int(args[0][1]) < 0:
                    self._err(
                        "K0702",
                        f"device number {args[0][1]} is negative",
                        a.nid,
                        help="GPUs are numbered from 0: `@cuda(0)`, `@cuda(1)`, …",
                    )
                    args = ()
                if place:
                    self._err(
                        "K0702",
                        "a type has more than one placement",
                        a.nid,
                        help="keep one of `@cpu` / `@cuda(N)`",
                    )
                place.append((a.name, args))
            elif a.name in SHARDINGS:
                for msg, help in annotation_problems(a.name, args):
                    self._err("K0702", msg, a.nid, help=help)
                shards.append(Shard(a.name, args))
            else:
                self._err(
                    "K0702",
                    f"unknown annotation `@{a.name}`",
                    a.nid,
                    help="annotations are @cpu, @cuda(N), @replicated, @sharded(...), "
                    "@partial(...)",
                )
        return device_of(tuple(place)), tuple(shards)

    def type(self, t: ast.TensorType) -> SType:
        if not t.dtype:
            return SType(ERR, SShape(None, ()))
        shape = self.shape(t.dims)
        device, shards = self.annotations(t.annotations)
        return SType(t.dtype, shape, device, shards)
