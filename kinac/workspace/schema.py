"""Validation of ``kina.toml`` with pydantic: the only module that imports pydantic.

Every error names the key (``entry[1].dims.B``) and what was expected, so a user can fix the
file without reading kinac's source. Unknown keys are errors too: a typo must not be silently
ignored.
"""

from __future__ import annotations

import tomllib
from typing import Any, Literal

from kinac.workspace.model import (
    ConfigError,
    ConfigResult,
    EntryConfig,
    MeshConfig,
    TargetConfig,
    WorkspaceConfig,
)

DTYPE_NAMES = ("f64", "f32", "f16", "bf16", "i64", "i32", "bool")


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
        size_limit_mb: int = Field(default=2048, ge=1)

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
        defn: str | None = None
        file: str | None = None
        dims: dict[str, int | list[int]] = {}  # a variadic group ("..b") takes a list
        dtypes: dict[str, Literal["f64", "f32", "f16", "bf16", "i64", "i32", "bool"]] = {}

        @field_validator("dims")
        @classmethod
        def _dims_positive(cls, v: dict[str, int | list[int]]) -> dict[str, int | list[int]]:
            for k, d in v.items():
                if isinstance(d, list):
                    if not k.startswith(".."):
                        raise ValueError(f"dimension {k} takes one positive integer, not a list "
                                         f"(lists are for variadic groups such as \"..b\")")
                    if any(x < 1 for x in d):
                        raise ValueError(f"variadic group {k} must list positive integers, got {d}")
                elif k.startswith(".."):
                    raise ValueError(f"variadic group {k} takes a list of dims, e.g. [4, 128]")
                elif d < 1:
                    raise ValueError(f"dimension {k} must be a positive integer, got {d}")
            return v

    class KinaToml(Strict):
        workspace: Workspace
        target: Target = Target()
        solver: Solver = Solver()
        cache: Cache = Cache()
        mesh: list[Mesh] = []
        entry: list[Entry] = []

    return KinaToml


def _key_path(loc: tuple[Any, ...]) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += ("." if out else "") + str(part)
    return out or "(top level)"


def validate(text: str, default_name: str) -> ConfigResult:
    """Parse and validate ``kina.toml`` text."""
    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        return ConfigResult(None, (ConfigError("(syntax)", f"kina.toml is not valid TOML: {e}"),))
    raw.setdefault("workspace", {}).setdefault("name", default_name)
    from pydantic import ValidationError

    try:
        m = _models().model_validate(raw)
    except ValidationError as e:
        errs = []
        for err in e.errors():
            msg = err["msg"]
            if err["type"] == "extra_forbidden":
                msg = "unknown key (check its spelling; kina.toml.example lists every key)"
            errs.append(ConfigError(_key_path(tuple(err["loc"])), msg))
        return ConfigResult(None, tuple(errs))
    errors: list[ConfigError] = []
    names = [e.name for e in m.entry]
    for i, n in enumerate(names):
        if names.index(n) != i:
            errors.append(ConfigError(f"entry[{i}].name", f"entry name {n!r} is used twice"))
    meshes = []
    for i, mesh in enumerate(m.mesh):
        axes = mesh.axes if mesh.axes is not None else ([mesh.name] if len(mesh.shape) == 1 else [])
        if len(axes) != len(mesh.shape):
            errors.append(ConfigError(f"mesh[{i}].axes", f"expected {len(mesh.shape)} axis names, one per mesh dimension"))
        meshes.append(MeshConfig(mesh.name, tuple(mesh.shape), tuple(axes)))
    if errors:
        return ConfigResult(None, tuple(errors))
    cfg = WorkspaceConfig(
        name=m.workspace.name,
        sources=tuple(m.workspace.sources),
        exclude=tuple(m.workspace.exclude),
        target=TargetConfig(m.target.kind, m.target.arch, m.target.device, m.target.allow_tf32, m.target.graphs),
        solver_budget_ms=m.solver.budget_ms,
        on_unknown=m.solver.on_unknown,
        meshes=tuple(meshes),
        entries=tuple(
            EntryConfig(e.name, e.defn or e.name, e.file,
                        tuple(sorted((k, tuple(v) if isinstance(v, list) else v) for k, v in e.dims.items())),
                        tuple(sorted(e.dtypes.items())))
            for e in m.entry
        ),
        cache_dir=m.workspace.cache_dir,
        cache_size_limit_mb=m.cache.size_limit_mb,
    )
    return ConfigResult(cfg)
