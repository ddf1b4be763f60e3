"""The Kina reader: source text -> span-free AST plus span tables and diagnostics (K01xx).

Public entry point: :func:`parse_file`. Lower layers (:mod:`.lexer`, :mod:`.sexpr`) are usable
on their own for tools (formatters, editors) that want tokens or the raw S-expression tree.
"""

from kinac.reader.parse import default_module, parse_file

__all__ = ["default_module", "parse_file"]
