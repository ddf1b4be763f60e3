"""The kinac pipeline, one query per stage and per definition.

    source_text ─► parse ─► file_index ─┬► signature ─┐
                         └► defn_ast ───┴────────────► check_defn ─► file_report ─► build
    entry_graph (specialise) ─► lowered ─► object_code ─► runtime (kinac.api)
                             └► gpu_lowered ─► ptx ─► CUDA runtime (target cuda)

Inputs (the only queries that read the world) are ``config_text``, ``source_text`` and
``source_listing``. Everything else is a pure function of other queries. ``signature`` and
``defn_ast`` are the firewalls: a comment edit stops at ``parse`` (its outputs are span-free
and compare equal), a body edit reaches only that defn's ``check_defn``, and a signature edit
reaches exactly the callers.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from typing import TYPE_CHECKING

from kinac.diag.model import Diagnostic, Label, NodeRef, Span
from kinac.rules import Database, input_query, query
from kinac.rules.codec import record
from kinac.workspace.model import ConfigResult, WorkspaceConfig

if TYPE_CHECKING:  # the reader's records load lazily: a no-op build never needs them
    from kinac.reader.ast import Defn, Mesh, ParsedFile, Signature

PRELUDE_PREFIX = "@kinac/"
PRELUDE_DIR = Path(__file__).resolve().parent
SKIP_DIRS = {".git", ".kinac-cache", "__pycache__", ".venv", "node_modules"}


@record
class DefnKey:
    """A defn by workspace-relative file path and name: the key of every per-defn query."""

    file: str
    name: str


@record
class FileIndex:
    """What other files and later stages need of a file: span-free and body-free."""

    module: str
    imports: tuple[str, ...]  # resolved paths (``@kinac/std/nn.kina`` for the prelude)
    meshes: tuple[Mesh, ...]
    defns: tuple[str, ...]  # source order, duplicates included
    import_errors: tuple[Diagnostic, ...] = ()


@record
class FileReport:
    """All diagnostics of one file, in source order."""

    file: str
    diagnostics: tuple[Diagnostic, ...]


@record
class BuildReport:
    """The result of ``build``: diagnostics per file and the artifacts produced."""

    files: tuple[FileReport, ...]
    artifacts: tuple[tuple[str, str, str], ...]  # (entry, kind, fingerprint)

    @property
    def error_count(self) -> int:
        return sum(1 for f in self.files for d in f.diagnostics if d.is_error)


# ---------------------------------------------------------------------------- inputs


@input_query("config_text")
def config_text(db: Database, _: tuple[()]) -> str | None:
    """Text of ``kina.toml`` (None for a single-file build or when absent)."""
    cfg = db.context.get("config_path")
    if cfg is None:
        return None
    try:
        return Path(cfg).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None


@input_query("source_listing")
def source_listing(db: Database, _: tuple[()]) -> tuple[str, ...]:
    """Every ``.kina`` file under the workspace root (relative paths, sorted)."""
    single = db.context.get("single_file")
    if single is not None:
        return (single,)
    root = Path(db.context["root"])
    out: list[str] = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if d not in SKIP_DIRS and not d.startswith(".")]
        rel = Path(dirpath).relative_to(root)
        out.extend((rel / f).as_posix() for f in filenames if f.endswith(".kina"))
    return tuple(sorted(out))


@input_query("source_text")
def source_text(db: Database, path: str) -> str | None:
    """Text of a source file (the prelude for ``@kinac/...``), None when unreadable."""
    if path.startswith(PRELUDE_PREFIX):
        full = PRELUDE_DIR / path[len(PRELUDE_PREFIX):]
    else:
        full = Path(db.context["root"]) / path
    try:
        return full.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None


# ---------------------------------------------------------------------------- workspace


@query("config", stage="read", code=("workspace",))
def config(db: Database, _: tuple[()]) -> ConfigResult:
    """The validated workspace configuration (pydantic runs only when kina.toml changed)."""
    text = config_text(db, ())
    default_name = str(db.context.get("default_name", "workspace"))
    if text is None:
        return ConfigResult(WorkspaceConfig(name=default_name))
    from kinac.workspace.schema import validate

    return validate(text, default_name)


@query("source_files", stage="read", code=("pipeline",))
def source_files(db: Database, _: tuple[()]) -> tuple[str, ...]:
    """The workspace's sources: the listing filtered by ``sources``/``exclude`` globs."""
    from fnmatch import fnmatch

    listing = source_listing(db, ())
    cfg = config(db, ()).config
    if cfg is None or db.context.get("single_file") is not None:
        return listing

    def match(path: str, pat: str) -> bool:
        return fnmatch(path, pat) or (pat.startswith("**/") and fnmatch(path, pat[3:]))

    return tuple(p for p in listing if any(match(p, g) for g in cfg.sources)
                 and not any(match(p, g) for g in cfg.exclude))


