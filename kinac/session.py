"""A build session: one workspace (or one file), one cache, one query database.

This is where ambient things become explicit inputs: the workspace root, the config path and
the cache directory are decided here once and handed to the engine as context; the cache
directory is chosen by ``--cache-dir``, then ``KINAC_CACHE_DIR``, then ``kina.toml``'s
``workspace.cache_dir``, then ``<workspace>/.kinac-cache``.
"""

from __future__ import annotations

import os
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kinac import pipeline
from kinac.diag.model import Diagnostic
from kinac.errors import KinaUsageError
from kinac.rules import Database
from kinac.rules.store import Store

UsageError = KinaUsageError  # the name this module used before kinac.errors had a hierarchy


@dataclass
class Workspace:
    """Where a build's inputs come from."""

    root: Path
    config_path: Path | None
    single_file: str | None

    @property
    def name(self) -> str:
        return Path(self.single_file).stem if self.single_file else self.root.name


def locate(path: str | os.PathLike[str]) -> Workspace:
    """A workspace directory (with or without ``kina.toml``) or a single ``.kina`` file."""
    p = Path(path)
    if not p.exists():
        raise UsageError(f"no such file or directory: {path}")
    if not p.is_absolute():
        try:
            os.getcwd()
        except FileNotFoundError:  # `.` still stats, but no absolute path leads to it
            raise UsageError(
                f"cannot find {path}: the current directory was deleted; cd to an existing "
                "directory, or give an absolute path"
            ) from None
    if p.is_dir():
        root = p.resolve()
        cfg = root / "kina.toml"
        # present in any form (a directory, a broken link): read, and reported if unreadable
        return Workspace(root, cfg if os.path.lexists(cfg) else None, None)
    if p.suffix != ".kina" and p.name != "kina.toml":
        raise UsageError(f"{path} is neither a workspace directory nor a .kina file")
    if p.name == "kina.toml":
        return Workspace(p.resolve().parent, p.resolve(), None)
    if not p.is_file():
        raise UsageError(f"{path} is not a file (a .kina path must name a regular file)")
    f = p.resolve()
    # A file inside a workspace is checked as part of it (its imports resolve against the
    # workspace root, kina.toml's meshes and solver settings apply, the cache is shared);
    # otherwise its own directory is the root.
    for d in f.parents:
        if os.path.lexists(d / "kina.toml"):
            return Workspace(d, d / "kina.toml", f.relative_to(d).as_posix())
    return Workspace(f.parent, None, f.name)


def _raw_setting(ws: Workspace, table: str, key: str) -> Any:
    """A ``kina.toml`` setting needed before the cache (and so the validated config) is open.

    Invalid files yield None here; the ``config`` query reports them properly.
    """
    if ws.config_path is None:
        return None
    try:
        if not ws.config_path.is_file():  # a pipe would block: the config query reports it
            return None
        raw = tomllib.loads(ws.config_path.read_text(encoding="utf-8"))
        return raw.get(table, {}).get(key)
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError, AttributeError):
        return None


def _absolute(p: Path) -> Path:
    """``p`` resolved, or only made absolute where it cannot be (a symlink loop: the cache's
    store then says it cannot use it, where ``resolve`` raised ``RuntimeError``)."""
    try:
        return p.resolve()
    except (RuntimeError, OSError):
        return Path(os.path.abspath(p))


def choose_cache_dir(ws: Workspace, cli_dir: str | None) -> Path:
    if cli_dir:
        return _absolute(Path(cli_dir))
    env = os.environ.get("KINAC_CACHE_DIR")
    if env:
        return _absolute(Path(env))
    cdir = _raw_setting(ws, "workspace", "cache_dir")
    if isinstance(cdir, str) and cdir:
        return _absolute(ws.root / cdir)
    return ws.root / ".kinac-cache"


def cache_size_limit(ws: Workspace) -> int:
    """``[cache] size_limit_mb`` in bytes (default 2 GiB)."""
    mb = _raw_setting(ws, "cache", "size_limit_mb")
    return (
        int(mb) * 1024**2
        if isinstance(mb, int) and not isinstance(mb, bool) and mb > 0
        else 2 * 1024**3
    )


def not_a_workspace(path: str | os.PathLike[str], root: Path, command: str | None = None) -> str:
    """Why ``path`` (a folder without ``kina.toml`` whose listing is empty) is no workspace.

    When its ``.kina`` files sit in nested workspaces (folders below it with their own
    ``kina.toml``, which a listing skips), "no .kina files" was untrue and left the user
    guessing: the message names each nested workspace and the command to run on it
    (``command``: the words typed before the path, ``check`` or ``cache stats``; None, from
    the Python API or ``kinac run``: the path to give instead)."""
    from kinac.pipeline_support import nested_workspaces

    nested = nested_workspaces(root)
    if not nested:
        return (
            f"{path} is not a kinac workspace: it has no kina.toml and no .kina files "
            "(give a workspace directory or a .kina file)"
        )
    shown = [os.path.join(str(path), d) for d in sorted(nested)]
    n = sum(len(fs) for fs in nested.values())
    files = f"its {n} .kina file belongs" if n == 1 else f"its {n} .kina files belong"
    more = ", ..." if len(shown) > 3 else ""
    if command is None:
        todo = f"give {shown[0]} instead" if len(shown) == 1 else "give one of them instead"
    else:
        runs = ", ".join(f"`kinac {command} {d}`" for d in shown[:3])
        todo = f"run {runs}{more}" + ("" if len(shown) == 1 else " (one per workspace)")
    if len(shown) == 1:
        where = f"the nested workspace {shown[0]}, which has its own kina.toml"
        rest = f"{todo}, or remove its kina.toml to read its files as {path}'s"
    else:
        where = (
            f"{len(shown)} nested workspaces ({', '.join(shown[:3])}{more}), each with its "
            "own kina.toml"
        )
        rest = f"{todo}, or remove a nested kina.toml to read that workspace's files as {path}'s"
    return f"{path} is not a kinac workspace: it has no kina.toml, and {files} to {where}; {rest}"


