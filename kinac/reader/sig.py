"""Parsing of the signature sublanguage: types, dimensions, annotations and ``where`` clauses.

:class:`FormParser` holds the per-form state shared by every parsing layer: the span table
being filled (one entry per ``nid``, handed out in pre-order), the diagnostics, and a ``failed``
flag. A form with any error is parsed to the end anyway, so that all its independent errors
are reported at once, but the caller then drops it: the values returned after an error are
placeholders that must never escape.
"""

from __future__ import annotations

import re
from typing import cast

from kinac.diag.model import Diagnostic
from kinac.reader.ast import (
    AnnotArg,
    Annotation,
    Constraint,
    DefnSpans,
    DimExpr,
    DimLit,
    DimOp,
    DimVar,
    DimVariadic,
    TensorType,
)
from kinac.reader.errors import make, show, suggest
from kinac.reader.sexpr import SAtom, SList, SNode
from kinac.reader.source import Source

NAME = re.compile(r"[^\W\d][\w\-]*\Z")
"""Names a user binds: defns, parameters, let bindings, meshes, modules (``rms-norm``, ``w_q``)."""
IDENT = re.compile(r"[^\W\d]\w*\Z")
"""Dimension variables and dtypes (no ``-``: ``a-b`` would read as a subtraction)."""
RELATIONS = ("=", "<", "<=", ">", ">=", "divides")
DIM_OPS = ("+", "*", "/")
DIM_HELP = (
    "a dimension is a positive integer, a variable like `B`, or `(+ a b)`, `(* a b)`, `(/ a b)`"
)
TYPE_HELP = "a type is `(tensor DTYPE [DIM …] ANNOTATION …)` or a bare dtype such as `f32`"
_NOT_DT = ("dim", "tensor")
_DUMMY_DIM = DimVar(-1, "?")
_DUMMY_TYPE = TensorType(-1, "?", ())


def describe(node: SNode) -> str:
    """A short phrase naming what ``node`` is, for messages: "name `x`", "list `( … )`"."""
    if isinstance(node, SList):
        pair = node.bracket + (")" if node.bracket == "(" else "]")
        return f"empty list `{pair}`" if not node.items else f"list `{pair[0]} … {pair[1]}`"
    k, v = node.kind, node.value
    if k == "sym":
        return f"name `{show(str(v))}`"
    if k in ("int", "float"):
        return f"number `{v}`"
    if k == "str":
        return f'string "{show(str(v))}"'
    if k == "kw":
        return f"keyword `:{v}`"
    if k == "var":
        return f"variadic group `..{v}`" if v else "variadic group `...`"
    if k == "annot":
        return f"annotation `@{annot_parts(node)[0]}`"
    return "an invalid token"


def sym(node: SNode | None) -> str | None:
    """The name if ``node`` is a symbol, else None."""
    if isinstance(node, SAtom) and node.kind == "sym" and isinstance(node.value, str):
        return node.value
    return None


def text_of(node: SNode) -> str:
    """A node's source-like text for a suggested fix (atoms only; lists abbreviated)."""
    if isinstance(node, SList):
        return "(…)"
    if node.kind == "kw":
        return f":{node.value}"
    return show(str(node.value))


def kind(node: SNode | None) -> str:
    """A node's token kind (``"sym"``, ``"kw"``, …), ``"list"`` for lists, ``""`` for None."""
    if node is None:
        return ""
    return "list" if isinstance(node, SList) else node.kind


def annot_parts(node: SAtom) -> tuple[str, tuple[AnnotArg, ...]]:
    """Name and arguments of an ``annot`` token."""
    return cast(tuple[str, tuple[AnnotArg, ...]], node.value)


