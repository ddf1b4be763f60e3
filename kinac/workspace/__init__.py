"""Workspaces: ``kina.toml`` (validated in :mod:`.schema`) and the files it names."""

from kinac.workspace.model import ConfigError, ConfigResult, EntryConfig, WorkspaceConfig

__all__ = ["ConfigError", "ConfigResult", "EntryConfig", "WorkspaceConfig"]
