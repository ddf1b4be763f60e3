"""xDSL's declarative assembly formats parsed when first used, not when xDSL is imported.

Why: importing the dialects a host build lowers through (builtin, arith, math, memref, scf,
cf, llvm and kinac's own) costs 0.3-0.4 s of CPU, and a quarter of it is xDSL parsing the
``assembly_format`` string of every operation class as the class is defined
(``FormatProgram.from_str``). kinac prints and parses its IR in the generic format (canonical
kernels, the per-kernel queries), so most of those programs are never used; a process that
lowers one edited kernel paid for all of them. Each program is now parsed on its first use
(printing or parsing that operation in its custom format), with the same result.

Installed by :mod:`kinac.ir` as an import hook on the module that defines ``FormatProgram``,
so a process that never lowers never imports xDSL for it. ``KINAC_EAGER_XDSL_FORMATS=1``
turns it off (the test compares both).
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import os
import sys
from collections.abc import Callable, Sequence
from types import ModuleType
from typing import Any

TARGET = "xdsl.irdl.declarative_assembly_format"


class _LazyProgram:
    """Stands for a ``FormatProgram``: built from its arguments on first attribute access."""

    __slots__ = ("_make", "_args", "_program")

    def __init__(self, make: Callable[..., Any], args: tuple[Any, ...]) -> None:
        self._make, self._args, self._program = make, args, None

    def __getattr__(self, name: str) -> Any:
        if self._program is None:
            self._program = self._make(*self._args)
        return getattr(self._program, name)


def _patch(module: ModuleType) -> None:
    program = getattr(module, "FormatProgram", None)
    real = getattr(program, "from_str", None)
    if program is None or real is None or getattr(program, "_kinac_lazy", False):
        return  # another xDSL (leave it as it is), or done already

    def lazy(*args: Any) -> _LazyProgram:
        return _LazyProgram(real, args)

    program.from_str = staticmethod(lazy)  # type: ignore[attr-defined]
    program._kinac_lazy = True  # type: ignore[attr-defined]


class _Loader(importlib.abc.Loader):
    def __init__(self, real: importlib.abc.Loader) -> None:
        self.real = real

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType | None:
        return self.real.create_module(spec)

    def exec_module(self, module: ModuleType) -> None:
        self.real.exec_module(module)
        _patch(module)


class _Hook(importlib.abc.MetaPathFinder):
    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname != TARGET:
            return None
        sys.meta_path[:] = [f for f in sys.meta_path if f is not self]  # once
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        if spec is not None and spec.loader is not None:
            spec.loader = _Loader(spec.loader)
        return spec


def install() -> None:
    """Parse xDSL's operation formats lazily from now on (a no-op once xDSL defined them,
    or with ``KINAC_EAGER_XDSL_FORMATS=1``)."""
    if os.environ.get("KINAC_EAGER_XDSL_FORMATS") == "1":
        return
    if TARGET in sys.modules:
        _patch(sys.modules[TARGET])  # operations defined from now on
        return
    if not any(isinstance(f, _Hook) for f in sys.meta_path):
        sys.meta_path.insert(0, _Hook())
