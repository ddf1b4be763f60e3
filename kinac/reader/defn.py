"""Parsing of one ``defn`` form: name, parameters, return type, ``where`` and body.

Node ids restart at 0 in every defn (the defn form itself), so an edit inside one defn moves
no id of another; signature ids come before body ids, so a body edit leaves the signature's
value (and fingerprint) unchanged.
"""

from __future__ import annotations

from typing import TypeGuard

from kinac.reader.ast import Constraint, Defn, Param, Signature
from kinac.reader.expr import ExprParser
from kinac.reader.sexpr import SAtom, SList, SNode
from kinac.reader.sig import NAME, RELATIONS, describe, sym

_DEFN_SHAPE = "`(defn NAME [PARAM …] -> TYPE (where …)? BODY)`"
_PARAM_HELP = "write `(x : (tensor f32 [N]))`, or `(H : dim)` for a dimension parameter"
_RESERVED = ("let", "the", "defn", "import", "mesh", "module", "tensor", "dim")


class DefnParser(ExprParser):
    """One ``defn`` form: its span table starts at nid 0 with the form itself."""

    def parse_defn(self, node: SList) -> Defn | None:
        items = node.items
        self.nid(node)  # nid 0: the defn form
        name = sym(items[1]) if len(items) > 1 else None
        if name is None or not NAME.match(name) or name in _RESERVED:
            at = items[1] if len(items) > 1 else node
            if name is not None and NAME.match(name):
                msg, help = f"`{name}` is reserved and cannot name a defn", "choose another name"
            else:
                msg = (
                    "defn needs a name"
                    if len(items) < 2
                    else f"expected a defn name, found {describe(items[1])}"
                )
                help = "write " + _DEFN_SHAPE
            self.err("K0116", msg, at, "expected a name", help)
            return None
        if len(items) < 3 or not isinstance(items[2], SList):
            at = items[2] if len(items) > 2 else node
            self.err(
                "K0116",
                f"defn `{name}` has no parameter vector",
                at,
                "expected `[PARAM …]`",
                f"write the parameters after the name; with none: `(defn {name} [] -> TYPE BODY)`",
            )
            return None
        params = tuple(p for p in map(self.parse_param, items[2].items) if p is not None)
        if len(items) < 4 or sym(items[3]) != "->":
            at = items[3] if len(items) > 3 else node
            self.err(
                "K0116",
                f"expected `->` after the parameters of `{name}`",
                at,
                "expected `->`",
                "insert `->` before the return type: " + _DEFN_SHAPE,
            )
            return None
        if len(items) < 5:
            self.err(
                "K0116",
                f"defn `{name}` has no return type",
                node,
                "expected `-> TYPE`",
                "add the return type and the body: " + _DEFN_SHAPE,
            )
            return None
        ret = self.parse_type(items[4])
        rest = items[5:]
        where: list[Constraint] = []
        if len(rest) == 1 and _only_constraints(rest[0]):
            self.err(
                "K0116",
                f"defn `{name}` has no body",
                rest[0],
                "these are assumptions, not a body",
                "add the body expression after the `(where …)` form",
            )
            return None
        if len(rest) >= 2 and _is_where(rest[0]):
            for c in rest[0].items[1:]:
                con = self.parse_constraint(c)
                if con is not None:
                    where.append(con)
            rest = rest[1:]
        if len(rest) != 1:
            if not rest:
                self.err(
                    "K0116",
                    f"defn `{name}` has no body",
                    node,
                    "expected a body expression",
                    "add the expression that computes the result after the return type",
                )
            else:
                self.err(
                    "K0116",
                    f"defn `{name}` has {len(rest)} body expressions",
                    rest[1],
                    "extra expression",
                    "a defn has one body expression: combine them with `let`; "
                    "assumptions go first, in one `(where …)`",
                )
            return None
        sig = Signature(name, params, ret, tuple(where))
        return Defn(sig, self.parse_expr(rest[0]))

    def parse_param(self, node: SNode) -> Param | None:
        """``(x : TYPE)`` or ``(H : dim)``."""
        if self.silent(node):
            return None
        if not isinstance(node, SList):
            name = sym(node)
            help = f"write `({name} : TYPE)` or `({name} : dim)`" if name else _PARAM_HELP
            self.err(
                "K0117",
                f"expected a parameter `(name : TYPE)`, found {describe(node)}",
                node,
                "not a parameter",
                help,
            )
            return None
        items = node.items
        name = sym(items[0]) if items else None
        if name is not None and not NAME.match(name) and name != ":":
            self.err(  # `x?`, `x.y`: a symbol, but not one a binder may use
                "K0117",
                f"`{name}` is not a valid parameter name",
                items[0],
                "not a name",
                "names start with a letter or `_` and use letters, digits, `_` and `-` (`w_q`, "
                "`h-1`; a dimension's name has no `-`)",
            )
            return None
        if name is None or not NAME.match(name):
            at = items[0] if items else node
            self.err(
                "K0117", "a parameter must start with its name", at, "expected a name", _PARAM_HELP
            )
            return None
        if len(items) == 2 and isinstance(items[1], SAtom) and items[1].kind == "kw":
            kw = str(items[1].value)
            self.err(
                "K0117",
                f"`:{kw}` reads as a keyword, not `:` and a type",
                items[1],
                "missing space",
                f"put a space after the colon: `({name} : {kw})`",
            )
            return None
        if len(items) < 2 or sym(items[1]) != ":":
            self.err(
                "K0117",
                f"parameter `{name}` has no `:` before its type",
                node,
                "expected `(name : TYPE)`",
                f"write `({name} : TYPE)` or `({name} : dim)`",
            )
            return None
        if len(items) != 3:
            at = node if len(items) < 3 else items[3]
            what = "has no type" if len(items) < 3 else "has more than one type"
            self.err(
                "K0117",
                f"parameter `{name}` {what}",
                at,
                "expected one type",
                f"write `({name} : TYPE)`; one parameter per list: `[(a : T) (b : T)]`",
            )
            return None
        nid = self.nid(node)
        if sym(items[2]) == "dim":
            return Param(nid, name, None, True)
        return Param(nid, name, self.parse_type(items[2]))


def _is_where(node: SNode) -> TypeGuard[SList]:
    return isinstance(node, SList) and bool(node.items) and sym(node.items[0]) == "where"


def _only_constraints(node: SNode) -> bool:
    """``(where (= a b) …)``: constraints, not the ``where`` primitive (whose arguments are
    expressions, and no expression starts with a relation such as ``=`` or ``divides``)."""
    if not _is_where(node):
        return False
    args = node.items[1:]
    return bool(args) and all(
        isinstance(a, SList) and bool(a.items) and sym(a.items[0]) in RELATIONS for a in args
    )
