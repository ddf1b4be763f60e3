"""What the pipeline's queries share: their key and report records, and small pure helpers.

Kept apart from :mod:`kinac.pipeline` so that that file reads as the list of stages. Nothing
here reads the world; the checker's environment answers through the pipeline's queries.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kinac.diag.model import Diagnostic, Label, NodeRef, Span
from kinac.pipeline_toml import entry_ref
from kinac.rules.codec import record

if TYPE_CHECKING:
    from kinac.reader.ast import Import, Mesh, ParsedFile
    from kinac.rules import Database

PRELUDE_PREFIX = "@kinac/"
PRELUDE_DIR = Path(__file__).resolve().parent
SKIP_DIRS = {".git", ".kinac-cache", "__pycache__", ".venv", "node_modules"}


@record
class DefnKey:
    """A defn by workspace-relative file path and name: the key of every per-defn query."""

    file: str
    name: str


@record
class EntryKey:
    """A defn specialised at concrete dims and dtypes for a target: one compiled artifact."""

    file: str
    defn: str
    dims: tuple[tuple[str, Any], ...]  # int, or a tuple of ints for a variadic group
    dtypes: tuple[tuple[str, str], ...]
    target: str = "cpu"


@record
class FileIndex:
    """What other files and later stages need of a file: span-free and body-free."""

    module: str
    imports: tuple[str, ...]  # resolved paths (``@kinac/std/nn.kina`` for the prelude)
    meshes: tuple[Mesh, ...]
    defns: tuple[str, ...]  # source order, duplicates included
    import_errors: tuple[Diagnostic, ...] = ()
    broken: tuple[str, ...] = ()  # defns the reader dropped for syntax errors


@record
class UnreadableFile:
    """An input file that exists in the listing but cannot be read as UTF-8 text.

    Returned by the ``source_text``/``config_text`` inputs instead of None, so that a file
    that is not UTF-8, unreadable, or a directory is reported (K0153, or a kina.toml error)
    rather than read as missing or empty. ``line``/``col`` locate the first bad byte (1-based;
    0 when the file could not be opened); ``shown`` is the text with bad bytes replaced, for
    the excerpt under the diagnostic.
    """

    reason: str
    line: int = 0
    col: int = 0
    offset: int = 0
    shown: str = ""


def read_text_file(full: Path) -> str | UnreadableFile:
    """A file's UTF-8 text, or why it cannot be had (never None: absence is an error too)."""
    import stat

    try:  # only a regular file: a named pipe would block the build, /dev/zero never end
        mode = full.stat().st_mode
        if not stat.S_ISREG(mode) and not stat.S_ISDIR(mode):
            return UnreadableFile("it is not a regular file (a pipe, socket or device)")
    except OSError:
        pass  # reading says why
    try:
        data = full.read_bytes()
    except IsADirectoryError:
        return UnreadableFile("it is a directory, not a file")
    except OSError as e:
        return UnreadableFile(f"cannot read it: {e.strerror or e}")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        before = data[: e.start]
        line = before.count(b"\n") + 1
        col = len(before[before.rfind(b"\n") + 1 :].decode("utf-8", errors="replace")) + 1
        return UnreadableFile(
            f"it is not valid UTF-8: byte 0x{data[e.start]:02x} at line {line}, column {col} "
            f"(byte offset {e.start}); Kina sources and kina.toml are UTF-8",
            line,
            col,
            e.start,
            data.decode("utf-8", errors="replace"),
        )


def unreadable_error(path: str, problem: UnreadableFile) -> Diagnostic:
    """K0153: a source file kinac cannot read as UTF-8 text."""
    line, col = max(problem.line, 1), max(problem.col, 1)
    start = len(problem.shown[: problem.offset]) if problem.shown else 0
    # The reason is worded for a message that names the file alone ("kina.toml: cannot read
    # it: ..."); this one already says "cannot read `path`", so the reason's own is dropped.
    reason = problem.reason.removeprefix("cannot read it: ")
    return Diagnostic(
        "K0153",
        "error",
        f"cannot read `{path}`: {reason}",
        Label(
            Span(path, line, col, line, col + 1, start, start + 1),
            "first invalid byte" if problem.line else "this file",
        ),
        help="save the file as UTF-8"
        if problem.line
        else "make the file a readable regular file, or remove it",
    )


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


def list_sources(root: Path) -> tuple[str, ...]:
    """Every ``.kina`` file under ``root``, relative and sorted (hidden and cache dirs skipped,
    and hidden files: an editor's lock or backup such as Emacs's ``.#a.kina``, often a dangling
    symlink, is not a source).

    A folder below the root with its own ``kina.toml`` is a nested workspace, skipped with
    everything under it: its files belong to its own configuration (meshes, solver, entries,
    cache), and the parent's ``**/*.kina`` picking them up checked them twice, under two
    configurations, its errors failing the parent's build (docs/language.md)."""
    out: list[str] = []
    for dirpath, dirnames, filenames in os.walk(root):
        if "kina.toml" in filenames and Path(dirpath) != root:
            dirnames[:] = []
            continue
        dirnames[:] = [d for d in dirnames if d not in SKIP_DIRS and not d.startswith(".")]
        rel = Path(dirpath).relative_to(root)
        out.extend(
            (rel / f).as_posix() for f in filenames if f.endswith(".kina") and not f.startswith(".")
        )
    return tuple(sorted(out))


