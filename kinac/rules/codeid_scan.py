"""A source file's imports and uses, per unit, read with :mod:`ast`: what code identity walks.

Why its own module: :mod:`kinac.rules.codeid` walks the import graph across files (closures,
hashes, the table of scans cached by stat); this is what it reads from each file, alone: the
units (``TOP``, each top-level function and class), the modules their imports load, the names
they use, and the aliases imports bind (:class:`FileScan`, :func:`scan_source`).
"""

from __future__ import annotations

import ast
import hashlib
from typing import Any

TOP = ""  # the unit of a file that runs when it is imported
SCAN_VERSION = 2  # of the scan rules: a persisted scan by older rules is redone


class FileScan:
    """What one source file imports, per unit: ``TOP`` (runs at import), each top-level function,
    and each top-level class (its methods). Per unit: the modules its import statements load and
    the names it uses (``alias.attr`` for an attribute of a name); ``aliases`` maps each name an
    import binds to ``[module, name]`` (``name`` None for a whole module). A name used is
    followed to the function or class it denotes, so a top-level ``from m import f`` costs
    ``m``'s import, not ``f``'s body, unless a unit that runs calls ``f``."""

    __slots__ = ("digest", "units", "aliases")

    def __init__(
        self,
        digest: str,
        units: dict[str, tuple[list[str], list[str]]],
        aliases: dict[str, list[Any]],
    ) -> None:
        self.digest = digest
        self.units = units
        self.aliases = aliases

    def to_doc(self) -> list[Any]:
        units = {u: [m, n] for u, (m, n) in self.units.items()}
        return [SCAN_VERSION, self.digest, units, self.aliases]

    @classmethod
    def from_doc(cls, doc: Any) -> FileScan:
        version, digest, units, aliases = doc  # a scan by other rules is rescanned
        if (
            version != SCAN_VERSION
            or not isinstance(digest, str)
            or not isinstance(units, dict)
            or not isinstance(aliases, dict)
        ):
            raise ValueError("bad scan")
        return cls(
            digest,
            {str(u): ([str(x) for x in m], [str(x) for x in n]) for u, (m, n) in units.items()},
            {str(k): [str(m), None if n is None else str(n)] for k, (m, n) in aliases.items()},
        )


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


class _Scanner(ast.NodeVisitor):
    """Collects, per unit, modules imported and names used (see :class:`FileScan`)."""

    def __init__(self, package: str) -> None:
        self.package = package
        self.unit = TOP
        self.mods: dict[str, set[str]] = {TOP: set()}
        self.uses: dict[str, set[str]] = {TOP: set()}
        self.aliases: dict[str, list[Any]] = {}
        self.strings: set[str] = set()
        self.dynamic: set[str] = set()

    def _in(self, unit: str, body: list[ast.stmt]) -> None:
        prev, self.unit = self.unit, unit
        self.mods.setdefault(unit, set())
        self.uses.setdefault(unit, set())
        for stmt in body:
            self.visit(stmt)
        self.unit = prev

    def visit_FunctionDef(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        for d in node.decorator_list:  # decorators run at definition time
            self.visit(d)
        if self.unit == TOP and node.col_offset == 0:
            self._in(node.name, node.body)
        else:
            for stmt in node.body:
                self.visit(stmt)

    visit_AsyncFunctionDef = visit_FunctionDef  # type: ignore[assignment]

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        if self.unit != TOP or node.col_offset != 0:
            self.generic_visit(node)
            return
        for expr in (*node.bases, *node.decorator_list):
            self.visit(expr)
        for stmt in node.body:  # the class body runs at import; its methods when called
            if isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef):
                self._in(node.name, [stmt])
            else:
                self.visit(stmt)

    def visit_If(self, node: ast.If) -> None:
        if _is_type_checking(node.test):  # never runs
            for stmt in node.orelse:
                self.visit(stmt)
            return
        self.generic_visit(node)

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            self.mods[self.unit].add(alias.name)
            if alias.asname:
                self.aliases[alias.asname] = [alias.name, None]
            else:
                self.aliases.setdefault(
                    alias.name.partition(".")[0], [alias.name.partition(".")[0], None]
                )

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        base = node.module or ""
        if node.level:
            pkg = self.package.split(".")
            pkg = pkg[: len(pkg) - node.level + 1]
            base = ".".join([*pkg, base] if base else pkg)
        self.mods[self.unit].add(base)
        for a in node.names:
            self.aliases[a.asname or a.name] = [base, a.name]

    def visit_Attribute(self, node: ast.Attribute) -> None:
        chain, value = [node.attr], node.value
        while isinstance(value, ast.Attribute):
            chain.append(value.attr)
            value = value.value
        if isinstance(value, ast.Name):  # ``a.b.c``: resolved through submodules later
            self.uses[self.unit].add(".".join([value.id, *reversed(chain)]))
        else:
            self.visit(value)

    def visit_Name(self, node: ast.Name) -> None:
        self.uses[self.unit].add(node.id)

    def visit_Call(self, node: ast.Call) -> None:
        fn = node.func
        name = (
            fn.attr if isinstance(fn, ast.Attribute) else fn.id if isinstance(fn, ast.Name) else ""
        )
        if name in ("import_module", "__import__") and node.args:
            arg = node.args[0]
            if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
                self.mods[self.unit].add(arg.value)
                self.uses[self.unit].add(arg.value)
                self.aliases[arg.value] = [arg.value, None]
            else:
                self.dynamic.add(self.unit)
        self.generic_visit(node)

    def visit_Constant(self, node: ast.Constant) -> None:
        if isinstance(node.value, str) and node.value.startswith("kinac."):
            self.strings.add(node.value)


def scan_source(module: str, text: bytes, is_package: bool = False) -> FileScan:
    """Scan one file's text (the unit the table caches); relative imports resolve against
    the module's package (the module itself for an ``__init__``)."""
    sc = _Scanner(module if is_package else module.rpartition(".")[0])
    try:
        sc.visit(ast.parse(text))
    except (SyntaxError, ValueError):
        pass  # a file that does not parse still has a digest; it cannot run anyway
    for unit in sc.dynamic:  # import_module(table[name]): every kinac module named in the file
        for s in sc.strings:
            sc.mods[unit].add(s)
            sc.uses[unit].add(s)
            sc.aliases[s] = [s, None]
    units = {
        u: (sorted(m for m in sc.mods[u] if m.startswith("kinac")), sorted(sc.uses[u]))
        for u in sc.mods
    }
    aliases = {k: v for k, v in sorted(sc.aliases.items()) if v[0].startswith("kinac")}
    return FileScan(hashlib.blake2b(text, digest_size=16).hexdigest(), units, aliases)
