"""Suite-wide settings.

Hypothesis runs derandomized and without an example database, so CI and every developer see
the same generated inputs (set KINAC_HYPOTHESIS_RANDOM=1 to explore). Golden files are written
only under ``--update-goldens`` (``goldens.py``): a missing golden fails.
"""

from __future__ import annotations

import os

import goldens
import pytest
from hypothesis import settings

settings.register_profile("kinac", derandomize=True, database=None)
settings.register_profile("explore", derandomize=False)
settings.load_profile("explore" if os.environ.get("KINAC_HYPOTHESIS_RANDOM") else "kinac")


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        goldens.OPTION,
        action="store_true",
        default=False,
        help="write the golden files under tests/golden/ from this run's output (review the diff)",
    )


def pytest_configure(config: pytest.Config) -> None:
    goldens.set_update(bool(config.getoption("update_goldens")))