# ---------------------------------------------------------------------------- reading


@query("parse", stage="read", code=("reader",))
def parse(db: Database, path: str) -> ParsedFile:
    """The reader's full output for one file (spans included: re-runs on any edit)."""
    from kinac.reader.parse import parse_file

    text = source_text(db, path)
    if text is None:
        text = ""
    return parse_file(path, text)


def _resolve_import(path: str, target: str, files: tuple[str, ...]) -> str | None:
    here = Path(path).parent
    for cand in ((here / target).as_posix(), target):
        norm = os.path.normpath(cand).replace(os.sep, "/")
        if norm in files:
            return norm
    if (PRELUDE_DIR / target).is_file() and target.startswith("std/"):
        return PRELUDE_PREFIX + target
    return None


@query("file_index", stage="read", code=("pipeline",))
def file_index(db: Database, path: str) -> FileIndex:
    """Firewall: a file's module name, resolved imports, meshes and defn names."""
    pf = parse(db, path)
    files = source_files(db, ()) if not path.startswith(PRELUDE_PREFIX) else ()
    imports: list[str] = []
    errors: list[Diagnostic] = []
    for imp in pf.imports:
        resolved = _resolve_import(path, imp.path, files)
        if resolved is None:
            errors.append(Diagnostic(
                "K0150", "error", f"cannot find the imported file {imp.path!r}",
                Label(NodeRef(path, "", imp.nid), "imported here"),
                help="paths are relative to this file or to the workspace root; the prelude is \"std/nn.kina\"",
            ))
        elif resolved not in imports:
            imports.append(resolved)
    return FileIndex(pf.module, tuple(imports), pf.meshes, tuple(d.name for d in pf.defns), tuple(errors))


@query("defn_ast", stage="read", code=("pipeline",))
def defn_ast(db: Database, key: DefnKey) -> Defn | None:
    """Firewall: one defn's AST (span-free), the first of that name in its file."""
    for d in parse(db, key.file).defns:
        if d.name == key.name:
            return d
    return None


@query("signature", stage="read", code=("pipeline",))
def signature(db: Database, key: DefnKey) -> Signature | None:
    """Firewall: a defn's signature, unchanged by edits to its body."""
    d = defn_ast(db, key)
    return d.signature if d is not None else None


@query("scope", stage="read", code=("pipeline",))
def scope(db: Database, path: str) -> tuple[tuple[str, DefnKey], ...]:
    """Names visible in a file: its own defns first, then those of the files it imports."""
    seen: dict[str, DefnKey] = {}
    idx = file_index(db, path)
    for name in idx.defns:
        seen.setdefault(name, DefnKey(path, name))
    for imp in idx.imports:
        for name in file_index(db, imp).defns:
            seen.setdefault(name, DefnKey(imp, name))
    return tuple(sorted(seen.items()))


