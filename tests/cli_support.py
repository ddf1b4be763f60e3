"""``kinac`` in a fresh process, as a user runs it: the checkout first on ``PYTHONPATH`` and none
of the variables that change what it prints or where it caches (``KINAC_CACHE_DIR``,
``NO_COLOR``, ``FORCE_COLOR``, ``KINAC_DEBUG``) unless the test passes them in ``env``. One
helper, so every end-to-end CLI test runs under the same environment."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
_AMBIENT = ("KINAC_CACHE_DIR", "NO_COLOR", "FORCE_COLOR", "KINAC_DEBUG")


def kinac_process(
    *args: str, env: dict[str, str] | None = None, cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    """``python -m kinac ARGS`` run to completion (5 minutes at most), output captured as text."""
    full = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])]),
        **(env or {}),
    }
    for k in _AMBIENT:
        if env is None or k not in env:
            full.pop(k, None)
    return subprocess.run(
        [sys.executable, "-m", "kinac", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=full,
        timeout=300,
        check=False,
    )