def nested_workspaces(root: Path) -> dict[str, tuple[str, ...]]:
    """Each nested workspace below ``root`` (relative folder) with its ``.kina`` files
    (relative to ``root``): what :func:`list_sources` skips, for a warning that says why a
    pattern naming them matches nothing. Walks the whole tree: only for that warning."""
    found: dict[str, tuple[str, ...]] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if d not in SKIP_DIRS and not d.startswith(".")]
        here = Path(dirpath)
        if "kina.toml" in filenames and here != root:
            found[here.relative_to(root).as_posix()] = tuple(
                sorted(
                    (Path(d).relative_to(root) / f).as_posix()
                    for d, dn, fs in os.walk(here)
                    for f in fs
                    if f.endswith(".kina") and not f.startswith(".")
                )
            )
            dirnames[:] = []
    return found


def glob_match(path: str, pattern: str) -> bool:
    """``kina.toml``'s path globs (:mod:`kinac.workspace.globs`): ``*`` within one folder,
    ``**`` across folders, a matched folder takes the files under it."""
    from kinac.workspace.globs import glob_match as match

    return match(path, pattern)


def resolve_import(path: str, target: str, files: tuple[str, ...]) -> str | None:
    """An import's file: relative to the importer, then to the root, then the prelude."""
    here = Path(path).parent
    for cand in ((here / target).as_posix(), target):
        norm = os.path.normpath(cand).replace(os.sep, "/")
        if norm in files:
            return norm
    if target.startswith("std/") and (PRELUDE_DIR / target).is_file():
        return PRELUDE_PREFIX + target
    return None


def import_candidates(path: str, target: str) -> list[str]:
    """Where an import may be, in order: relative to the importer, then to the root; never
    outside the root (a workspace build sees only files under it, and so does a single file)."""
    out = []
    for cand in ((Path(path).parent / target).as_posix(), target):
        norm = os.path.normpath(cand).replace(os.sep, "/")
        if (
            not norm.startswith("../")
            and norm != ".."
            and not os.path.isabs(norm)
            and norm.endswith(".kina")
        ):
            out.append(norm)
    return out


def import_error(path: str, imp: Import) -> Diagnostic:
    return Diagnostic(
        "K0150",
        "error",
        f"cannot find the imported file {imp.path!r}",
        Label(NodeRef(path, "", imp.nid), "imported here"),
        help='paths are relative to this file or to the workspace root; the prelude is "std/nn.kina"',
    )


def duplicate_error(path: str, name: str) -> Diagnostic:
    """K0201, pointing at the second defn (``name#2``) and the first."""
    return Diagnostic(
        "K0201",
        "error",
        f"the name `{name}` is defined twice in this module",
        Label(NodeRef(path, f"{name}#2", 0), "defined again here"),
        (Label(NodeRef(path, name, 0), "first defined here"),),
        notes=("defns may call each other in any order, so names must be unique per module",),
        help=f"rename or remove one of the `{name}` defns",
    )


def entry_error(entry: Any, found: tuple[DefnKey, ...]) -> Diagnostic:
    """K0151: a kina.toml entry whose defn is missing or ambiguous."""
    what = "no defn" if not found else f"{len(found)} defns"
    files = ", ".join(k.file for k in found)
    return Diagnostic(
        "K0151",
        "error",
        f"entry `{entry.name}`: {what} named `{entry.defn}` "
        + (f"in `{entry.file}`" if entry.file else "in the workspace")
        + (f" ({files})" if files else ""),
        Label(entry_ref(entry.name, "defn"), f"entry `{entry.name}`"),
        help="set the entry's `defn` to an existing defn, and its `file` when two files define it",
    )


def span_in(pf: ParsedFile, loc: NodeRef) -> Span | None:
    """Where node ``loc`` is in this parse (``f#2`` names the second defn called ``f``)."""
    table = pf.top_spans
    if loc.defn:
        name, _, nth = loc.defn.partition("#")
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


