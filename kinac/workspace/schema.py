"""Validation of ``kina.toml`` with pydantic: the only module that imports pydantic.

Every error names the key (``entry[1].dims.B``) and what was expected, so a user can fix the
file without reading kinac's source. Unknown keys are errors too: a typo must not be silently
ignored.
"""

from __future__ import annotations

import tomllib
from typing import Any, Literal

from kinac.dtypes import DTYPES
from kinac.workspace.model import (
    ConfigError,
    ConfigResult,
    EntryConfig,
    MeshConfig,
    TargetConfig,
    WorkspaceConfig,
)

DTYPE_NAMES = DTYPES  # the Literal below must spell them out for pydantic
# The cache's size limit in bytes must be a SQLite INTEGER (signed 64-bit).
MAX_CACHE_MB = (2**63 - 1) // 2**20
# As many devices as a mesh may have anywhere (kinac.api_mesh.MAX_DEVICES, `--simulate`).
MAX_MESH_DEVICES = 1 << 20


def _models() -> Any:
    from pydantic import BaseModel, ConfigDict, Field, field_validator

    class Strict(BaseModel):
        model_config = ConfigDict(extra="forbid", strict=True)

    class Workspace(Strict):
        name: str = Field(min_length=1)
        sources: list[str] = ["**/*.kina"]
        exclude: list[str] = []
        cache_dir: str | None = None

    class Target(Strict):
        kind: Literal["cpu", "cuda"] = "cpu"
        arch: str = Field(default="sm_90", pattern=r"^sm_\d{2,3}a?$")
        device: int = Field(default=0, ge=0)
        allow_tf32: bool = False
        graphs: bool = True

    class Solver(Strict):
        budget_ms: int = Field(default=2000, ge=1, le=600_000)
        on_unknown: Literal["error", "runtime-check"] = "error"

    class Cache(Strict):
        size_limit_mb: int = Field(default=2048, ge=1, le=MAX_CACHE_MB)

    class Mesh(Strict):
        name: str = Field(pattern=r"^[A-Za-z_][A-Za-z0-9_\-]*$")
        shape: list[int] = Field(min_length=1)
        axes: list[str] | None = None

        @field_validator("shape")
        @classmethod
        def _positive(cls, v: list[int]) -> list[int]:
            if any(d < 1 for d in v):
                raise ValueError("every mesh size must be a positive integer")
            return v

    class Entry(Strict):
        name: str = Field(min_length=1)
        defn: str | None = Field(default=None, min_length=1)  # "" is not "the entry's name"
        file: str | None = None
        dims: dict[str, Any] = {}  # an int; a variadic group ("..b") takes a list of ints
        dtypes: dict[str, Literal["f64", "f32", "f16", "bf16", "i64", "i32", "bool"]] = {}
        grad: list[str] = []  # parameters to differentiate the loss with respect to

    class KinaToml(Strict):
        workspace: Workspace
        target: Target = Target()
        solver: Solver = Solver()
        cache: Cache = Cache()
        mesh: list[Mesh] = []
        entry: list[Entry] = []

    return KinaToml


def _dims_errors(raw: dict[str, Any]) -> list[ConfigError]:
    """Each ``[[entry]]``'s dims, checked here rather than by pydantic so that an error names
    the dim's own key (``entry[0].dims.B``) and says what was written and what is expected."""
    out: list[ConfigError] = []
    entries = raw.get("entry")
    for i, e in enumerate(entries if isinstance(entries, list) else []):
        dims = e.get("dims") if isinstance(e, dict) else None
        for k, d in dims.items() if isinstance(dims, dict) else ():
            key = f"entry[{i}].dims.{k}" if k.isidentifier() else f'entry[{i}].dims."{k}"'
            if k.startswith(".."):
                if not isinstance(d, list) or not d or not all(_positive_int(x) for x in d):
                    out.append(
                        ConfigError(
                            key,
                            f"variadic group {k} takes a list of dims (positive integers), "
                            f'e.g. "{k}" = [4, 128]; got {_toml_repr(d)}',
                        )
                    )
            elif isinstance(d, list):
                out.append(
                    ConfigError(
                        key,
                        f"dimension {k} takes one positive integer, not a list "
                        f'(lists are for variadic groups such as "..b")',
                    )
                )
            elif not _positive_int(d):
                out.append(
                    ConfigError(
                        key,
                        f"dimension {k} takes a positive integer, e.g. {k} = 128; "
                        f"got {_toml_repr(d)}",
                    )
                )
    return out


def _positive_int(x: Any) -> bool:
    return isinstance(x, int) and not isinstance(x, bool) and x >= 1


