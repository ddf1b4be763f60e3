"""Errors kinac raises to Python callers: one hierarchy under :class:`KinaError`.

Catching ``kinac.KinaError`` catches everything kinac reports about the caller's program, inputs,
configuration or environment; any other exception escaping kinac is a bug in kinac. Each class
carries the exit code the command line uses for it (``kinac.cli.main`` prints every
``KinaError`` as one ``kinac: error: ...`` line), so the CLI and the Python API agree on what is
whose fault:

- :class:`KinaUsageError` (exit 2): how kinac was invoked or configured (a bad path, flag,
  ``kina.toml`` or ``.npz``). :class:`KinaConfigError` is the ``kina.toml`` case.
- :class:`KinaCompileError` (exit 1): the program does not check or build.
- :class:`KinaCallError` (exit 1): arguments that do not fit the entry's signature.
- :class:`KinaRuntimeError` (exit 1): a compiled entry failed at run time (a gather index out of
  range, no GPU, a failed driver call, device memory exhausted).

This module imports nothing: the runtime's error classes subclass these without loading kinac.
"""

from __future__ import annotations

EXIT_OK, EXIT_PROGRAM_ERRORS, EXIT_USAGE, EXIT_INTERNAL = 0, 1, 2, 3


class KinaError(Exception):
    """Base class of every error kinac reports to a Python caller."""

    exit_code = EXIT_PROGRAM_ERRORS


class KinaUsageError(KinaError):
    """How kinac was invoked or configured: a missing path, a bad flag value, bad inputs file."""

    exit_code = EXIT_USAGE


class KinaConfigError(KinaUsageError):
    """``kina.toml`` is unreadable, not UTF-8, not TOML, or does not follow the schema."""


class KinaCompileError(KinaError):
    """The program does not check or build; the message holds the rendered diagnostics."""


class KinaCallError(KinaError, TypeError):
    """Arguments that do not fit the signature: wrong count, rank, shape, dtype or device."""


class KinaRuntimeError(KinaError, RuntimeError):
    """A compiled entry failed while running (a runtime check, the GPU driver, device memory)."""


# Names used before the hierarchy existed.
UsageError = KinaUsageError
KinacRuntimeError = KinaRuntimeError

__all__ = [
    "EXIT_INTERNAL",
    "EXIT_OK",
    "EXIT_PROGRAM_ERRORS",
    "EXIT_USAGE",
    "KinaCallError",
    "KinaCompileError",
    "KinaConfigError",
    "KinaError",
    "KinaRuntimeError",
    "KinaUsageError",
]
