"""Internal errors on valid programs found by the adversary hunt (2026-12-02), pinned as
strict xfails where the fix belongs to a stage another helper owns (the lead's list)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import kinac

NAMED_GROUP_ELLIPSIS = """
(defn named [(x : (tensor f32 [..b D]))] -> (tensor f32 [..b 2 (/ D 2)])
  (where (divides 2 D))
  (reshape x [... 2 (/ D 2)]))
"""


@pytest.mark.xfail(
    strict=True,
    reason="kinac/check/specialise.py (not the adversary's): `...` in a reshape target of an "
    "operand whose group is named (`..b`) is KeyError '...' at specialisation (Specialiser.shape "
    "looks the literal '...' up in the named groups); `kinac check` accepts the program, and "
    "with an anonymous group (`[... D]`) or `[..b 2 (/ D 2)]` it runs",
)
def test_ellipsis_in_a_reshape_of_a_named_group(tmp_path: Path) -> None:
    path = tmp_path / "g.kina"
    path.write_text(NAMED_GROUP_ELLIPSIS)
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    np.testing.assert_array_equal(kinac.compile(path, "named")(x), x.reshape(3, 2, 2))