class Session:
    """Builds one workspace against one cache; ``db`` persists between calls (watch mode)."""

    def __init__(
        self,
        path: str | os.PathLike[str],
        cache_dir: str | None = None,
        no_cache: bool = False,
        target: str | None = None,
        command: str | None = None,
    ) -> None:
        self.ws = locate(path)
        if self.ws.config_path is None and self.ws.single_file is None:
            from kinac.pipeline_support import list_sources

            if not list_sources(self.ws.root):  # before the cache: nothing is created here
                raise UsageError(not_a_workspace(path, self.ws.root, command))
        self.cache_dir = choose_cache_dir(self.ws, cache_dir)
        self.store = None if no_cache else Store(self.cache_dir, cache_size_limit(self.ws))
        context: dict[str, Any] = {
            "root": str(self.ws.root),
            "config_path": str(self.ws.config_path) if self.ws.config_path else None,
            "single_file": self.ws.single_file,
            "default_name": self.ws.name,
            "target_override": target,
        }
        self.target_override = target
        self.db = Database(self.store, context)
        self._folders: tuple[tuple[str, ...], frozenset[str]] | None = None  # reads_folder

    # ------------------------------------------------------------------ running

    def config_result(self) -> Any:
        """The validated kina.toml (``.config``) or its errors (``.errors``)."""
        return pipeline.config(self.db, ())

    @staticmethod
    def config_error_text(e: Any) -> str:
        return f"kina.toml: {e.key + ': ' if e.key else ''}{e.message}"

    def config_errors(self) -> list[str]:
        return [self.config_error_text(e) for e in self.config_result().errors]

    def build(self, with_artifacts: bool = True) -> pipeline.BuildReport:
        """Check every file (and build entries when ``with_artifacts``); commits the cache."""
        try:
            if with_artifacts:
                report = pipeline.build(self.db, ())
            else:
                files = pipeline.source_files(self.db, ())
                report = pipeline.BuildReport(
                    tuple(pipeline.file_report(self.db, f) for f in files), ()
                )
        finally:
            self.db.commit()
        return report

    def diagnostics(self, report: pipeline.BuildReport) -> list[Diagnostic]:
        return [d for f in report.files for d in f.diagnostics]

    def resolve(self, loc: Any) -> Any:
        return pipeline.resolve_span(self.db, loc)

    def source_of(self, path: str) -> str | None:
        return pipeline.display_source(self.db, path)

    def invalidate_paths(self, paths: list[Path]) -> None:
        """Map changed filesystem paths to the inputs that read them (watch mode).

        A path is taken below the root as the watcher names it (a source that is a symlink is
        its own input, not its target's). A folder moved in, out or replaced (a watcher names
        the folder, not its files) re-reads every input; a source read through a symlink is
        re-read on every batch (the path that changed may be its target)."""
        listed = pipeline.source_listing(self.db, ())  # what the last build read
        cfg = self.ws.config_path
        inputs: list[tuple[Any, Any]] = [(pipeline.source_listing, ())]
        if cfg is not None and cfg.is_symlink():
            inputs.append((pipeline.config_text, ()))
        root_toml = self.ws.root / "kina.toml"
        for p in paths:
            if p == root_toml and self.ws.single_file is None:  # created or deleted, too
                self._relocate_config()
                inputs.append((pipeline.config_text, ()))
                continue
            if cfg is not None and (p == cfg or p.resolve() == cfg):
                inputs.append((pipeline.config_text, ()))
                continue
            rel = self.relative(p)
            if rel is None:
                continue
            if p.is_dir() or self.reads_folder(rel, listed):
                self.db.invalidate(None)
                return
            inputs.append((pipeline.source_text, rel))
        root = self.ws.root
        inputs.extend((pipeline.source_text, s) for s in listed if (root / s).is_symlink())
        self.db.invalidate(inputs)

    def _relocate_config(self) -> None:
        """The root's ``kina.toml`` appeared or went while watching: read the folder as a
        fresh process would (with it, or as a folder without one: before, a new one was read
        as a source, and a deleted one was "cannot read it" on every save)."""
        cfg = self.ws.root / "kina.toml"
        self.ws.config_path = cfg if os.path.lexists(cfg) else None
        self.db.context["config_path"] = str(cfg) if self.ws.config_path else None

    def relative(self, p: Path) -> str | None:
        """``p`` relative to the workspace root (as named, else resolved), or None if outside."""
        for path in (p, p.resolve()):
            try:
                return path.relative_to(self.ws.root).as_posix()
            except ValueError:
                continue
        return None

    def reads_folder(self, rel: str, listed: tuple[str, ...] | None = None) -> bool:
        """Whether the last build read a source below the folder ``rel`` (a deleted path is
        a folder of the workspace's sources if so). The listing's folders are computed once
        per listing: a ``git checkout`` names thousands of paths at once."""
        listed = pipeline.source_listing(self.db, ()) if listed is None else listed
        if self._folders is None or self._folders[0] is not listed:
            folders = {f.rsplit("/", n)[0] for f in listed for n in range(1, f.count("/") + 1)}
            self._folders = (listed, frozenset(folders))
        return rel.rstrip("/") in self._folders[1]

    def close(self) -> None:
        if self.store is not None:
            self.store.close()
