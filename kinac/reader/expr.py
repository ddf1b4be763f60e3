"""Parsing of expressions (spec section 4) into span-free AST nodes.

The reader is syntactic: ``(f a :k v)`` becomes a :class:`Call` whatever ``f`` names; only
``let`` and ``the`` are special forms. A variadic group in expression position (the ``...`` of
``(reshape x [... D])``) becomes a :class:`Var` named ``...`` or ``..b``, which the checker
reads in shape positions. Node ids are handed out in pre-order, in source order.
"""

from __future__ import annotations

from typing import cast

from kinac.reader.ast import (
    Annotation,
    AnnotExpr,
    Binding,
    Call,
    Expr,
    Kwarg,
    Let,
    ListLit,
    Num,
    Str,
    The,
    Var,
)
from kinac.reader.sexpr import TOP_HEADS, SAtom, SList, SNode
from kinac.reader.sig import NAME, FormParser, annot_parts, describe, sym, text_of

_DUMMY = Var(-1, "?")
_KW_HELP = "keyword arguments go last inside a call, each followed by its value: `(sum x :axis 0)`"
_LET_HELP = "write `(let [(name EXPR) …] BODY)`"


class ExprParser(FormParser):
    """Expressions on top of the signature parser's state."""

    def parse_expr(self, node: SNode) -> Expr:
        """Any expression; errors are reported and give a placeholder."""
        if isinstance(node, SList):
            if node.bracket == "[":
                nid = self.nid(node)
                return ListLit(nid, tuple(self.parse_expr(i) for i in node.items))
            return self.parse_form(node)
        k = node.kind
        if k == "sym":  # the commonest node: inline nid()
            places = self.places
            places.append((node, node))
            return Var(len(places) - 1, cast(str, node.value))
        if k == "int" or k == "float":
            return Num(self.nid(node), cast(int | float, node.value), k == "float")
        if k == "str":
            return Str(self.nid(node), str(node.value))
        if k == "var":
            name = f"..{node.value}" if node.value else "..."
            return Var(self.nid(node), name)
        if k == "annot":
            nid = self.nid(node)
            name, args = annot_parts(node)
            return AnnotExpr(nid, Annotation(self.nid(node), name, args))
        if k == "kw":
            self.err(
                "K0125",
                f"keyword `:{node.value}` is not a value",
                node,
                "keyword out of place",
                _KW_HELP,
            )
        else:
            self.silent(node)
        return _DUMMY

    def parse_form(self, node: SList) -> Expr:
        """A parenthesised form: ``let``, ``the`` or a call."""
        items = node.items
        if not items:
            self.err(
                "K0123",
                "empty call `()`",
                node,
                "nothing to call",
                "write `(f x …)` with the name of a primitive or defn; an empty list is `[]`",
            )
            return _DUMMY
        head = items[0]
        hname = sym(head)
        if hname == "let":
            return self.parse_let(node)
        if hname == "the":
            return self.parse_the(node)
        if hname in TOP_HEADS:
            self.err(
                "K0126",
                f"`({hname} …)` inside an expression",
                node,
                "only allowed at top level",
                f"`{hname}` forms go at the top level of the file; if this one is meant to be "
                "there, a `)` is probably missing before it",
            )
            return _DUMMY
        if hname is None:
            if not self.silent(head):
                self.err(
                    "K0123",
                    f"a call must start with a name, found {describe(head)}",
                    head,
                    "not a name",
                    "start the list with a primitive or defn name, as in `(add x y)`; "
                    "a list of values is written `[x y]`",
                )
            for item in items[1:]:
                if not (isinstance(item, SAtom) and item.kind == "kw"):
                    self.parse_expr(item)
            return _DUMMY
        return self.parse_call(node, hname)

    def parse_call(self, node: SList, hname: str) -> Call:
        """``(head arg … :key value …)``: positional arguments first, then keyword pairs."""
        items = node.items
        nid = self.nid(node)
        head_nid = self.nid(items[0])
        args: list[Expr] = []
        kwargs: list[Kwarg] = []
        seen: dict[str, SNode] = {}
        order_reported = False
        i, n = 1, len(items)
        while i < n:
            item = items[i]
            if not (isinstance(item, SAtom) and item.kind == "kw"):
                if kwargs and not order_reported and not self.silent(item):
                    order_reported = True
                    first = seen[kwargs[0].key]
                    self.err(
                        "K0123",
                        "positional argument after keyword arguments",
                        item,
                        "positional argument",
                        f"move it before `:{kwargs[0].key}`: positional arguments come first",
                        secondary=((first, "keyword arguments start here"),),
                    )
                args.append(self.parse_expr(item))
                i += 1
                continue
            key = str(item.value)
            value = items[i + 1] if i + 1 < n else None
            if value is None or (isinstance(value, SAtom) and value.kind == "kw"):
                self.err(
                    "K0124",
                    f"keyword `:{key}` has no value",
                    item,
                    "expected a value after this",
                    f"give it a value, e.g. `:{key} 0`, or remove it",
                )
                i += 1
                continue
            if key in seen:
                self.err(
                    "K0123",
                    f"keyword `:{key}` given twice",
                    item,
                    "repeated",
                    f"keep one `:{key}`",
                    secondary=((seen[key], "first given here"),),
                )
            seen[key] = item
            kid = self.nid(item, value)
            kwargs.append(Kwarg(kid, key, self.parse_expr(value)))
            i += 2
        return Call(nid, hname, head_nid, tuple(args), tuple(kwargs))

    def parse_let(self, node: SList) -> Expr:
        """``(let [(name EXPR) …] BODY)``."""
        items = node.items
        nid = self.nid(node)
        if len(items) < 2 or not isinstance(items[1], SList):
            at = items[1] if len(items) >= 2 else node
            self.err(
                "K0121",
                "`let` needs a vector of bindings",
                at,
                "expected `[(name EXPR) …]`",
                _LET_HELP,
            )
            for item in items[1:]:
                self.parse_expr(item)
            return _DUMMY
        bindings: list[Binding] = []
        vec = items[1].items
        if any(not isinstance(b, SList) for b in vec):
            pairs = " ".join(
                f"({text_of(vec[i])} {text_of(vec[i + 1])})" for i in range(0, len(vec) - 1, 2)
            )
            self.err(
                "K0121",
                "each `let` binding must be a `(name EXPR)` list",
                items[1],
                "bindings are not lists",
                f"wrap each binding in parentheses: `[{pairs}]`"
                if len(vec) % 2 == 0
                else "write `[(a (f x)) (b (g a))]`: one list per binding",
            )
            vec = [b for b in vec if isinstance(b, SList)]
        for b in vec:
            bnd = self.parse_binding(b)
            if bnd is not None:
                bindings.append(bnd)
        if len(items) != 3:
            if len(items) == 2:
                self.err(
                    "K0121",
                    "`let` without a body",
                    node,
                    "no body expression",
                    "add the expression that uses the bindings: `(let [(y (f x))] (g y))`",
                )
            else:
                self.err(
                    "K0121",
                    f"`let` has {len(items) - 2} body expressions",
                    items[3],
                    "extra expression",
                    "a `let` has exactly one body expression: bind the others "
                    "or nest another `let`",
                )
            for item in items[2:]:
                self.parse_expr(item)
            return _DUMMY
        return Let(nid, tuple(bindings), self.parse_expr(items[2]))

    def parse_binding(self, b: SNode) -> Binding | None:
        """One ``(name EXPR)`` of a ``let``."""
        if self.silent(b):
            return None
        if not isinstance(b, SList):
            self.err(
                "K0121",
                f"expected a binding `(name EXPR)`, found {describe(b)}",
                b,
                "not a binding",
                "each binding is its own list: `[(a (f x)) (b (g a))]`",
            )
            return None
        name = sym(b.items[0]) if b.items else None
        if len(b.items) != 2 or name is None or not NAME.match(name):
            if name is not None and not NAME.match(name):
                msg, help = (
                    f"cannot bind `{name}`",
                    "binding names start with a letter or `_` and use letters, digits, `_`, `-`",
                )
            elif name is None:
                msg, help = "a binding must start with a name", "write `(name EXPR)`"
            else:
                n = len(b.items) - 1
                msg = f"binding of `{name}` has {n} expressions"
                help = f"write `({name} EXPR)` with exactly one expression"
            self.err("K0121", msg, b, "malformed binding", help)
            for item in b.items[1:]:
                self.parse_expr(item)
            return None
        bid = self.nid(b)
        return Binding(bid, name, self.parse_expr(b.items[1]))

    def parse_the(self, node: SList) -> Expr:
        """``(the TYPE EXPR)``."""
        items = node.items
        nid = self.nid(node)
        if len(items) != 3:
            n = len(items) - 1
            self.err(
                "K0122",
                f"`the` takes a type and an expression, got {n} item{'s' * (n != 1)}",
                node,
                "malformed ascription",
                "write `(the (tensor f32 [B D]) EXPR)`",
            )
            for item in items[2:]:
                self.parse_expr(item)
            return _DUMMY
        ty = self.parse_type(items[1])
        return The(nid, ty, self.parse_expr(items[2]))