def resolve_span(db: Database, loc: Span | NodeRef) -> Span | None:
    """Where a node is *now* (used only when rendering diagnostics)."""
    if isinstance(loc, Span):
        return loc
    pf = parse(db, loc.file)
    table = pf.top_spans
    if loc.defn:
        name, _, nth = loc.defn.partition("#")  # "f#2": the second defn called f
        want = int(nth) if nth.isdigit() else 1
        table = None  # type: ignore[assignment]
        for d, spans in zip(pf.defns, pf.defn_spans, strict=False):
            if d.name == name:
                want -= 1
                if want == 0:
                    table = spans
                    break
    if table is None or not 0 <= loc.nid < len(table.spans):
        return None
    return table.spans[loc.nid]


def display_source(db: Database, path: str) -> str | None:
    return source_text(db, path)


# ---------------------------------------------------------------------------- reports


@query("parse_diagnostics", stage="read", code=("pipeline",))
def parse_diagnostics(db: Database, path: str) -> tuple[Diagnostic, ...]:
    """Firewall: the reader's errors alone (usually empty, so edits stop here)."""
    return parse(db, path).diagnostics


@query("file_report", stage="build", code=("pipeline",))
def file_report(db: Database, path: str) -> FileReport:
    """Every diagnostic of one file: reading, imports, duplicates, then each defn's check."""
    idx = file_index(db, path)
    diags: list[Diagnostic] = [*parse_diagnostics(db, path), *idx.import_errors]
    seen: dict[str, int] = {}
    for name in idx.defns:
        seen[name] = seen.get(name, 0) + 1
        if seen[name] == 2:
            diags.append(Diagnostic(
                "K0201", "error", f"the name `{name}` is defined twice in this module",
                Label(NodeRef(path, f"{name}#2", 0), "defined again here"),
                (Label(NodeRef(path, name, 0), "first defined here"),),
                notes=("defns may call each other in any order, so names must be unique per module",),
                help=f"rename or remove one of the `{name}` defns",
            ))
    for name in seen:
        diags.extend(check_diagnostics(db, DefnKey(path, name)))
    return FileReport(path, tuple(diags))


# ---------------------------------------------------------------------------- checking


@query("solver_budget", stage="read", code=("pipeline",))
def solver_budget(db: Database, _: tuple[()]) -> int:
    """Firewall: the one setting the checker reads, so other kina.toml edits re-check nothing."""
    cfg = config(db, ()).config
    return cfg.solver_budget_ms if cfg is not None else 2000


@query("resolve_name", stage="check", code=("pipeline",))
def resolve_name(db: Database, key: tuple[str, str]) -> DefnKey | None:
    """Firewall: which defn ``name`` means in ``file`` (changes only if that answer changes)."""
    file, name = key
    for n, ref in scope(db, file):
        if n == name:
            return ref
    return None


@query("solve", stage="check", tools=("z3-solver",), code=("check",))
def solve(db: Database, key: tuple[Any, int]) -> Any:
    """One canonical, alpha-renamed obligation: solved once for the whole cache."""
    from kinac.check import solve_formula

    formula, budget_ms = key
    return solve_formula(formula, budget_ms)


class _CheckEnv:
    """The checker's environment (kinac.check.CheckEnv), answered by queries."""

    def __init__(self, db: Database) -> None:
        self.db = db
        self.budget_ms = solver_budget(db, ())

    def lookup(self, file: str, name: str) -> Any:
        from kinac.check import DefnRef

        ref = resolve_name(self.db, (file, name))
        if ref is None:
            return None
        sig = signature(self.db, ref)
        return (DefnRef(ref.file, ref.name), sig) if sig is not None else None

    def visible(self, file: str) -> tuple[str, ...]:
        return tuple(n for n, _ in scope(self.db, file))

    def meshes(self, file: str) -> tuple[Mesh, ...]:
        idx = file_index(self.db, file)
        return idx.meshes + tuple(m for imp in idx.imports for m in file_index(self.db, imp).meshes)

    def solve(self, formula: Any) -> Any:
        return solve(self.db, (formula, self.budget_ms))

    def checked(self, ref: Any) -> Any:
        return check_defn(self.db, DefnKey(ref.file, ref.name))

    def callees(self, ref: Any) -> Any:
        return callees(self.db, DefnKey(ref.file, ref.name))


