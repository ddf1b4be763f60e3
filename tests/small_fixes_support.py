"""A one-defn Kina file the testers' small fixes (``tests/test_small_fixes_*.py``) compile."""

from __future__ import annotations

from pathlib import Path

import pytest

DENSE = """(module dense)

(defn dense [(x : (tensor T [..b K])) (w : (tensor T [K N])) (bias : (tensor T [N]))]
  -> (tensor T [..b N])
  (add (matmul x w) bias))
"""


@pytest.fixture(scope="module")
def dense_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("small_fixes") / "dense.kina"
    path.write_text(DENSE)
    return path
