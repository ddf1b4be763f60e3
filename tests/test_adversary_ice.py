"""Internal errors on valid programs found by the adversary hunt (2026-12-02), now
fixed; each test is the program that raised, run against numpy."""

from __future__ import annotations

from pathlib import Path

import numpy as np

import kinac

NAMED_GROUP_ELLIPSIS = """
(defn named [(x : (tensor f32 [..b D]))] -> (tensor f32 [..b 2 (/ D 2)])
  (where (divides 2 D))
  (reshape x [... 2 (/ D 2)]))
(defn inner [(x : (tensor f32 [..c D]))] -> (tensor f32 [..c 2 (/ D 2)])
  (where (divides 2 D))
  (reshape x [... 2 (/ D 2)]))
(defn outer [(x : (tensor f32 [..b D]))] -> (tensor f32 [..b 2 (/ D 2)])
  (where (divides 2 D))
  (inner x))
(defn widen [(x : (tensor f32 [..b 1]))] -> (tensor f32 [..b 4])
  (broadcast-to x [... 4]))
"""


def test_ellipsis_in_a_reshape_of_a_named_group(tmp_path: Path) -> None:
    """`...` in a target shape is the operand's own group, whatever the operand names it
    (it was KeyError '...' in Specialiser.shape: `kinac check` accepted the program)."""
    path = tmp_path / "g.kina"
    path.write_text(NAMED_GROUP_ELLIPSIS)
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    np.testing.assert_array_equal(kinac.compile(path, "named")(x), x.reshape(3, 2, 2))
    np.testing.assert_array_equal(kinac.compile(path, "outer")(x), x.reshape(3, 2, 2))
    y = np.arange(6, dtype=np.float32).reshape(2, 3, 1)
    np.testing.assert_array_equal(kinac.compile(path, "widen")(y), np.broadcast_to(y, (2, 3, 4)))
