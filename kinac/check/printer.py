"""Printing the typed IR: the inferred type of every ``let`` binding (``kinac check --types``).

Why: the checker's view of a program should be inspectable in the language's own syntax.
"""

from __future__ import annotations

from kinac.check.typed_ir import CheckedDefn, TCall, TExpr, TLet, TPrim
from kinac.check.types import fmt_type


def _bindings(e: TExpr, depth: int, out: list[str]) -> None:
    if isinstance(e, TLet):
        for b in e.bindings:
            _bindings(b.value, depth, out)
            out.append("  " * depth + f"{b.name} : {fmt_type(b.value.type)}")
        _bindings(e.body, depth, out)
    elif isinstance(e, TPrim | TCall):
        for a in e.args:
            _bindings(a, depth, out)


def format_types(checked: CheckedDefn) -> str:
    """``defn NAME`` then ``  name : TYPE`` for every let binding (in evaluation order) and
    ``  => TYPE`` for the result; a defn with errors prints ``(not typed: N errors)``."""
    head = f"defn {checked.ref.name}"
    if checked.body is None:
        n = sum(1 for d in checked.diagnostics if d.is_error)
        return f"{head}  (not typed: {n} error{'s' if n != 1 else ''})\n"
    lines = [head]
    _bindings(checked.body, 1, lines)
    lines.append(f"  => {fmt_type(checked.body.type)}")
    return "\n".join(lines) + "\n"