class CheckEnv:
    """The checker's environment (``kinac.check.CheckEnv``/``SpecEnv``), answered by queries."""

    def __init__(self, db: Database) -> None:
        from kinac import pipeline

        self.db, self.q = db, pipeline
        self.budget_ms = pipeline.solver_budget(db, ())
        self.on_unknown = pipeline.solver_policy(db, ())

    def lookup(self, file: str, name: str) -> Any:
        from kinac.check import DefnRef

        ref = self.q.resolve_name(self.db, (file, name))
        if ref is None:
            return None
        sig = self.q.signature(self.db, ref)
        return (DefnRef(ref.file, ref.name), sig) if sig is not None else None

    def visible(self, file: str) -> tuple[str, ...]:
        return tuple(item[0] for item in self.q.scope(self.db, file))

    def ambiguous(self, file: str, name: str) -> tuple[Any, ...]:
        """The defns ``name`` may mean in ``file`` when two or more imports define it."""
        from kinac.check import DefnRef

        hit = first_by_name(self.q.scope(self.db, file), name, lambda item: item[0])
        if hit is None or len(hit) == 2:
            return ()
        return tuple(DefnRef(k.file, k.name) for k in hit[1:])

    def is_broken(self, file: str, name: str) -> bool:
        ref = self.q.resolve_name(self.db, (file, name))
        return ref is not None and self.q.signature(self.db, ref) is None

    def meshes(self, file: str) -> tuple[Mesh, ...]:
        """Meshes of the file, of its imports, and of ``kina.toml`` (``[[mesh]]``)."""
        idx = self.q.file_index(self.db, file)
        own = idx.meshes + tuple(
            m for imp in idx.imports for m in self.q.file_index(self.db, imp).meshes
        )
        return own + self.q.config_meshes(self.db, ())

    def solve(self, formula: Any) -> Any:
        return self.q.solve(self.db, (formula, self.budget_ms))

    def checked(self, ref: Any) -> Any:
        return self.q.check_defn(self.db, DefnKey(ref.file, ref.name))

    def callees(self, ref: Any) -> Any:
        return self.q.callees(self.db, DefnKey(ref.file, ref.name))

    def specialised_call(self, key: Any) -> Any:
        """One call of an entry's body specialised on its own (a query per distinct call:
        :mod:`kinac.check.spec_calls`)."""
        from kinac.pipeline_pieces import specialise_call

        return specialise_call(self.db, key)


def did_you_mean(name: str, choices: Iterable[str]) -> str:
    """`` (did you mean `x`?)`` when a choice is close to ``name``, else empty."""
    from difflib import get_close_matches

    by_lower = {c.lower(): c for c in choices}
    close = get_close_matches(name.lower(), list(by_lower), n=1, cutoff=0.6)
    return f" (did you mean `{by_lower[close[0]]}`?)" if close else ""


def unknown_bindings(sig: Any, dims: Iterable[str], dtypes: Iterable[str]) -> list[str]:
    """Names given for a defn's dims or dtype variables that it does not have, as sentences.

    ``sig`` is the checker's ``SigInfo`` (``dim_vars``, ``groups`` as ``..b``, ``dtype_vars``).
    A name the defn does not have is a typo or a stale setting: never silently ignored."""
    known_dims = (*sig.dim_vars, *sig.groups)
    name = sig.ref.name
    out: list[str] = []
    for d in dims:
        if d not in known_dims:
            have = ", ".join(known_dims) or "none"
            out.append(
                f"`{d}` is not a dim of `{name}`{did_you_mean(d, known_dims)}; its dims: {have}"
            )
    for t in dtypes:
        if t not in sig.dtype_vars:
            have = ", ".join(sig.dtype_vars) or "none"
            out.append(
                f"`{t}` is not a dtype variable of `{name}`{did_you_mean(t, sig.dtype_vars)}; "
                f"its dtype variables: {have}"
            )
    return out


def entry_binding_error(entry: Any, problems: list[str], at: tuple[str, ...] = ()) -> Diagnostic:
    """K0152: a kina.toml entry names dims or dtype variables its defn does not have (``at``:
    the key of the first, ``("dims", "Q")``)."""
    return Diagnostic(
        "K0152",
        "error",
        f"entry `{entry.name}`: " + "; ".join(problems),
        Label(entry_ref(entry.name, *at), f"entry `{entry.name}`"),
        help="remove the name from the entry's dims/dtypes, or fix its spelling",
    )


_NAME_INDEXES: dict[int, tuple[tuple[Any, ...], dict[str, Any]]] = {}
_NAME_INDEX_LIMIT = 64


def first_by_name(items: tuple[Any, ...], name: str, name_of: Callable[[Any], str]) -> Any | None:
    """The first of ``items`` whose ``name_of`` is ``name``, or None.

    Why: ``defn_ast`` and ``resolve_name`` run once per defn and each looked through the whole
    file (or scope): quadratic in the defns of a file. The index of one tuple is built once and
    kept for the last few tuples seen (a query's value is one object while it is in use); the
    identity check makes a reused ``id`` harmless.
    """
    hit = _NAME_INDEXES.get(id(items))
    if hit is None or hit[0] is not items:
        index: dict[str, Any] = {}
        for it in items:
            index.setdefault(name_of(it), it)
        if len(_NAME_INDEXES) >= _NAME_INDEX_LIMIT:
            _NAME_INDEXES.pop(next(iter(_NAME_INDEXES)))
        hit = _NAME_INDEXES[id(items)] = (items, index)
    return hit[1].get(name)
