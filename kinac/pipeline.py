"""The kinac pipeline: every stage is a query, per file or per definition.

    source_text ─► parse ─► file_index ─┬► signature ─┐
                         └► defn_ast ───┴────────────► check_defn ─► file_report ─► build
    entry_graph (specialise) ─┬► lowered ─► object_code ─► host runtime (kinac.api)
                              └► gpu_lowered ─► ptx ─► CUDA runtime (target cuda)

Inputs (the only queries that read the world) are ``config_text``, ``source_listing``,
``source_text``, ``target_override`` and ``host_target``. ``defn_ast``, ``signature``,
``resolve_name``, ``solver_budget`` and ``target`` are firewalls: a comment edit stops at
``parse`` (its outputs are span-free and compare equal), a body edit reaches only that defn's
check and the entries that inline it, a signature edit reaches exactly its callers.
Records and helpers live in :mod:`kinac.pipeline_support`.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from kinac.diag.model import Diagnostic, NodeRef, Span
from kinac.pipeline_support import (
    PRELUDE_DIR,
    PRELUDE_PREFIX,
    BuildReport,
    CheckEnv,
    DefnKey,
    EntryKey,
    FileIndex,
    FileReport,
    UnreadableFile,
)
from kinac.rules import Database, input_query, query
from kinac.workspace.model import ConfigError, ConfigResult, TargetConfig, WorkspaceConfig

if TYPE_CHECKING:  # the reader's records load lazily: a no-op build never needs them
    from kinac.reader.ast import Defn, Mesh, ParsedFile, Signature

__all__ = ["BuildReport", "DefnKey", "EntryKey", "FileIndex", "FileReport"]

# ---------------------------------------------------------------------------- inputs


@input_query("config_text")
def config_text(db: Database, _: tuple[()]) -> str | UnreadableFile | None:
    """Text of ``kina.toml``: None only when there is none; why, when it cannot be read."""
    from kinac.pipeline_support import read_text_file

    cfg = db.context.get("config_path")
    return read_text_file(Path(cfg)) if cfg else None


@input_query("source_listing")
def source_listing(db: Database, _: tuple[()]) -> tuple[str, ...]:
    """Every ``.kina`` file under the workspace root (relative paths, sorted)."""
    from kinac.pipeline_support import list_sources

    single = db.context.get("single_file")
    return (single,) if single is not None else list_sources(Path(db.context["root"]))


@input_query("source_text")
def source_text(db: Database, path: str) -> str | UnreadableFile:
    """Text of a source file (the prelude for ``@kinac/...``), or why it cannot be read
    (not UTF-8, unreadable, a directory): reported as K0153, never read as empty."""
    from kinac.pipeline_support import read_text_file

    if path.startswith(PRELUDE_PREFIX):
        full = PRELUDE_DIR / path[len(PRELUDE_PREFIX) :]
    else:
        full = Path(db.context["root"]) / path
    return read_text_file(full)


@input_query("source_exists")
def source_exists(db: Database, path: str) -> bool:
    """Whether a workspace-relative file exists (an import of a file checked on its own)."""
    return (Path(db.context["root"]) / path).is_file()


@input_query("target_override")
def target_override(db: Database, _: tuple[()]) -> str | None:
    """``--target`` from the command line, if given (it overrides ``target.kind``)."""
    return db.context.get("target_override")


@input_query("host_target")
def host_target(db: Database, _: tuple[()]) -> Any:
    """The host CPU that object code is compiled for: an explicit input, never ambient
    (detected once per machine and remembered in the cache: :mod:`kinac.host_cpu`)."""
    from kinac.host_cpu import host_target as detect

    return detect(db.store)


# ---------------------------------------------------------------------------- workspace


@query("config", stage="read")
def config(db: Database, _: tuple[()]) -> ConfigResult:
    """The validated workspace configuration (pydantic runs only when kina.toml changed)."""
    text = config_text(db, ())
    default_name = str(db.context.get("default_name", "workspace"))
    if text is None:
        return ConfigResult(WorkspaceConfig(name=default_name))
    if isinstance(text, UnreadableFile):
        return ConfigResult(None, (ConfigError("", text.reason),))  # "kina.toml: it is ..."
    from kinac.workspace.schema import validate

    return validate(text, default_name)


@query("solver_budget", stage="read")
def solver_budget(db: Database, _: tuple[()]) -> int:
    """Firewall: the one setting the checker reads, so other kina.toml edits re-check nothing."""
    cfg = config(db, ()).config
    return cfg.solver_budget_ms if cfg is not None else 2000


@query("config_meshes", stage="read")
def config_meshes(db: Database, _: tuple[()]) -> tuple[Mesh, ...]:
    """Firewall: the meshes declared in ``kina.toml`` (``[[mesh]]``), visible to every file as
    if declared in source; other kina.toml edits re-check nothing."""
    cfg = config(db, ()).config
    if cfg is None or not cfg.meshes:
        return ()
    from kinac.reader.ast import Mesh

    return tuple(Mesh(0, m.name, tuple(m.shape), tuple(m.axes) or (m.name,)) for m in cfg.meshes)


@query("solver_policy", stage="read")
def solver_policy(db: Database, _: tuple[()]) -> str:
    """Firewall: ``solver.on_unknown`` ("error", or "runtime-check" to defer to specialisation)."""
    cfg = config(db, ()).config
    return cfg.on_unknown if cfg is not None else "error"


@query("target", stage="read")
def target(db: Database, _: tuple[()]) -> TargetConfig:
    """Firewall: the build target (``--target`` over ``kina.toml``'s ``[target]``)."""
    cfg = config(db, ()).config
    tc = cfg.target if cfg is not None else TargetConfig()
    kind = target_override(db, ())
    return (
        tc
        if kind is None or kind == tc.kind
        else TargetConfig(kind, tc.arch, tc.device, tc.allow_tf32, tc.graphs)
    )


@query("source_files", stage="read")
def source_files(db: Database, _: tuple[()]) -> tuple[str, ...]:
    """The workspace's sources: the listing filtered by ``sources``/``exclude`` globs."""
    from kinac.pipeline_support import glob_match

    listing = source_listing(db, ())
    cfg = config(db, ()).config
    if cfg is None or db.context.get("single_file") is not None:
        return listing
    return tuple(
        p
        for p in listing
        if any(glob_match(p, g) for g in cfg.sources)
        and not any(glob_match(p, g) for g in cfg.exclude)
    )


# ---------------------------------------------------------------------------- reading


@query("parse", stage="read", by_trace=True)  # big, and cut off by its firewalls
def parse(db: Database, path: str) -> ParsedFile:
    """The reader's full output for one file (spans included: re-runs on any edit)."""
    from dataclasses import replace

    from kinac.pipeline_support import unreadable_error
    from kinac.reader.parse import parse_file

    text = source_text(db, path)
    if isinstance(text, UnreadableFile):
        return replace(parse_file(path, ""), diagnostics=(unreadable_error(path, text),))
    return parse_file(path, text)


@query("parse_diagnostics", stage="read")
def parse_diagnostics(db: Database, path: str) -> tuple[Diagnostic, ...]:
    """Firewall: the reader's errors alone (usually empty, so edits stop here)."""
    return parse(db, path).diagnostics


@query("file_index", stage="read")
def file_index(db: Database, path: str) -> FileIndex:
    """Firewall: a file's module name, resolved imports, meshes and defn names."""
    from kinac.pipeline_support import import_error, resolve_import

    pf = parse(db, path)
    files = source_files(db, ()) if not path.startswith(PRELUDE_PREFIX) else ()
    imports: dict[str, None] = {}
    errors: list[Diagnostic] = []
    single = db.context.get("single_file") is not None and not path.startswith(PRELUDE_PREFIX)
    for imp in pf.imports:
        resolved = resolve_import(path, imp.path, files)
        if resolved is None and single:  # checking one file: its imports are read from disk
            from kinac.pipeline_support import import_candidates

            resolved = next(
                (c for c in import_candidates(path, imp.path) if source_exists(db, c)), None
            )
        if resolved is None:
            errors.append(import_error(path, imp))
        else:
            imports[resolved] = None
    return FileIndex(
        pf.module,
        tuple(imports),
        pf.meshes,
        tuple(d.name for d in pf.defns),
        tuple(errors),
        pf.broken_defns,
    )


@query("defn_ast", stage="read")
def defn_ast(db: Database, key: DefnKey) -> Defn | None:
    """Firewall: one defn's AST (span-free), the first of that name in its file."""
    from kinac.pipeline_support import first_by_name

    return first_by_name(parse(db, key.file).defns, key.name, lambda d: d.name)


@query("signature", stage="read")
def signature(db: Database, key: DefnKey) -> Signature | None:
    """Firewall: a defn's signature, unchanged by edits to its body."""
    d = defn_ast(db, key)
    return d.signature if d is not None else None


@query("scope", stage="read")
def scope(db: Database, path: str) -> tuple[tuple[Any, ...], ...]:
    """Names visible in a file, ``(name, DefnKey)``: its own defns first, then those of the
    files it imports. A name that two imported files define (and this file does not) is
    ambiguous: ``(name, DefnKey, DefnKey, ...)``, one key per file, and resolves to nothing
    (K0210 at each use; docs/language.md, "Names and modules").

    Defns dropped for syntax errors still take their place (their signature is None), so a
    call of one resolves to it rather than to an import of the same name, or to nothing."""
    idx = file_index(db, path)
    own = set(idx.defns) | set(idx.broken)
    seen: dict[str, list[DefnKey]] = {n: [DefnKey(path, n)] for n in (*idx.defns, *idx.broken)}
    for f in idx.imports:
        fi = file_index(db, f)
        for name in dict.fromkeys((*fi.defns, *fi.broken)):
            if name not in own:
                seen.setdefault(name, []).append(DefnKey(f, name))
    return tuple((name, *keys) for name, keys in sorted(seen.items()))


# ---------------------------------------------------------------------------- checking


@query("resolve_name", stage="check")
def resolve_name(db: Database, key: tuple[str, str]) -> DefnKey | None:
    """Firewall: which defn ``name`` means in ``file`` (changes only if that answer changes)."""
    file, name = key
    from kinac.pipeline_support import first_by_name

    hit = first_by_name(scope(db, file), name, lambda item: item[0])
    return hit[1] if hit is not None and len(hit) == 2 else None  # ambiguous: none


@query("solve", stage="check", tools=("z3-solver",))
def solve(db: Database, key: tuple[Any, int]) -> Any:
    """One canonical, alpha-renamed obligation: solved once for the whole cache."""
    from kinac.check import solve_formula
    from kinac.check.solver import by_safety_net

    r = solve_formula(*key)
    if by_safety_net(r):
        db.volatile()  # load-dependent: not cached (docs/language.md, "Solver budget")
    return r


@query("callees", stage="check")
def callees(db: Database, key: DefnKey) -> tuple[Any, ...]:
    """The defns a defn's body calls (for recursion detection), cached per body."""
    from kinac.check import calls_of

    d = defn_ast(db, key)
    return calls_of(key.file, d, CheckEnv(db)) if d is not None else ()


@query("recursion", stage="check")
def recursion(db: Database, path: str) -> tuple[tuple[str, Any], ...]:
    """K0204 for each defn of ``path`` on a call cycle: one linear walk shared by the file's
    defns (a walk per defn was quadratic: 13 s for a chain of 1,500 calls)."""
    from kinac.check import DefnRef
    from kinac.check.module import recursion_of

    refs = [DefnRef(path, n) for n in dict.fromkeys(file_index(db, path).defns)]
    found = recursion_of(refs, CheckEnv(db))
    return tuple(sorted(((r.name, d) for r, d in found.items()), key=lambda x: x[0]))


@query("check_defn", stage="check", tools=("z3-solver",))
def check_defn(db: Database, key: DefnKey) -> Any:
    """Type-check one defn against its callees' signatures: the per-defn check query."""
    from dataclasses import replace

    from kinac.check import check_defn as check
    from kinac.check import primitive_shadow

    d = defn_ast(db, key)
    assert d is not None, f"no defn {key}"
    env = CheckEnv(db)
    checked = check(key.file, d, env)
    extra = [
        x
        for x in (primitive_shadow(key.file, d), dict(recursion(db, key.file)).get(key.name))
        if x is not None
    ]
    return (
        replace(checked, body=None, diagnostics=(*checked.diagnostics, *extra))
        if extra
        else checked
    )


@query("file_report", stage="build")
def file_report(db: Database, path: str) -> FileReport:
    """Every diagnostic of one file: reading, imports, duplicates, then each defn's check."""
    from kinac.pipeline_support import duplicate_error

    idx = file_index(db, path)
    diags: list[Diagnostic] = [*parse_diagnostics(db, path), *idx.import_errors]
    names = list(dict.fromkeys(idx.defns))
    diags += [duplicate_error(path, n) for n in names if idx.defns.count(n) > 1]
    from kinac.check.shard import file_mesh_clashes  # a clash no annotation uses (K0702)

    sigs = [s for s in (signature(db, DefnKey(path, n)) for n in names) if s is not None]
    diags += file_mesh_clashes(path, CheckEnv(db).meshes(path), sigs)
    for name in names:
        diags.extend(check_defn(db, DefnKey(path, name)).diagnostics)
    return FileReport(path, tuple(diags))


# ---------------------------------------------------------------------------- entries


@query("find_defn", stage="check")
def find_defn(db: Database, key: tuple[str, str | None]) -> tuple[DefnKey, ...]:
    """Every defn called ``name`` in the workspace (or in ``file``): zero, one, or ambiguous."""
    name, file = key
    files = (file,) if file is not None else source_files(db, ())
    return tuple(DefnKey(f, name) for f in files if name in file_index(db, f).defns)


@query("entry_graph", stage="lower")
def entry_graph(db: Database, key: EntryKey) -> Any:
    """The entry's concrete graph: every call inlined at concrete dims (kinac.check.specialise)."""
    from kinac.check import DefnRef, specialise

    device = "cpu" if key.target == "cpu" else f"cuda:{target(db, ()).device}"
    return specialise(
        DefnRef(key.file, key.defn),
        dict(key.dims),
        dict(key.dtypes),
        CheckEnv(db),
        default_device=device,
    )


@query("shard_propagate", stage="shard")
def shard_propagate(db: Database, key: EntryKey) -> Any:
    """Each tensor's sharding and the collectives it implies (kinac.shard; docs/sharding.md):
    reads the entry's graph, its defn's signature and the meshes its file sees. Lowering
    does not consume it yet."""
    from kinac.shard.entry import plan_entry

    spec = entry_graph(db, key)
    sig = signature(db, DefnKey(key.file, key.defn))
    if spec.graph is None or sig is None:
        return None
    return plan_entry(spec.graph, sig, CheckEnv(db).meshes(key.file), key.file)


WRAPPER_OPT = 0  # LLVM -O level of an entry's wrapper (kernels: -O3)


def entry_internal_errors(key: EntryKey, stage: str) -> Any:
    """The one channel for a lowering or codegen failure on a checked program: an internal
    compiler error naming the entry, the stage and the kernel (:mod:`kinac.ice`)."""
    from kinac.ice import entry_label, internal_errors

    return internal_errors(entry_label(key.defn, key.dims, key.file), stage)


@query("lowered", stage="lower", tools=("xdsl",))
def lowered(db: Database, key: EntryKey) -> Any:
    """The entry lowered to its wrapper's LLVM IR and calling plan. The graph is cut at its
    calls into pieces (:mod:`kinac.ir.pieces`), each fused by its own query once per distinct
    piece (``host_piece``); the kernels are canonical sources (``kernels``), each lowered and
    compiled by its own queries once per distinct kernel (:mod:`kinac.ir.host.kernels`); what
    runs here is only the stitching (:mod:`kinac.ir.host.stitch`, no xDSL)."""
    from dataclasses import replace

    from kinac.ice import in_kernel
    from kinac.ir.host.stitch import stitch
    from kinac.ir.pieces import cut, distinct_graphs
    from kinac.pipeline_pieces import host_piece

    spec = entry_graph(db, key)
    if spec.graph is None:
        return None
    with entry_internal_errors(key, "host lowering"):
        pieces = cut(spec.graph, spec.calls)
        distinct, which = distinct_graphs(pieces)  # 32 layers: 2 distinct
        fused = [host_piece(db, g) for g in distinct]
        lo = stitch(
            spec.graph,
            [(p.inputs, p.outputs) for p in pieces],
            [fused[i] for i in which],
            separate=True,
        )  # one function per distinct piece, compiled on its own
        calls = set(lo.library_calls)  # a kernel's failure is reported as its entry's
        for sym, k in _first_steps(lo):
            with in_kernel(sym):
                calls.update(host_kernel_llvm(db, k).library_calls)
    return replace(lo, library_calls=tuple(sorted(calls)))


def _first_steps(lo: Any) -> list[tuple[str, Any]]:
    """Each distinct kernel of a lowered entry with the first step that runs it (named in
    its internal errors)."""
    first: dict[int, str] = {}
    for step, i in zip(lo.steps, lo.kernel_index, strict=True):
        first.setdefault(i, step.sym)
    return [(first[i], k) for i, k in enumerate(lo.kernel_set)]


@query("host_kernel_llvm", stage="lower", tools=("xdsl",))
def host_kernel_llvm(db: Database, kernel: Any) -> Any:
    """One canonical kernel lowered to LLVM IR: keyed by its body, not by its entry (a failure
    reaches the entry's query, which reports it as an internal error naming the entry)."""
    from kinac.ir.host.kernels import lower_kernel

    return lower_kernel(kernel)


@query("host_kernel_object", stage="codegen", tools=("llvmlite",))
def host_kernel_object(db: Database, kernel: Any) -> bytes:
    """One canonical kernel's object code for the host (-O3), shared by every entry using it."""
    from kinac.codegen.llvm import compile_object

    return compile_object(host_kernel_llvm(db, kernel).llvm_ir, host_target(db, ()))


@query("object_code", stage="codegen", tools=("llvmlite",))
def object_code(db: Database, key: EntryKey) -> tuple[bytes, ...] | None:
    """Native object code for the host: the wrapper's object, then each distinct piece
    function's (``host_piece_object``), then each distinct kernel's."""
    from kinac.codegen.llvm import compile_object
    from kinac.ice import in_kernel

    lo = lowered(db, key)
    if lo is None:
        return None
    with entry_internal_errors(key, "host code generation (LLVM)"):
        # the wrapper only computes buffer addresses and calls kernels: -O0 runs it as fast
        # and compiles in a fraction of -O3's time (hundreds of calls at L=32)
        wrapper = compile_object(lo.llvm_ir, host_target(db, ()), WRAPPER_OPT)
        objects = [
            wrapper,
            *(_pipeline_pieces.host_piece_object(db, text) for text in lo.piece_code),
        ]
        for sym, k in _first_steps(lo):
            with in_kernel(sym):
                objects.append(host_kernel_object(db, k))
    return tuple(dict.fromkeys(objects))  # identical kernels: one object


@query("entry_report", stage="build")
def entry_report(
    db: Database, name: str
) -> tuple[tuple[Diagnostic, ...], tuple[tuple[str, str, str], ...]]:
    """Build one kina.toml entry: its diagnostics and its artifacts (kind, fingerprint)."""
    from kinac.pipeline_support import entry_binding_error, entry_error, unknown_bindings
    from kinac.rules.codec import fingerprint

    cfg = config(db, ()).config
    assert cfg is not None
    entry = next(e for e in cfg.entries if e.name == name)
    kind = target(db, ()).kind
    found = find_defn(db, (entry.defn, entry.file))
    if len(found) != 1:
        return (entry_error(entry, found),), ()
    checked = check_defn(db, found[0])
    unknown = unknown_bindings(
        checked.sig, (k for k, _ in entry.dims), (k for k, _ in entry.dtypes)
    )
    if unknown:
        sig = checked.sig
        at = [("dims", k) for k, _ in entry.dims if k not in (*sig.dim_vars, *sig.groups)]
        at += [("dtypes", t) for t, _ in entry.dtypes if t not in sig.dtype_vars]
        return (entry_binding_error(entry, unknown, at[0] if at else ()),), ()
    key = EntryKey(found[0].file, entry.defn, entry.dims, entry.dtypes, kind)
    spec = entry_graph(db, key)
    if spec.graph is None:
        return spec.diagnostics, ()
    plan = shard_propagate(db, key)  # sharding conflicts (K0703/K0704) stop the entry here
    sharding = plan.diagnostics if plan is not None else ()
    if any(d.is_error for d in sharding):
        return spec.diagnostics + sharding, ()
    arts = [(name, "graph", fingerprint(spec.graph))]
    if kind == "cpu":
        arts.append((name, "llvm-ir", fingerprint(lowered(db, key).llvm_ir)))
        arts.append((name, "object", fingerprint(object_code(db, key))))
    else:
        arts.append((name, "llvm-ir", fingerprint(gpu_lowered(db, key).llvm_ir)))
        arts.append((name, "ptx", fingerprint(ptx(db, key))))
    if plan is not None and plan.mesh is not None:  # what --simulate runs: lowered here too
        arts += _pipeline_shard.entry_shard_artifacts(db, name, key)
    grad_diags, grad_arts = _pipeline_grad.entry_grad_report(db, entry, key)  # grad = [...]
    return spec.diagnostics + sharding + grad_diags, tuple(arts) + grad_arts


@query("build", stage="build")
def build(db: Database, _: tuple[()]) -> BuildReport:
    """The whole workspace: every file's report, then (if clean) every entry's artifacts."""
    reports = tuple(file_report(db, p) for p in source_files(db, ()))
    cfg = config(db, ()).config
    if cfg is None or any(d.is_error for r in reports for d in r.diagnostics):
        return BuildReport(reports, ())
    diags: list[Diagnostic] = []
    arts: list[tuple[str, str, str]] = []
    entries = cfg.entries
    single = db.context.get("single_file")
    if single is not None:  # one file of a workspace: build the entries whose defn is in it
        entries = tuple(
            e for e in entries if e.file in (None, single) and find_defn(db, (e.defn, single))
        )
    for e in entries:
        d, a = entry_report(db, e.name)
        diags += d
        arts += a
    return BuildReport(
        reports + ((FileReport("kina.toml", tuple(diags)),) if diags else ()), tuple(arts)
    )


# ---------------------------------------------------------------------------- rendering


def resolve_span(db: Database, loc: Span | NodeRef) -> Span | None:
    """Where a node is *now* (used only when rendering diagnostics)."""
    from kinac.pipeline_support import span_in
    from kinac.pipeline_toml import CONFIG_FILE, toml_span

    if isinstance(loc, Span):
        return loc
    if loc.file == CONFIG_FILE:  # a kina.toml entry's key, found in the text now
        text = config_text(db, ())
        return toml_span(text, loc) if isinstance(text, str) else None
    return span_in(parse(db, loc.file), loc)


def display_source(db: Database, path: str) -> str | None:
    """The text shown under diagnostics (bad bytes replaced when the file is not UTF-8)."""
    text = source_text(db, path)
    return (text.shown or None) if isinstance(text, UnreadableFile) else text


from kinac import pipeline_autotune as _pipeline_autotune  # noqa: E402,F401  (registers its queries)
from kinac import pipeline_gemm_tune as _pipeline_gemm_tune  # noqa: E402,F401  (registers its queries)
from kinac import pipeline_grad as _pipeline_grad  # noqa: E402,F401  (registers its queries)
from kinac import pipeline_grad_shard as _pipeline_grad_shard  # noqa: E402,F401  (registers its queries)
from kinac import pipeline_pieces as _pipeline_pieces  # noqa: E402,F401  (registers its queries)
from kinac import pipeline_shard as _pipeline_shard  # noqa: E402,F401  (registers its queries)
from kinac.pipeline_gpu import gpu_lowered, ptx  # noqa: E402,F401  (registers the GPU queries)
