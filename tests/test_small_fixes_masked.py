"""A numpy masked array at a call is refused (kinac has no masks): before the fix its mask was
silently ignored and the call computed over the values underneath, masked ones included."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from small_fixes_support import dense_file

import kinac

__all__ = ["dense_file"]


def test_a_masked_array_is_a_call_error_saying_what_to_pass(dense_file: Path) -> None:
    fn = kinac.compile(dense_file, "dense", no_cache=True)
    x = np.ma.masked_array(np.ones((2, 3), np.float32), mask=np.array([[1, 0, 0], [0, 0, 0]], bool))
    w, b = np.ones((3, 4), np.float32), np.zeros(4, np.float32)
    with pytest.raises(kinac.KinaCallError) as e:
        fn(x, w, b)
    msg = str(e.value)
    assert "argument `x` is a numpy masked array" in msg and "does not support masks" in msg
    assert "x.filled(value)" in msg and "x.data" in msg
    y = np.asarray(fn(x.filled(0), w, b))  # what the message says works
    np.testing.assert_array_equal(y, np.array([[2] * 4, [3] * 4], np.float32))
    np.asarray(fn(x.data, w, b))  # after a plain call (the fast path's forms), refused still
    with pytest.raises(kinac.KinaCallError, match="argument `w` is a numpy masked array"):
        fn(x.data, np.ma.masked_array(w), b)


def test_a_masked_array_is_refused_by_a_sharded_call_too(dense_file: Path) -> None:
    fn = kinac.compile(dense_file, "dense", mesh=2, no_cache=True)
    x = np.ma.masked_array(np.ones((2, 3), np.float32), mask=np.array([[1, 0, 0], [0, 0, 0]], bool))
    with pytest.raises(kinac.KinaCallError, match="argument `x` is a numpy masked array"):
        fn(x, np.ones((3, 4), np.float32), np.zeros(4, np.float32))
