"""Shared by the training tests: the decoder workspace and one compile cache per test process
(the decoder's gradient is compiled once, not once per test module)."""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DECODER = Path(os.environ.get("KINAC_TEST_DECODER", ROOT / "workspaces" / "decoder"))
CACHE = tempfile.mkdtemp(prefix="kinac-train-cache-")
atexit.register(shutil.rmtree, CACHE, True)
