"""Errors raised by the host runtime."""

from __future__ import annotations

from kinac import errors


class KinaRuntimeError(errors.KinaRuntimeError):
    """A compiled entry was called wrongly or failed a runtime check (e.g. a gather index).

    The message names the parameter or the kernel and the offending value; nothing is returned
    from a call that raises (no garbage outputs).
    """
