"""The Kina reader: source text -> span-free AST plus span tables and diagnostics (K01xx).

Entry point: :func:`parse_file`. The lower layers are usable on their own by tools that want
tokens (:func:`tokenize`) or the raw S-expression tree (:func:`read_tree`); :func:`dump_parsed`
renders a parse as stable text. Decisions the spec leaves open are listed in ``README.md``.

The names below load on first use, so ``from kinac.reader import ast`` (which every later
stage does) does not compile the lexer's regular expressions.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the same names, eagerly, for type checkers
    from kinac.reader.dump import dump_parsed
    from kinac.reader.errors import CODES
    from kinac.reader.lexer import Token, tokenize
    from kinac.reader.parse import default_module, parse_file
    from kinac.reader.sexpr import SList, read_tree
    from kinac.reader.source import Source

_EXPORTS = {
    "CODES": "kinac.reader.errors",
    "SList": "kinac.reader.sexpr",
    "Source": "kinac.reader.source",
    "Token": "kinac.reader.lexer",
    "default_module": "kinac.reader.parse",
    "dump_parsed": "kinac.reader.dump",
    "parse_file": "kinac.reader.parse",
    "read_tree": "kinac.reader.sexpr",
    "tokenize": "kinac.reader.lexer",
}
__all__ = [
    "CODES",
    "SList",
    "Source",
    "Token",
    "default_module",
    "dump_parsed",
    "parse_file",
    "read_tree",
    "tokenize",
]


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        return getattr(importlib.import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module 'kinac.reader' has no attribute {name!r}")
