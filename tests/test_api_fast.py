"""Every call of a compiled defn takes the fast path after its first of a kind (issue 14 item 3).

Calls with dim parameters (positional or keyword) used to bind Kina types from every tensor on
every call; now the form of the arguments (array type, dtype, shape, device; dim values) finds
the loaded specialisation. Observed through ``fast_calls``/``slow_calls`` and the fast cache,
never a timing; wrong arguments still get the full path's errors.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

import kinac
from kinac.errors import KinaCallError

SRC = """(module t)
(defn f [(N : dim) (x : (tensor f32 [(* N K)])) (y : (tensor f32 [(* N K)]))]
  -> (tensor f32 [(* N K)])
  (add (mul x y) x))
(defn g [(x : (tensor f32 [B D])) (y : (tensor f32 [D]))] -> (tensor f32 [B D])
  (add x y))
(defn h [(N : dim) (x : (tensor f32 [B D])) (M : dim) (y : (tensor f32 [(* N M)]))]
  -> (tensor f32 [B D])
  (mul x (sum y :axis 0)))
"""


@pytest.fixture(scope="module")
def src(tmp_path_factory: pytest.TempPathFactory) -> Path:
    p = tmp_path_factory.mktemp("fast") / "t.kina"
    p.write_text(SRC, encoding="utf-8")
    return p


def _rand(r: np.random.Generator, *shape: int) -> np.ndarray:
    return r.standard_normal(shape).astype(np.float32)


def test_positional_and_keyword_dims_take_the_fast_path_after_the_first_call(src: Path) -> None:
    f = kinac.compile(src, "f", no_cache=True)
    r = np.random.default_rng(0)
    x, y = _rand(r, 12), _rand(r, 12)
    np.testing.assert_allclose(np.asarray(f(3, x, y)), x * y + x, rtol=1e-6)
    assert (f.slow_calls, f.fast_calls) == (1, 0)
    for _ in range(3):  # new data, same form: the fast path, the right answer
        x, y = _rand(r, 12), _rand(r, 12)
        np.testing.assert_allclose(np.asarray(f(3, x, y)), x * y + x, rtol=1e-6)
    assert (f.slow_calls, f.fast_calls) == (4 - 3, 3)
    np.testing.assert_allclose(np.asarray(f(x, y, N=3)), x * y + x, rtol=1e-6)
    np.testing.assert_allclose(np.asarray(f(x, y, N=3)), x * y + x, rtol=1e-6)
    assert (f.slow_calls, f.fast_calls) == (2, 4)
    assert len(f._entries) == 1  # one specialisation, reached by two forms of call
    assert len(f._fast) == 2
    # another dim value is another specialisation (N = 4, K = 3), found by the slow path once
    np.testing.assert_allclose(np.asarray(f(4, x, y)), x * y + x, rtol=1e-6)
    f(4, x, y)
    assert (f.slow_calls, f.fast_calls, len(f._entries)) == (3, 5, 2)


def test_torch_tensors_with_dims_take_the_fast_path(src: Path) -> None:
    torch = pytest.importorskip("torch")
    f = kinac.compile(src, "h", no_cache=True)
    r = np.random.default_rng(1)
    for i in range(4):
        x, y = torch.from_numpy(_rand(r, 2, 5)), torch.from_numpy(_rand(r, 6))
        got = torch.from_dlpack(f(2, x, 3, y))  # dims interleaved with arrays, in declared order
        np.testing.assert_allclose(got.numpy(), x.numpy() * y.numpy().sum(), rtol=1e-5)
        assert (f.slow_calls, f.fast_calls) == (1, i)
    got = torch.from_dlpack(f(x, y, N=3, M=2))  # N = 3, M = 2: another specialisation
    np.testing.assert_allclose(got.numpy(), x.numpy() * y.numpy().sum(), rtol=1e-5)
    f(x, y, M=2, N=3)  # keyword order is part of the form: a slow call, the same entry
    f(x, y, N=3, M=2)
    assert (f.slow_calls, f.fast_calls, len(f._entries)) == (3, 4, 2)


def test_arrays_only_calls_count_too(src: Path) -> None:
    f = kinac.compile(src, "g", no_cache=True)
    r = np.random.default_rng(2)
    y = _rand(r, 4)
    for _ in range(3):
        x = _rand(r, 3, 4)
        np.testing.assert_allclose(np.asarray(f(x, y)), x + y, rtol=1e-6)
    assert (f.slow_calls, f.fast_calls) == (1, 2)


def _error(fn: Any, *args: object, **dims: int) -> str:  # a kinac.api.CompiledDefn
    with pytest.raises(KinaCallError) as e:
        fn(*args, **dims)
    return str(e.value)


def test_wrong_arguments_after_fast_calls_get_the_same_errors_as_a_fresh_callable(
    src: Path,
) -> None:
    r = np.random.default_rng(3)
    x, y = _rand(r, 12), _rand(r, 12)
    warm = kinac.compile(src, "f", no_cache=True)
    for _ in range(2):
        warm(3, x, y)
        warm(x, y, N=3)
    bad_calls: list[tuple[tuple[object, ...], dict[str, int]]] = [
        ((5, x, y), {}),  # 5 does not divide 12
        ((3, x, _rand(r, 9)), {}),  # the arrays disagree
        ((3, x.astype(np.float64), y), {}),  # a dtype the parameter is not
        ((x, y), {}),  # the dim is missing
        ((3, x), {}),  # an array is missing
        ((3, x, y, y), {}),  # one array too many
        ((True, x, y), {}),  # a bool is no dim
        ((x, y), {"N": True}),
        ((3, x, [1.0] * 12), {}),  # not an array
    ]
    fresh = kinac.compile(src, "f", no_cache=True)
    for args, dims in bad_calls:
        assert _error(warm, *args, **dims) == _error(fresh, *args, **dims)
    assert warm.fast_calls == 2 and len(warm._entries) == 1


def test_keyword_dims_must_be_ints(src: Path) -> None:
    """Keyword dims were not checked: ``N=True`` bound N = 1 and ``N=3.0`` bound 3."""
    f = kinac.compile(src, "f", no_cache=True)
    x = np.ones(12, np.float32)
    assert "`N` must be a positive int, got True" in _error(f, x, x, N=True)
    assert "`N` must be a positive int, got 3.0" in _error(f, x, x, N=3.0)  # type: ignore[arg-type]
    f(x, x, N=3)
    assert "got True" in _error(f, x, x, N=True)  # after a fast-path form with N = 3, too


class NoDevice:
    """A DLPack producer without ``.device`` (as numpy before 2.0): keyed by its DLPack device."""

    def __init__(self, a: np.ndarray) -> None:
        self.a, self.dtype, self.shape = a, a.dtype, a.shape

    def __array__(self, dtype: object = None, copy: object = None) -> np.ndarray:
        return self.a

    def __dlpack__(self, **kw: object) -> object:
        return self.a.__dlpack__(**kw)  # type: ignore[arg-type]

    def __dlpack_device__(self) -> tuple[int, int]:
        return self.a.__dlpack_device__()


def test_arrays_without_a_device_attribute_take_the_fast_path(src: Path) -> None:
    f = kinac.compile(src, "g", no_cache=True)
    r = np.random.default_rng(4)
    y = _rand(r, 4)
    for _ in range(3):
        x = _rand(r, 3, 4)
        np.testing.assert_allclose(np.asarray(f(NoDevice(x), NoDevice(y))), x + y, rtol=1e-6)
    assert (f.slow_calls, f.fast_calls) == (1, 2)