def _toml_repr(x: Any) -> str:
    """A value as the user wrote it in TOML, with its TOML type."""
    kind = (
        "a boolean"
        if isinstance(x, bool)
        else "an integer"
        if isinstance(x, int)
        else "a float"
        if isinstance(x, float)
        else "a string"
        if isinstance(x, str)
        else "an array"
        if isinstance(x, list)
        else "a table"
        if isinstance(x, dict)
        else "a date/time"
    )
    if isinstance(x, bool):
        text = "true" if x else "false"
    elif isinstance(x, str):
        text = '"' + x.replace('"', '\\"') + '"'
    elif isinstance(x, dict):
        text = (
            "{ " + ", ".join(f"{k} = {_toml_repr(v).split(' (')[0]}" for k, v in x.items()) + " }"
        )
    else:
        text = str(x).replace("'", '"').replace("True", "true").replace("False", "false")
    if len(text) > 60:
        text = text[:57] + "..."
    return f"{text} ({kind})"


def _user_path(loc: tuple[Any, ...], raw: Any) -> tuple[str, Any]:
    """The key path in kina.toml terms (``entry[1].dims.B``) and the value found there.

    pydantic's ``loc`` also names the member of a union it tried (``int``, ``list[int]``):
    those parts are not keys of the file, so they are dropped by walking the data itself."""
    out, node = "", raw
    for part in loc:
        if isinstance(part, int) and isinstance(node, list) and 0 <= part < len(node):
            out += f"[{part}]"
            node = node[part]
        elif isinstance(node, dict) and part in node:
            out += ("." if out else "") + str(part)
            node = node[part]
        elif isinstance(node, dict) and isinstance(part, str) and part.isidentifier():
            out += ("." if out else "") + part  # a required key that is missing
            node = None
    return out or "(top level)", node


_EXPECTED = {
    "int_type": "an integer",
    "int_parsing": "an integer",
    "int_from_float": "an integer",
    "bool_type": "true or false",
    "bool_parsing": "true or false",
    "string_type": "a string",
    "list_type": "an array",
    "dict_type": "a table",
    "model_type": "a table",
    "model_attributes_type": "a table",
}


def _message(err: Any, value: Any) -> str:
    """What the user wrote and what kina.toml expects there, without pydantic's internals."""
    kind, ctx = err["type"], err.get("ctx") or {}
    if kind == "extra_forbidden":
        return "unknown key (check its spelling; kina.toml.example lists every key)"
    if kind == "missing":
        return "required key is missing"
    if kind == "value_error":
        return str(ctx.get("error", err["msg"])).removeprefix("Value error, ")
    got = f"; got {_toml_repr(value)}" if value is not None else ""
    if kind in _EXPECTED:
        return f"expected {_EXPECTED[kind]}{got}"
    if kind == "literal_error":
        return f"expected one of {ctx.get('expected', '')}{got}"
    if kind in ("greater_than_equal", "less_than_equal"):
        op = ">=" if kind == "greater_than_equal" else "<="
        return f"expected an integer {op} {ctx.get('ge', ctx.get('le'))}{got}"
    if kind == "string_pattern_mismatch" and "sm_" in str(ctx.get("pattern", "")):
        return f'expected a GPU architecture such as "sm_90" or "sm_90a"{got}'
    if kind == "string_pattern_mismatch":
        return f"expected text of the form {ctx.get('pattern', '')!s}{got}"
    if kind in ("string_too_short", "too_short"):
        return f"must not be empty{got}"
    return f"{err['msg']}{got}"


def _inside(pattern: str) -> str | None:
    """Why a path or glob of kina.toml cannot name anything inside the workspace, or None.
    Sources, exclusions and an entry's file are relative to the root and never leave it
    (docs/language.md); such a pattern used to match nothing, silently."""
    if not pattern.strip():
        return "must not be empty"
    parts = pattern.replace("\\", "/").split("/")
    if pattern.startswith(("/", "~")):
        return f"{pattern!r} is absolute; paths here are relative to the workspace root"
    if ".." in parts:
        return (
            f"{pattern!r} goes up with '..'; paths here are relative to the workspace root "
            "and stay inside the workspace"
        )
    return None


def _unread_entry_file(
    i: int, file: str, sources: list[str], exclude: list[str]
) -> list[ConfigError]:
    """An entry whose ``file`` the workspace does not read (excluded, or outside ``sources``):
    one of the two settings is a mistake, and building it anyway made ``exclude`` mean
    "except where an entry says otherwise" (docs/language.md, "Workspace sources")."""
    import posixpath

    from kinac.workspace.globs import glob_match

    path = posixpath.normpath(file.replace("\\", "/"))
    key = f"entry[{i}].file"
    for j, pat in enumerate(exclude):
        if glob_match(path, pat):
            return [
                ConfigError(
                    key,
                    f"{file!r} is excluded by workspace.exclude[{j}] = {pat!r}: the workspace "
                    "does not read it; remove the exclusion or point the entry at a source",
                )
            ]
    if not any(glob_match(path, pat) for pat in sources):
        return [
            ConfigError(
                key,
                f"{file!r} matches none of workspace.sources ({', '.join(map(repr, sources))}"
                "): the workspace does not read it; add it to sources or point the entry at "
                "a source",
            )
        ]
    return []


