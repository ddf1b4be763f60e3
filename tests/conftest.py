"""Suite-wide settings: hypothesis runs derandomized and without an example database, so CI and
every developer see the same generated inputs (set KINAC_HYPOTHESIS_RANDOM=1 to explore)."""

from __future__ import annotations

import os

from hypothesis import settings

settings.register_profile("kinac", derandomize=True, database=None)
settings.register_profile("explore", derandomize=False)
settings.load_profile("explore" if os.environ.get("KINAC_HYPOTHESIS_RANDOM") else "kinac")