@query("callees", stage="check", code=("check", "pipeline"))
def callees(db: Database, key: DefnKey) -> tuple[Any, ...]:
    """The defns a defn's body calls (for recursion detection), cached per body."""
    from kinac.check import calls_of

    d = defn_ast(db, key)
    return calls_of(key.file, d, _CheckEnv(db)) if d is not None else ()


@query("check_defn", stage="check", code=("check", "pipeline", "std"), tools=("z3-solver",))
def check_defn(db: Database, key: DefnKey) -> Any:
    """Type-check one defn against its callees' signatures: the per-defn check query."""
    from kinac.check import DefnRef, find_recursion, primitive_shadow
    from kinac.check import check_defn as check

    d = defn_ast(db, key)
    assert d is not None, f"no defn {key}"
    env = _CheckEnv(db)
    checked = check(key.file, d, env)
    extra = [x for x in (primitive_shadow(key.file, d), find_recursion(DefnRef(key.file, key.name), env))
             if x is not None]
    if extra:
        from dataclasses import replace

        checked = replace(checked, body=None, diagnostics=(*checked.diagnostics, *extra))
    return checked


def check_diagnostics(db: Database, key: DefnKey) -> tuple[Diagnostic, ...]:
    """Diagnostics of one defn's type check."""
    return check_defn(db, key).diagnostics  # type: ignore[no-any-return]


@query("build", stage="build", code=("pipeline",))
def build(db: Database, _: tuple[()]) -> BuildReport:
    """The whole workspace: every file's report, then every entry's artifacts."""
    reports = tuple(file_report(db, p) for p in source_files(db, ()))
    artifacts: list[tuple[str, str, str]] = []
    cfg = config(db, ()).config
    if cfg is not None and not any(d.is_error for r in reports for d in r.diagnostics):
        entry_files, arts = entry_artifacts(db, cfg)
        reports += tuple(entry_files)
        artifacts.extend(arts)
    return BuildReport(reports, tuple(artifacts))


# ---------------------------------------------------------------------------- entries


@record
class EntryKey:
    """A defn specialised at concrete dims and dtypes for a target: one compiled artifact."""

    file: str
    defn: str
    dims: tuple[tuple[str, Any], ...]  # int, or a tuple of ints for a variadic group
    dtypes: tuple[tuple[str, str], ...]
    target: str = "cpu"


@query("find_defn", stage="check", code=("pipeline",))
def find_defn(db: Database, key: tuple[str, str | None]) -> tuple[DefnKey, ...]:
    """Every defn called ``name`` in the workspace (or in ``file``): zero, one, or ambiguous."""
    name, file = key
    files = (file,) if file is not None else source_files(db, ())
    return tuple(DefnKey(f, name) for f in files if name in file_index(db, f).defns)


@query("entry_graph", stage="lower", code=("check", "tir", "pipeline"))
def entry_graph(db: Database, key: EntryKey) -> Any:
    """The entry's concrete graph: every call inlined at concrete dims (kinac.check.specialise)."""
    from kinac.check import DefnRef, specialise

    device = "cpu" if key.target == "cpu" else "cuda:0"
    return specialise(DefnRef(key.file, key.defn), dict(key.dims), dict(key.dtypes), _CheckEnv(db),
                      default_device=device)


@query("lowered", stage="lower", code=("ir", "tir"), tools=("xdsl",))
def lowered(db: Database, key: EntryKey) -> Any:
    """The entry lowered through the xDSL dialects to LLVM IR, with its calling plan."""
    from kinac.ir import lower_graph

    spec = entry_graph(db, key)
    return lower_graph(spec.graph) if spec.graph is not None else None


@input_query("host_target")
def host_target(db: Database, _: tuple[()]) -> Any:
    """The host CPU that object code is compiled for: an explicit input, never ambient."""
    from kinac.codegen.llvm import host_target as detect

    return detect()


