"""Integer and bool arithmetic on the CPU target, as docs/language.md ("Integer and bool
arithmetic") states it: wrapping, floor division with ``x // 0 = 0``, truncating and
saturating casts. The spec is silent; these pin what kinac does against numpy."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

import kinac

SRC = """
(defn idiv [(a : (tensor i32 [N])) (b : (tensor i32 [N]))] -> (tensor i32 [N]) (div a b))
(defn ldiv [(a : (tensor i64 [N])) (b : (tensor i64 [N]))] -> (tensor i64 [N]) (div a b))
(defn half [(a : (tensor i32 [N]))] -> (tensor i32 [N]) (div a 2))
(defn wrap [(a : (tensor i32 [N])) (b : (tensor i32 [N]))] -> (tensor i32 [N]) (add (mul a b) a))
(defn total [(a : (tensor i32 [M N]))] -> (tensor i32 [M]) (sum a :axis -1))
(defn to-int [(a : (tensor f32 [N]))] -> (tensor i32 [N]) (cast a :to i32))
(defn to-bool [(a : (tensor f32 [N]))] -> (tensor bool [N]) (cast a :to bool))
"""


@pytest.fixture(scope="module")
def src(tmp_path_factory: pytest.TempPathFactory) -> Path:
    p = tmp_path_factory.mktemp("ints") / "ints.kina"
    p.write_text(SRC)
    return p


def _f(src: Path, name: str) -> Any:
    return kinac.compile(str(src), name, target="cpu")


def test_integer_division_is_floor_division_with_zero_for_zero(src: Path) -> None:
    rng = np.random.default_rng(5)
    a = rng.integers(-50, 50, 64).astype(np.int32)
    b = rng.integers(-6, 7, 64).astype(np.int32)
    b[:4] = 0
    want = np.where(b == 0, 0, a // np.where(b == 0, 1, b))
    np.testing.assert_array_equal(_f(src, "idiv")(a, b), want)
    np.testing.assert_array_equal(
        _f(src, "ldiv")(a.astype(np.int64), b.astype(np.int64)), want.astype(np.int64)
    )
    np.testing.assert_array_equal(_f(src, "half")(a), a // 2)
    lo = np.array([-(2**31)], np.int32)
    np.testing.assert_array_equal(_f(src, "idiv")(lo, np.array([-1], np.int32)), lo)


def test_integer_arithmetic_wraps(src: Path) -> None:
    a = np.array([2**31 - 1, -(2**31), 46341], np.int32)
    b = np.array([2, 1, 46341], np.int32)
    with np.errstate(over="ignore"):
        want = a * b + a
    np.testing.assert_array_equal(_f(src, "wrap")(a, b), want)
    m = np.array([[2**31 - 1, 1], [5, -7]], np.int32)
    np.testing.assert_array_equal(_f(src, "total")(m), np.array([-(2**31), -2], np.int32))


def test_float_to_integer_cast_truncates_and_saturates(src: Path) -> None:
    x = np.array([2.5, -2.5, 3.99, -3.99, np.nan, np.inf, -np.inf, 3e9, -3e9], np.float32)
    want = np.array([2, -2, 3, -3, 0, 2**31 - 1, -(2**31), 2**31 - 1, -(2**31)], np.int32)
    np.testing.assert_array_equal(_f(src, "to-int")(x), want)
    y = np.array([0.0, -0.0, np.nan, 1.0, 1e-30], np.float32)
    np.testing.assert_array_equal(_f(src, "to-bool")(y), np.array([0, 0, 1, 1, 1], bool))


BOOL_SRC = """
(defn keep [(x : (tensor bool [N]))] -> (tensor bool [N]) (where x x 1))
(defn pick [(c : (tensor bool [N])) (x : (tensor bool [N]))] -> (tensor bool [N]) (where c 0 x))
(defn is-one [(x : (tensor bool [N]))] -> (tensor bool [N]) (eq x 1))
(defn mask [(c : (tensor bool [N]))] -> (tensor bool [N]) (where c 1 0))
"""


def test_bool_literals_meet_bool_tensors(tmp_path: Path) -> None:
    """A literal 0/1 meeting a bool tensor was built as an f32 constant: `where` and `eq` of a
    bool tensor and a literal were an internal error (CheckerBug, exit 3) after a clean
    `kinac check`, and `(where c 1 0)` declared bool returned float32."""
    src = tmp_path / "b.kina"
    src.write_text(BOOL_SRC)
    c = np.array([True, False, True, False])
    x = np.array([False, False, True, True])
    cases = {
        "keep": ((x,), np.where(x, x, True)),
        "pick": ((c, x), np.where(c, False, x)),
        "is-one": ((x,), x == 1),
        "mask": ((c,), c.copy()),
    }
    for name, (args, want) in cases.items():
        got = kinac.compile(str(src), name, target="cpu")(*args)
        assert got.dtype == np.bool_, (name, got.dtype)
        np.testing.assert_array_equal(got, want, err_msg=name)
