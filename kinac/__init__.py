"""kinac: an incremental, shape-typed compiler for the Kina tensor language.

Import cost is kept tiny: the heavy parts (z3, xdsl, llvmlite, cuda) load only when a stage
that needs them runs.
"""

from __future__ import annotations

import os
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
    "profile",
    "value_and_grad",
]


def compile(  # noqa: A001
    path: str | os.PathLike[str], entry: str, target: str = "cpu", **options: Any
) -> Any:
    """Compile defn ``entry`` of the Kina file or workspace at ``path``; see :mod:`kinac.api`."""
    from kinac.api import compile as _compile

    return _compile(path, entry, target=target, **options)


def profile(fn: Any, *arrays: Any, repeat: int = 10, **dims: int) -> Any:
    """Time every kernel of compiled ``fn`` on ``arrays``: a :class:`kinac.observe.profile.Profile`
    (``.table()``, ``.kernels``, ``.write_trace(path)``); see :mod:`kinac.observe.profile`."""
    from kinac.observe.profile import profile as _profile

    return _profile(fn, *arrays, repeat=repeat, **dims)


def value_and_grad(
    path: str | os.PathLike[str], entry: str, wrt: Any = None, target: str = "cpu", **options: Any
) -> Any:
    """Compile loss ``entry`` with its gradients with respect to the parameters ``wrt`` (default:
    the kina.toml entry's ``grad``): the callable returns ``(value, {name: gradient})``; see
    :mod:`kinac.api_grad`."""
    from kinac.api_grad import value_and_grad as _value_and_grad

    return _value_and_grad(path, entry, wrt, target=target, **options)
