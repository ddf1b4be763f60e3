"""The validated workspace configuration, as frozen records (cheap to cache and compare).

The pydantic schema that produces it lives in :mod:`kinac.workspace.schema`; only that module
imports pydantic, and only when ``kina.toml`` changed since the cache last saw it.
"""

from __future__ import annotations

from kinac.rules.codec import record


@record
class TargetConfig:
    """Where entries run: ``cpu`` or ``cuda``; ``arch`` is the GPU architecture (``sm_90``)."""

    kind: str = "cpu"
    arch: str = "sm_90"
    device: int = 0
    allow_tf32: bool = False
    graphs: bool = True


@record
class MeshConfig:
    """A device mesh declared in ``kina.toml`` (meshes may also be declared in source)."""

    name: str
    shape: tuple[int, ...]
    axes: tuple[str, ...]


@record
class EntryConfig:
    """An entry point: defn ``defn`` (in ``file`` when names are ambiguous) at concrete dims."""

    name: str
    defn: str
    file: str | None
    dims: tuple[tuple[str, int | tuple[int, ...]], ...]  # a variadic group ("..b") has a tuple
    dtypes: tuple[tuple[str, str], ...] = ()
    grad: tuple[str, ...] = ()  # differentiate the (scalar) loss w.r.t. these params (issue 12)


@record
class WorkspaceConfig:
    """Everything ``kina.toml`` says, defaults filled in."""

    name: str
    sources: tuple[str, ...] = ("**/*.kina",)
    exclude: tuple[str, ...] = ()
    target: TargetConfig = TargetConfig()
    solver_budget_ms: int = 2000
    on_unknown: str = "error"  # "error" | "runtime-check"
    meshes: tuple[MeshConfig, ...] = ()
    entries: tuple[EntryConfig, ...] = ()
    cache_dir: str | None = None
    cache_size_limit_mb: int = 2048


@record
class ConfigError:
    """One problem in ``kina.toml``: the key path, what was wrong, what was expected."""

    key: str
    message: str


@record
class ConfigResult:
    """``config`` set when valid, else ``errors``."""

    config: WorkspaceConfig | None
    errors: tuple[ConfigError, ...] = ()
