"""An in-memory environment for the checker: parsed files in a dict, the solver called directly.

Why: tests, benchmarks and small tools need the whole checker without the rule engine. Name
resolution mirrors the pipeline's (own defns first, then the defns of directly imported files,
``std/…`` resolving to the shipped prelude as ``@kinac/std/…``); results are memoised here the
way the engine caches its queries.
"""

from __future__ import annotations

import os
import posixpath
from pathlib import Path

from kinac.check.formula import Formula, SolveResult
from kinac.check.infer import check_defn
from kinac.check.sig import DefnRef
from kinac.check.typed_ir import CheckedDefn
from kinac.reader import ast

PRELUDE_PREFIX = "@kinac/"
_STD_DIR = Path(__file__).resolve().parent.parent


def prelude_text() -> str:
    """Source of the shipped prelude ``std/nn.kina``."""
    return (_STD_DIR / "std" / "nn.kina").read_text(encoding="utf-8")


class InMemoryEnv:
    """Resolves over ``files`` (path -> ParsedFile); the prelude is parsed on demand."""

    def __init__(
        self,
        files: dict[str, ast.ParsedFile] | None = None,
        budget_ms: int = 2000,
        solve_cache: dict[Formula, SolveResult] | None = None,
    ) -> None:
        self.files: dict[str, ast.ParsedFile] = dict(files or {})
        self.budget_ms = budget_ms
        self.on_unknown = "error"
        self.solve_cache = solve_cache if solve_cache is not None else {}
        self.solver_calls = 0
        self._checked: dict[DefnRef, CheckedDefn] = {}
        self._callees: dict[DefnRef, tuple[tuple[DefnRef, int], ...]] = {}
        self._names: dict[str, tuple[ast.ParsedFile, dict[str, ast.Defn]]] = {}

    @classmethod
    def from_sources(cls, sources: dict[str, str], budget_ms: int = 2000) -> InMemoryEnv:
        """Parse ``sources`` (path -> text) with the reader."""
        from kinac.reader.parse import parse_file

        return cls({p: parse_file(p, t) for p, t in sources.items()}, budget_ms)

    def file(self, path: str) -> ast.ParsedFile | None:
        pf = self.files.get(path)
        if pf is None and path.startswith(PRELUDE_PREFIX):
            from kinac.reader.parse import parse_file

            full = _STD_DIR / path[len(PRELUDE_PREFIX) :]
            if full.is_file():
                pf = parse_file(path, full.read_text(encoding="utf-8"))
                self.files[path] = pf
        return pf

    def imports(self, path: str) -> list[str]:
        pf = self.file(path)
        out: list[str] = []
        if pf is None:
            return out
        here = posixpath.dirname(path)
        for imp in pf.imports:
            for cand in (posixpath.join(here, imp.path), imp.path):
                norm = os.path.normpath(cand).replace(os.sep, "/")
                if norm in self.files:
                    out.append(norm)
                    break
            else:
                if imp.path.startswith("std/") and (_STD_DIR / imp.path).is_file():
                    out.append(PRELUDE_PREFIX + imp.path)
        return out

    def _by_name(self, path: str) -> dict[str, ast.Defn]:
        """The first defn of each name in ``path`` (rebuilt if the parse was replaced), so a
        lookup is a dict probe, not a scan: checking a file stays linear in its size."""
        pf = self.file(path)
        if pf is None:
            return {}
        hit = self._names.get(path)
        if hit is None or hit[0] is not pf:
            table: dict[str, ast.Defn] = {}
            for d in pf.defns:
                table.setdefault(d.name, d)
            hit = (pf, table)
            self._names[path] = hit
        return hit[1]

    def defn(self, ref: DefnRef) -> ast.Defn | None:
        return self._by_name(ref.file).get(ref.name)

    # ------------------------------------------------------------ CheckEnv

    def lookup(self, file: str, name: str) -> tuple[DefnRef, ast.Signature] | None:
        for f in (file, *self.imports(file)):
            d = self._by_name(f).get(name)
            if d is not None:
                return DefnRef(f, name), d.signature
        return None

    def is_broken(self, file: str, name: str) -> bool:
        for f in (file, *self.imports(file)):
            pf = self.file(f)
            if pf is None:
                continue
            if any(d.name == name for d in pf.defns):
                return False
            if name in pf.broken_defns:
                return True
        return False

    def visible(self, file: str) -> tuple[str, ...]:
        out: list[str] = []
        for f in (file, *self.imports(file)):
            pf = self.file(f)
            if pf is not None:
                out.extend(d.name for d in pf.defns)
        return tuple(out)

    def meshes(self, file: str) -> tuple[ast.Mesh, ...]:
        out: list[ast.Mesh] = []
        for f in (file, *self.imports(file)):
            pf = self.file(f)
            if pf is not None:
                out.extend(pf.meshes)
        return tuple(out)

    def solve(self, formula: Formula) -> SolveResult:
        r = self.solve_cache.get(formula)
        if r is None:
            from kinac.check.solver import solve_formula

            self.solver_calls += 1
            r = solve_formula(formula, self.budget_ms)
            self.solve_cache[formula] = r
        return r

    # ------------------------------------------------------------ SpecEnv / GraphEnv

    def checked(self, ref: DefnRef) -> CheckedDefn:
        c = self._checked.get(ref)
        if c is None:
            d = self.defn(ref)
            if d is None:
                raise KeyError(f"no defn {ref.name} in {ref.file}")
            c = check_defn(ref.file, d, self)
            self._checked[ref] = c
        return c

    def callees(self, ref: DefnRef) -> tuple[tuple[DefnRef, int], ...]:
        from kinac.check.module import calls_of

        out = self._callees.get(ref)
        if out is None:
            d = self.defn(ref)
            out = calls_of(ref.file, d, self) if d is not None else ()
            self._callees[ref] = out
        return out

    def check_file(self, path: str) -> list[CheckedDefn]:
        """Check every defn of a file (first of each name)."""
        pf = self.file(path)
        assert pf is not None, path
        seen: set[str] = set()
        out: list[CheckedDefn] = []
        for d in pf.defns:
            if d.name not in seen:
                seen.add(d.name)
                out.append(self.checked(DefnRef(path, d.name)))
        return out
