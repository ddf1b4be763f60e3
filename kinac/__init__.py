"""kinac: an incremental, shape-typed compiler for the Kina tensor language.

Import cost is kept tiny: the heavy parts (z3, xdsl, llvmlite, cuda) load only when a stage
that needs them runs.
"""

from __future__ import annotations

from typing import Any

from kinac.errors import (
    KinaCallError,
    KinaCompileError,
    KinaConfigError,
    KinaError,
    KinaRuntimeError,
    KinaUsageError,
)

__version__ = "0.1.0"
__all__ = [
    "KinaCallError",
    "KinaCompileError",
    "KinaConfigError",
    "KinaError",
    "KinaRuntimeError",
    "KinaUsageError",
    "compile",
]


def compile(path: str, entry: str, target: str = "cpu", **options: Any) -> Any:  # noqa: A001
    """Compile defn ``entry`` of the Kina file or workspace at ``path``; see :mod:`kinac.api`."""
    from kinac.api import compile as _compile

    return _compile(path, entry, target=target, **options)
