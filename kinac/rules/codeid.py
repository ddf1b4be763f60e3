"""Code identity of a query: a hash of every kinac source file that running it can execute.

Why: a memo must never outlive the code that computed it. Hand-kept lists of packages drift
(editing ``tir/graph.py``'s dtype table used not to invalidate ``check_defn``), so the set is
read from the import graph instead. For a query function it is:

* its own module, with that module's top-level imports, the imports inside the query function
  and inside every helper function of the module (but not inside *other* queries of the module:
  those run as queries of their own, with their own identity);
* then, transitively, every kinac module any of those imports anywhere (top level or inside a
  function: a lazy import runs when the function does), with the ``__init__`` of each package
  on the way, and ``importlib.import_module(...)`` calls: a literal argument names its module;
  any other argument makes every string constant of that file that names a kinac module count
  (the lazy-export tables, for instance);
* a name is followed to where it is *defined*: ``from kinac.check import check_defn`` reaches
  ``check/__init__``, which only re-exports it, and on to ``check/infer.py``'s function (with
  its lazy imports); a name that is a submodule (``from pkg import sub``, ``a.b.c.f``) walks
  on to it (``sub`` used whole, ``f`` in ``a.b.c``); a package used whole counts every name it
  re-exports. A submodule imported by name and never used (``pipeline.py``'s registrations)
  is imported for its side effects, not for a query's value: not followed.

Imports are read with :mod:`ast`. Scanning all of kinac costs ~0.2 s, so each file's scan is
cached by (mtime, ctime, size) in a table the store persists: a fresh process stats ~150 files and
re-reads only those that changed. The installed kinac is thus verified once per process, never
per query.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from kinac.rules.codeid_scan import TOP, FileScan, scan_source

KINAC_DIR = Path(__file__).resolve().parent.parent
ALL = "*"  # every unit of a file (a module used as a whole)


def module_file(module: str, root: Path = KINAC_DIR) -> Path | None:
    """The source file of a kinac module (``kinac.check.sig`` -> ``check/sig.py``), or None."""
    parts = module.split(".")
    if parts[0] != "kinac" or not all(p.isidentifier() for p in parts):
        return None
    base = root.joinpath(*parts[1:])
    if (base / "__init__.py").is_file():
        return base / "__init__.py"
    f = base.with_suffix(".py")
    return f if len(parts) > 1 and f.is_file() else None


def _parents(module: str) -> list[str]:
    parts = module.split(".")
    return [".".join(parts[:i]) for i in range(1, len(parts))]


class CodeIndex:
    """Scans of kinac's sources, cached by their stat; closures and their hashes."""

    def __init__(self, root: Path = KINAC_DIR, read: Callable[[Path], bytes] | None = None) -> None:
        self.root = root
        self.read = read or (lambda p: p.read_bytes())
        # relpath -> (mtime_ns, ctime_ns, size, scan); ctime too, which no tool can set back
        # (``cp -p``, ``rsync -t`` and ``touch -r`` keep the mtime of an edited file)
        self._table: dict[str, tuple[int, int, int, FileScan]] = {}
        self._fresh: dict[str, FileScan | None] = {}  # module -> scan checked in this process
        self._ids: dict[str, str] = {}  # "module:function" -> identity, valid for _stamp
        self._edge_memo: dict[tuple[str, str], tuple[tuple[str, str], ...] | None] = {}
        self._stamp: str | None = None
        self._load_files: Callable[[], Any] | None = None
        self.ids_changed = False
        self.files_changed = False

    def stamp(self) -> str:
        """Hash of every kinac source's (path, mtime, ctime, size): computed once per process."""
        if self._stamp is None:
            h = hashlib.blake2b(digest_size=16)
            stack = [self.root]
            while stack:
                d = stack.pop()
                with os.scandir(d) as it:
                    for e in sorted(it, key=lambda e: e.name):
                        if e.is_dir() and e.name != "__pycache__":
                            stack.append(Path(e.path))
                        elif e.name.endswith(".py"):
                            st = e.stat()
                            h.update(
                                f"{e.path}|{st.st_mtime_ns}|{st.st_ctime_ns}|{st.st_size}\n".encode()
                            )
            self._stamp = h.hexdigest()
        return self._stamp

    # ---------------------------------------------------------------- persistence

    def seed(self, ids: Any, files: Callable[[], Any] | None = None) -> None:
        """Adopt persisted identities (``{"stamp", "ids"}``) when no source changed since they
        were computed; ``files`` loads the per-file table, only if a scan is needed. Anything
        malformed is ignored (and recomputed)."""
        if (
            isinstance(ids, dict)
            and ids.get("stamp") == self.stamp()
            and isinstance(ids.get("ids"), dict)
        ):
            for k, v in ids["ids"].items():
                if isinstance(k, str) and isinstance(v, str):
                    self._ids.setdefault(k, v)
        self._load_files = files

    def _adopt_files(self) -> None:
        load, self._load_files = self._load_files, None
        doc = load() if load is not None else None
        if not isinstance(doc, dict):
            return
        for rel, entry in doc.items():
            try:
                mtime, ctime, size, scan = entry  # an older 3-field entry is rescanned
                self._table.setdefault(
                    str(rel), (int(mtime), int(ctime), int(size), FileScan.from_doc(scan))
                )
            except (TypeError, ValueError):
                continue

    def export_ids(self) -> dict[str, Any]:
        """The identities, valid for this stamp (small: read by every build)."""
        return {"stamp": self.stamp(), "ids": dict(sorted(self._ids.items()))}

    def export_files(self) -> dict[str, Any]:
        """The per-file scan table (read only after kinac's sources changed)."""
        return {
            rel: [m, c, s, scan.to_doc()] for rel, (m, c, s, scan) in sorted(self._table.items())
        }

    # ---------------------------------------------------------------- scanning

    def scan(self, module: str) -> FileScan | None:
        """The scan of a kinac module's file, reusing the table when its stat matches."""
        if module in self._fresh:
            return self._fresh[module]
        if self._load_files is not None:
            self._adopt_files()
        path = module_file(module, self.root)
        scan: FileScan | None = None
        if path is not None:
            rel = path.relative_to(self.root).as_posix()
            st = os.stat(path)
            cached = self._table.get(rel)
            stat = (st.st_mtime_ns, st.st_ctime_ns, st.st_size)
            if cached is not None and cached[:3] == stat:
                scan = cached[3]
            else:
                scan = scan_source(module, self.read(path), path.name == "__init__.py")
                self._table[rel] = (*stat, scan)
                self.files_changed = True
        self._fresh[module] = scan
        return scan

    def closure(
        self, module: str, function: str | None = None, skip: Iterable[tuple[str, str]] = ()
    ) -> list[str]:
        """Every kinac module whose code running ``module.function`` may execute (sorted).

        ``skip`` holds ``(module, function)`` pairs that run as queries of their own: a use of
        one is not followed (the engine tracks it as a dependency instead)."""
        skipped = set(skip) - {(module, function or TOP)}
        seen: set[tuple[str, str]] = set()
        modules: set[str] = set()
        todo: list[tuple[str, str]] = [(module, TOP), (module, function or TOP)]
        while todo:
            node = todo.pop()
            if node in seen or node in skipped:
                continue
            seen.add(node)
            edges = self._edges(*node)
            if edges is not None:
                modules.add(node[0])
                todo.extend(edges)
        return sorted(modules)

    def _edges(self, mod: str, unit: str) -> tuple[tuple[str, str], ...] | None:
        """What running ``unit`` of ``mod`` may run next (None: not a kinac module), memoised:
        the graph is the same for every closure, which only walks it."""
        key = (mod, unit)
        if key in self._edge_memo:
            return self._edge_memo[key]
        scan = self.scan(mod)
        got: dict[tuple[str, str], None] | None = None
        if scan is not None:
            got = dict.fromkeys((p, TOP) for p in _parents(mod))
            if unit == ALL and self._is_package(mod):  # used whole: any name it re-exports
                for name in scan.aliases:
                    got.update(dict.fromkeys(self._resolve(mod, scan, name)))
            elif unit not in scan.units:  # a name it imports (a re-export): its definition
                got.update(dict.fromkeys(self._resolve(mod, scan, unit)))
            for u in list(scan.units) if unit == ALL else [unit]:
                mods, uses = scan.units.get(u, ([], []))
                for m in mods:
                    got[(m, TOP)] = None
                    got.update(dict.fromkeys((p, TOP) for p in _parents(m)))
                for name in uses:
                    got.update(dict.fromkeys(self._resolve(mod, scan, name)))
        edges = self._edge_memo[key] = None if got is None else tuple(got)
        return edges

    def _is_package(self, module: str) -> bool:
        path = module_file(module, self.root)
        return path is not None and path.name == "__init__.py"

    def _resolve(self, mod: str, scan: FileScan, name: str) -> list[tuple[str, str]]:
        """The units a name used in ``mod`` may run: walked through aliases and submodules."""
        base, *rest = name.split(".")
        if base in scan.units and base != TOP:
            return [(mod, base)]
        target = scan.aliases.get(base)
        if target is None:
            return []
        tmod, tname = target
        if tname is not None:
            rest.insert(0, tname)
        got: list[tuple[str, str]] = []
        for attr in rest:  # module.attr: a submodule (walked on), or that function or class
            got.append((tmod, TOP))
            sub = f"{tmod}.{attr}"
            if self.scan(sub) is None:
                return [*got, (tmod, attr)]
            tmod = sub
        return [*got, (tmod, ALL)]

    def identity(
        self, module: str, function: str | None = None, skip: Iterable[tuple[str, str]] = ()
    ) -> str:
        """Hash of the closure's sources (module names and contents), memoised per stamp."""
        key = f"{module}:{function or ''}"
        got = self._ids.get(key)
        if got is None:
            h = hashlib.blake2b(digest_size=16)
            for m in self.closure(module, function, skip):
                scan = self.scan(m)
                if scan is not None:
                    h.update(f"{m}={scan.digest}\n".encode())
            got = self._ids[key] = h.hexdigest()
            self.ids_changed = True
        return got


CODE = CodeIndex()
"""The process-wide index of the installed kinac (seeded from, and saved to, the store)."""