def _path_errors(m: Any) -> list[ConfigError]:
    """Sources, exclusions and entry files that cannot lie inside the workspace; meshes with
    more devices than kinac runs anywhere."""
    out: list[ConfigError] = []
    for field in ("sources", "exclude"):
        for i, pat in enumerate(getattr(m.workspace, field)):
            why = _inside(pat)
            if why is not None:
                out.append(ConfigError(f"workspace.{field}[{i}]", why))
    names = [("workspace.name", m.workspace.name)]
    names += [(f"entry[{i}].name", e.name) for i, e in enumerate(m.entry)]
    for key, name in names:  # shown in reports and typed on command lines: one line of text
        if not name.isprintable():
            out.append(ConfigError(key, f"must be printable text, got {name!r}"))
    for i, e in enumerate(m.entry):
        why = _inside(e.file) if e.file is not None else None
        if why is not None:
            out.append(ConfigError(f"entry[{i}].file", why))
        elif e.file is not None:
            out.extend(_unread_entry_file(i, e.file, m.workspace.sources, m.workspace.exclude))
    for i, mesh in enumerate(m.mesh):
        total = 1
        for d in mesh.shape:
            total *= d
        if total > MAX_MESH_DEVICES:
            out.append(
                ConfigError(
                    f"mesh[{i}].shape",
                    f"a mesh of {total} devices; kinac runs at most {MAX_MESH_DEVICES:,} "
                    "devices (simulated or real)",
                )
            )
    return out


def _twice(table: str, what: str, names: list[str], key: str = ".name") -> list[ConfigError]:
    """A name used again in one table (entries, meshes, one mesh's axes): an error at the later
    one that names both places (``mesh[0]`` and ``mesh[2]``); which one is meant would
    otherwise be an accident of order."""
    out: list[ConfigError] = []
    for i, n in enumerate(names):
        first = names.index(n)
        if first != i:
            out.append(
                ConfigError(
                    f"{table}[{i}]{key}",
                    f"{what} {n!r} is used twice: {table}[{first}] and {table}[{i}]",
                )
            )
    return out


def validate(text: str, default_name: str) -> ConfigResult:
    """Parse and validate ``kina.toml`` text."""
    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        return ConfigResult(None, (ConfigError("", f"not valid TOML: {e}"),))
    ws = raw.setdefault("workspace", {})
    if isinstance(ws, dict):  # else pydantic says "workspace: expected a table"
        ws.setdefault("name", default_name)
    from pydantic import ValidationError

    try:
        m = _models().model_validate(raw)
    except ValidationError as e:
        errs: dict[str, ConfigError] = {}  # one error per key (a union reports each member)
        for err in e.errors():
            key, value = _user_path(tuple(err["loc"]), raw)
            errs.setdefault(key, ConfigError(key, _message(err, value)))
        return ConfigResult(None, (*errs.values(), *_dims_errors(raw)))
    errors: list[ConfigError] = _dims_errors(raw) + _path_errors(m)
    errors += _twice("entry", "entry name", [e.name for e in m.entry])
    errors += _twice("mesh", "mesh name", [x.name for x in m.mesh])
    meshes = []
    for i, mesh in enumerate(m.mesh):
        if mesh.axes is not None:
            errors += _twice(f"mesh[{i}].axes", "axis name", mesh.axes, "")
        axes = mesh.axes if mesh.axes is not None else ([mesh.name] if len(mesh.shape) == 1 else [])
        if len(axes) != len(mesh.shape):
            errors.append(
                ConfigError(
                    f"mesh[{i}].axes",
                    f"expected {len(mesh.shape)} axis names, one per mesh dimension",
                )
            )
        meshes.append(MeshConfig(mesh.name, tuple(mesh.shape), tuple(axes)))
    if errors:
        return ConfigResult(None, tuple(errors))
    cfg = WorkspaceConfig(
        name=m.workspace.name,
        sources=tuple(m.workspace.sources),
        exclude=tuple(m.workspace.exclude),
        target=TargetConfig(
            m.target.kind, m.target.arch, m.target.device, m.target.allow_tf32, m.target.graphs
        ),
        solver_budget_ms=m.solver.budget_ms,
        on_unknown=m.solver.on_unknown,
        meshes=tuple(meshes),
        entries=tuple(
            EntryConfig(
                e.name,
                e.defn or e.name,
                e.file,
                tuple(
                    sorted((k, tuple(v) if isinstance(v, list) else v) for k, v in e.dims.items())
                ),
                tuple(sorted(e.dtypes.items())),
                tuple(e.grad),
            )
            for e in m.entry
        ),
        cache_dir=m.workspace.cache_dir,
        cache_size_limit_mb=m.cache.size_limit_mb,
    )
    return ConfigResult(cfg)