@query("object_code", stage="codegen", code=("codegen",), tools=("llvmlite",))
def object_code(db: Database, key: EntryKey) -> bytes | None:
    """Native object code for the host (llvmlite, -O3, the host CPU's features)."""
    from kinac.codegen.llvm import compile_object

    lo = lowered(db, key)
    return compile_object(lo.llvm_ir, host_target(db, ())) if lo is not None else None


def gpu_arch(db: Database) -> str:
    """The workspace's ``target.arch`` (``sm_90`` without a kina.toml)."""
    cfg = config(db, ()).config
    return cfg.target.arch if cfg is not None else "sm_90"


@query("gpu_lowered", stage="lower", code=("ir", "tir"), tools=("xdsl",))
def gpu_lowered(db: Database, key: EntryKey) -> Any:
    """The entry lowered for the GPU: LLVM IR for NVPTX, cuBLAS calls and launch plan."""
    from kinac.ir.gpu_pipeline import lower_graph_gpu

    spec = entry_graph(db, key)
    return lower_graph_gpu(spec.graph) if spec.graph is not None else None


@query("ptx", stage="codegen", code=("codegen",), tools=("llvmlite",))
def ptx(db: Database, key: EntryKey) -> str | None:
    """PTX for the workspace's ``target.arch`` (llvmlite's NVPTX back end, -O3)."""
    from kinac.codegen.ptx import compile_ptx

    lo = gpu_lowered(db, key)
    return compile_ptx(lo.llvm_ir, gpu_arch(db)) if lo is not None else None


def entry_key(db: Database, entry: Any, target: str) -> EntryKey | Diagnostic:
    """The EntryKey of a kina.toml entry, or a diagnostic when its defn is missing or ambiguous."""
    found = find_defn(db, (entry.defn, entry.file))
    if len(found) != 1:
        what = "no defn" if not found else f"{len(found)} defns"
        files = ", ".join(k.file for k in found)
        return Diagnostic(
            "K0151", "error", f"entry `{entry.name}`: {what} named `{entry.defn}` in the workspace"
            + (f" ({files})" if files else ""),
            Label(Span("kina.toml", 1, 1, 1, 1, 0, 0), f"entry `{entry.name}`"),
            help="set the entry's `defn` to an existing defn, and its `file` when two files define it",
        )
    return EntryKey(found[0].file, entry.defn, entry.dims, entry.dtypes, target)


@query("entry_report", stage="build", code=("pipeline",))
def entry_report(db: Database, name: str) -> tuple[tuple[Diagnostic, ...], tuple[tuple[str, str, str], ...]]:
    """Build one kina.toml entry: its diagnostics and its artifacts (kind, fingerprint)."""
    from kinac.rules.codec import fingerprint

    cfg = config(db, ()).config
    assert cfg is not None
    entry = next(e for e in cfg.entries if e.name == name)
    target = cfg.target.kind
    key = entry_key(db, entry, target)
    if isinstance(key, Diagnostic):
        return (key,), ()
    spec = entry_graph(db, key)
    if spec.graph is None:
        return spec.diagnostics, ()
    arts = [(name, "graph", fingerprint(spec.graph))]
    if target == "cpu":
        lo = lowered(db, key)
        arts.append((name, "llvm-ir", fingerprint(lo.llvm_ir)))
        arts.append((name, "object", fingerprint(object_code(db, key))))
    elif target == "cuda":
        glo = gpu_lowered(db, key)
        arts.append((name, "llvm-ir", fingerprint(glo.llvm_ir)))
        arts.append((name, "ptx", fingerprint(ptx(db, key))))
    return spec.diagnostics, tuple(arts)


def entry_artifacts(db: Database, cfg: WorkspaceConfig) -> tuple[list[FileReport], list[tuple[str, str, str]]]:
    """Diagnostics and artifacts of every kina.toml entry."""
    diags: list[Diagnostic] = []
    arts: list[tuple[str, str, str]] = []
    for e in cfg.entries:
        d, a = entry_report(db, e.name)
        diags.extend(d)
        arts.extend(a)
    return ([FileReport("kina.toml", tuple(diags))] if diags else []), arts
