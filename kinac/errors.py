"""Errors kinac raises to Python callers (the CLI turns diagnostics into exit codes instead)."""

from __future__ import annotations


class KinaError(Exception):
    """Base class of every error kinac reports to a Python caller."""


class KinaCompileError(KinaError):
    """The program does not check or build; the message holds the rendered diagnostics."""


class KinaCallError(KinaError, TypeError):
    """Arguments that do not fit the signature: wrong count, rank, shape, dtype or device."""