class FormParser:
    """Per-form state: the span table, diagnostics and the failure flag."""

    def __init__(self, src: Source, diags: list[Diagnostic]) -> None:
        self.src = src
        self.diags = diags
        self.places: list[tuple[SNode, SNode]] = []
        self.failed = False

    def nid(self, node: SNode, last: SNode | None = None) -> int:
        """A fresh node id whose span runs from ``node`` to ``last`` (default: ``node``)."""
        places = self.places
        places.append((node, last if last is not None else node))
        return len(places) - 1

    def span_table(self) -> DefnSpans:
        """The spans of all node ids handed out so far (built once, at the end of a form)."""
        return DefnSpans(self.src.spans_of(self.places))

    def err(
        self,
        code: str,
        msg: str,
        at: SNode,
        label: str,
        help: str,
        secondary: tuple[tuple[SNode, str], ...] = (),
        last: SNode | None = None,
    ) -> None:
        """Report an error at a node and mark the form failed; an error token at ``at`` was
        reported by the lexer already, so nothing more is said about it."""
        self.failed = True
        if isinstance(at, SAtom) and at.kind == "error":
            return
        span = self.src.node_span
        sec = tuple((span(n, n), m) for n, m in secondary)
        primary = span(at, last if last is not None else at)
        self.diags.append(make(code, msg, primary, label, help=help, secondary=sec))

    def silent(self, node: SNode) -> bool:
        """True (and the form failed) if ``node`` is an error token already reported."""
        if isinstance(node, SAtom) and node.kind == "error":
            self.failed = True
            return True
        return False

    # ------------------------------------------------------------ types

    def parse_type(self, node: SNode) -> TensorType:
        """``(tensor DTYPE [DIM …] ANNOTATION …)`` or a bare dtype symbol (rank 0)."""
        if self.silent(node):
            return _DUMMY_TYPE
        if isinstance(node, SAtom):
            if node.kind == "sym" and isinstance(node.value, str) and IDENT.match(node.value):
                if node.value in ("dim", "tensor"):
                    self.err(
                        "K0118",
                        f"`{node.value}` is not a tensor type",
                        node,
                        "expected a type",
                        "`dim` is only a parameter type, `(H : dim)`; " + TYPE_HELP,
                    )
                    return _DUMMY_TYPE
                return TensorType(self.nid(node), node.value, ())
            self.err(
                "K0118", f"expected a type, found {describe(node)}", node, "not a type", TYPE_HELP
            )
            return _DUMMY_TYPE
        items = node.items
        head = items[0] if items else None
        hname = sym(head)
        if hname != "tensor":
            help = TYPE_HELP
            if node.bracket == "[":
                help = "a shape alone is not a type: write `(tensor f32 [B S D])`"
            elif hname is not None and IDENT.match(hname):
                help = f"write `(tensor {hname} [DIM …])`"
            self.err("K0118", "expected a type", node, "not a type", help)
            return _DUMMY_TYPE
        nid = self.nid(node)
        if len(items) < 2:
            self.err(
                "K0118",
                "`tensor` needs a dtype and a shape",
                node,
                "incomplete type",
                "write e.g. `(tensor f32 [B S])`",
            )
            return _DUMMY_TYPE
        dt = items[1]
        dtype = "f32"
        if isinstance(dt, SList) and len(items) >= 3 and (swap := sym(items[2])) is not None:
            self.err(
                "K0118",
                "the dtype must come before the shape",
                node,
                "dtype and shape swapped",
                f"write the dtype first: `(tensor {swap} [DIM …])`",
            )
            return _DUMMY_TYPE
        if self.silent(dt):
            pass
        elif (dname := sym(dt)) is not None and IDENT.match(dname) and dname not in _NOT_DT:
            dtype = dname
        else:
            self.err(
                "K0118",
                f"expected a dtype, found {describe(dt)}",
                dt,
                "not a dtype",
                "the dtype comes first: `(tensor f32 [B S])`; dtypes are f64 f32 f16 "
                "bf16 i64 i32 bool, or a dtype variable such as `T`",
            )
        if len(items) < 3 or not isinstance(items[2], SList):
            at = items[2] if len(items) >= 3 else node
            self.err(
                "K0118",
                "`tensor` type without a shape",
                at,
                "expected `[DIM …]`",
                f"write the shape after the dtype, e.g. `(tensor {dtype} [N])`; "
                f"a scalar is `(tensor {dtype} [])` or just `{dtype}`",
            )
            return _DUMMY_TYPE
        dims = self.parse_dims(items[2])
        annots: list[Annotation] = []
        prev: SNode = items[2]
        for item in items[3:]:
            if self.silent(item):
                pass
            elif isinstance(item, SAtom) and item.kind == "annot":
                annots.append(self.annotation(item))
            else:
                help = "only annotations such as `@cpu`, `@cuda(0)` or `@replicated` may follow the shape"
                if isinstance(item, SList) and isinstance(prev, SAtom) and prev.kind == "annot":
                    help = "write the annotation's arguments right after its name, with no space: `@cuda(0)`"
                self.err(
                    "K0118",
                    f"expected an annotation, found {describe(item)}",
                    item,
                    "not an annotation",
                    help,
                )
            prev = item
        return TensorType(nid, dtype, dims, tuple(annots))

    def annotation(self, node: SAtom) -> Annotation:
        """An annotation token as a node (its arguments were checked by the lexer)."""
        name, args = annot_parts(node)
        return Annotation(self.nid(node), name, args)

    # ------------------------------------------------------------ dimensions

    def parse_dims(self, lst: SList) -> tuple[DimExpr, ...]:
        """A shape ``[DIM …]``; a variadic group may only come first."""
        out: list[DimExpr] = []
        for i, item in enumerate(lst.items):
            if isinstance(item, SAtom) and item.kind == "var":
                if i != 0:
                    self.err(
                        "K0119",
                        "a variadic group must be the first dimension",
                        item,
                        "not leading",
                        f"move `{self._vartext_of(item)}` to the front of the shape, "
                        "as in `[..b S D]`; only one group is allowed",
                    )
                    continue
                out.append(DimVariadic(self.nid(item), str(item.value)))
            else:
                out.append(self.parse_dim(item))
        return tuple(out)

    @staticmethod
    def _vartext_of(item: SAtom) -> str:
        return f"..{item.value}" if item.value else "..."

    def parse_dim(self, node: SNode) -> DimExpr:
        """One dimension: a positive literal, a variable or ``(+|*|/ …)``."""
        if self.silent(node):
            return _DUMMY_DIM
        if isinstance(node, SAtom):
            k, v = node.kind, node.value
            if k == "int":
                if isinstance(v, int) and v >= 1:
                    return DimLit(self.nid(node), v)
                self.err(
                    "K0119",
                    f"dimension `{v}` is not positive",
                    node,
                    "must be ≥ 1",
                    "dimensions are positive integers; drop the axis or use `1`",
                )
            elif k == "sym" and IDENT.match(str(v)) and v not in ("dim", "tensor"):
                return DimVar(self.nid(node), str(v))
            elif k == "var":
                self.err(
                    "K0119",
                    "a variadic group cannot be used in dimension arithmetic",
                    node,
                    "not a single dimension",
                    "variadic groups stand alone, at the front of a shape: `[..b D]`",
                )
            else:
                help = DIM_HELP
                if k == "float":
                    help = "dimensions are integers: " + DIM_HELP
                elif k == "sym" and v in DIM_OPS:
                    help = f"operators go first, in parentheses: `({v} a b)`"
                elif k == "sym":
                    help = "dimension variables are made of letters, digits and `_`; " + DIM_HELP
                self.err(
                    "K0119",
                    f"expected a dimension, found {describe(node)}",
                    node,
                    "not a dimension",
                    help,
                )
            return _DUMMY_DIM
        items = node.items
        head = items[0] if items else None
        op = sym(head)
        if op is None or op not in DIM_OPS:
            msg, help = "expected a dimension", DIM_HELP
            mid = sym(items[1]) if len(items) == 3 else None
            if op == "-":
                msg = "`-` is not a dimension operator"
                help = "there is no dimension subtraction: state `(= D (+ A B))` in `where` instead"
            elif mid in DIM_OPS:
                help = f"put the operator first: `({mid} {text_of(items[0])} {text_of(items[2])})`"
            elif op is not None:
                msg = f"`{show(op)}` is not a dimension operator"
                help = "dimension arithmetic uses `+`, `*` and `/`: " + DIM_HELP
            self.err("K0119", msg, node, "not a dimension expression", help)
            return _DUMMY_DIM
        nid = self.nid(node)
        args = tuple(self.parse_dim(a) for a in items[1:])
        n = len(args)
        if (op == "/" and n != 2) or n < 2:
            want = "exactly two" if op == "/" else "at least two"
            self.err(
                "K0119",
                f"`{op}` over dimensions takes {want} operands, got {n}",
                node,
                "wrong number of operands",
                f"write `({op} a b)`",
            )
        return DimOp(nid, op, args)

    # ------------------------------------------------------------ constraints

    def parse_constraint(self, node: SNode) -> Constraint | None:
        """``(REL a b)`` with REL one of :data:`RELATIONS`."""
        if self.silent(node):
            return None
        help = "constraints are `(= a b)`, `(< a b)`, `(<= a b)`, `(> a b)`, `(>= a b)` or `(divides a b)`"
        if not isinstance(node, SList) or not node.items:
            self.err(
                "K0120",
                f"expected a constraint, found {describe(node)}",
                node,
                "not a constraint",
                help,
            )
            return None
        head = node.items[0]
        rel = sym(head) or ""
        if rel not in RELATIONS:
            close = suggest(rel, RELATIONS) if rel else None
            if rel in ("==", "!=", "/="):
                close = "=" if rel == "==" else None
            fix = f"did you mean `{close}`? " if close else ""
            what = (
                f"unknown relation `{show(rel)}`"
                if rel
                else f"expected a relation, found {describe(head)}"
            )
            self.err("K0120", what, head, "not a relation", fix + help)
            return None
        nid = self.nid(node)
        args = node.items[1:]
        if len(args) != 2:
            self.err(
                "K0120",
                f"`{rel}` takes two dimensions, got {len(args)}",
                node,
                "wrong number of operands",
                f"write `({rel} a b)`; combine several "
                "constraints by listing them: `(where (= a b) (= b c))`",
            )
            return None
        lhs, rhs = self.parse_dim(args[0]), self.parse_dim(args[1])
        return Constraint(nid, rel, lhs, rhs)
