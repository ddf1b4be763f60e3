"""The diagnostic codes sharding propagation emits, and a builder.

Why a table of its own: these codes come from ``shard_propagate`` (a stage after checking),
not from the checker, so the checker's corpus (tests/golden/check) cannot produce them; their
goldens are tests/golden/shard. Each has an explain page (kinac/diag/explain).
"""

from __future__ import annotations

from kinac.diag.model import Diagnostic, Label

SHARD_CODES: dict[str, str] = {
    "K0703": "two shardings of one mesh axis on one tensor",
    "K0704": "pinned shardings disagree",
    "K0705": "a redistribution was planned (note)",
    "K0706": "a reshard or collective names a mesh, axis or dim the entry does not have",
    "K0707": "a written collective does not match the layouts",
    "K0708": "the declared result layout cannot be reached",
}


def shard_diagnostic(
    code: str,
    severity: str,
    message: str,
    primary: Label,
    secondary: tuple[Label, ...] = (),
    help: str | None = None,
) -> Diagnostic:
    """A diagnostic with one of :data:`SHARD_CODES`."""
    assert code in SHARD_CODES, code
    return Diagnostic(code, severity, message, primary, secondary, (), help)
