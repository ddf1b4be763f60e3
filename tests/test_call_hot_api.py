"""The hot path of a compiled defn's call (issue 14: calls that cost nothing): the very
arguments of the last calls again skip even the fast path's key (dtype, shape and device read
from every array), on the CPU target here. Observed through ``hot_calls``, never a timing.

What must never take it: an array changed in place in a way that changes its form (numpy's
assignable ``shape``/``dtype``, torch's ``t_``/``resize_``), a dead array (its id may name a new
one), a ``True`` for a dim, another dim value; each then gets the fast or full path's answer
or error, exactly as a fresh callable does.
"""

from __future__ import annotations

import gc
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
(defn h [(x : (tensor f32 [B D])) (y : (tensor f32 [D])) (z : (tensor f32 [D]))]
  -> (tensor f32 [B D])
  (add (add x y) z))
"""


@pytest.fixture(scope="module")
def src(tmp_path_factory: pytest.TempPathFactory) -> Path:
    p = tmp_path_factory.mktemp("hot") / "t.kina"
    p.write_text(SRC, encoding="utf-8")
    return p


def _rand(r: np.random.Generator, *shape: int) -> np.ndarray:
    return r.standard_normal(shape).astype(np.float32)


def test_the_same_arguments_take_the_hot_path_from_the_fourth_call(src: Path) -> None:
    f = kinac.compile(src, "f", no_cache=True)
    r = np.random.default_rng(0)
    x, y = _rand(r, 12), _rand(r, 12)
    for i in range(6):
        np.testing.assert_allclose(np.asarray(f(3, x, y)), x * y + x, rtol=1e-6)
        # 1st: slow; 2nd: fast (seen once); 3rd: fast, memoised; then hot
        assert (f.slow_calls, f.fast_calls, f.hot_calls) == (1, i, max(0, i - 2))
    x[:] = 2.0  # new contents, same arrays: still hot, and the new data is read
    np.testing.assert_allclose(np.asarray(f(3, x, y)), 2 * y + 2, rtol=1e-6)
    assert f.hot_calls == 4
    # keyword dims: a new form (slow once), then hot too, and True is still refused
    for _ in range(5):
        np.testing.assert_allclose(np.asarray(f(x, y, N=3)), x * y + x, rtol=1e-6)
    assert (f.slow_calls, f.hot_calls) == (2, 6)
    with pytest.raises(KinaCallError, match="`N` must be a positive int, got True"):
        f(x, y, N=True)
    with pytest.raises(KinaCallError, match="got True"):
        f(True, x, y)


def test_fresh_arrays_each_call_never_memoise(src: Path) -> None:
    f = kinac.compile(src, "g", no_cache=True)
    r = np.random.default_rng(1)
    y = _rand(r, 4)
    for _ in range(5):
        x = _rand(r, 3, 4)
        np.testing.assert_allclose(np.asarray(f(x, y)), x + y, rtol=1e-6)
    assert (f.slow_calls, f.fast_calls, f.hot_calls) == (1, 4, 0)
    assert f._memo[0] is None


def _hot(f: Any, *args: object) -> None:  # a kinac.api.CompiledDefn
    for _ in range(4):
        f(*args)
    assert f._memo[0] is not None


def test_a_numpy_array_reshaped_in_place_leaves_the_hot_path(src: Path) -> None:
    f = kinac.compile(src, "g", no_cache=True)
    r = np.random.default_rng(2)
    x, y = _rand(r, 3, 4), _rand(r, 4)
    _hot(f, x, y)
    hot = f.hot_calls
    x.shape = (4, 3)  # the same object, another form: B = 4, and y no longer fits D = 3
    with pytest.raises(KinaCallError, match="`y`"):
        f(x, y)
    assert f.hot_calls == hot
    x.shape = (2, 6)
    y2 = _rand(r, 6)
    np.testing.assert_allclose(np.asarray(f(x, y2)), x + y2, rtol=1e-6)
    x2 = _rand(r, 3, 4).astype(np.float64)
    _hot(f, x2.astype(np.float32), y)
    x3 = _rand(r, 3, 4)
    _hot(f, x3, y)
    x3.dtype = np.int32  # type: ignore[assignment,misc]  # reinterpreted in place: refused, never run as f32
    with pytest.raises(KinaCallError, match="i32"):
        f(x3, y)


def test_a_torch_tensor_changed_in_place_leaves_the_hot_path(src: Path) -> None:
    torch = pytest.importorskip("torch")
    f = kinac.compile(src, "g", no_cache=True)
    x, y = torch.randn(4, 4), torch.randn(4)
    _hot(f, x, y)
    hot = f.hot_calls
    x.t_()  # same object and shape, another layout: the fast path decides, and reads it right
    torch.testing.assert_close(torch.from_dlpack(f(x, y)), x + y)
    x.resize_(2, 8)
    with pytest.raises(KinaCallError):
        f(x, y)  # y no longer matches D = 8
    assert f.hot_calls == hot
    z = torch.randn(2, 8)
    _hot(f, z, torch.randn(8))
    z.add_(1.0)  # a data write: the version moves, the fast path serves, still right
    w = torch.randn(8)
    torch.testing.assert_close(torch.from_dlpack(f(z, w)), z + w)


def test_mixed_numpy_and_torch_arguments_read_each_by_its_kind(src: Path) -> None:
    """A call mixing a torch tensor and a numpy array: the tensor's in-place change is seen by
    its version counter (its shape is not read on the hot path: ~0.5 us per tensor), the
    array's by its shape and dtype; either change leaves the hot path."""
    torch = pytest.importorskip("torch")
    from kinac.api_hot import state_reader

    x, y = torch.randn(4, 4), np.random.default_rng(5).standard_normal(4).astype(np.float32)
    assert state_reader((x, y))((x, y)) == (x._version, (y.shape, y.dtype))
    f = kinac.compile(src, "g", no_cache=True)
    _hot(f, x, y)
    hot = f.hot_calls
    x.resize_(2, 8)  # the version moves: the fast path decides, and refuses D = 8 against y
    with pytest.raises(KinaCallError):
        f(x, y)
    assert f.hot_calls == hot
    x = torch.randn(4, 4)
    _hot(f, x, y)
    hot = f.hot_calls
    y.shape = (2, 2)  # type: ignore[misc]  # numpy's assignable shape: refused, not run
    with pytest.raises(KinaCallError):
        f(x, y)
    assert f.hot_calls == hot


def test_a_dead_argument_drops_the_memo_before_its_id_can_be_reused(src: Path) -> None:
    f = kinac.compile(src, "g", no_cache=True)
    r = np.random.default_rng(3)
    x, y = _rand(r, 3, 4), _rand(r, 4)
    _hot(f, x, y)
    del x
    gc.collect()
    assert f._memo[0] is None
    x = _rand(r, 5, 4)  # may well get the dead array's id: the fast path's key decides
    np.testing.assert_allclose(np.asarray(f(x, y)), x + y, rtol=1e-6)


def test_another_dim_value_is_not_the_hot_call(src: Path) -> None:
    f = kinac.compile(src, "f", no_cache=True)
    r = np.random.default_rng(4)
    x, y = _rand(r, 12), _rand(r, 12)
    _hot(f, 3, x, y)
    hot = f.hot_calls
    np.testing.assert_allclose(np.asarray(f(4, x, y)), x * y + x, rtol=1e-6)
    np.testing.assert_allclose(np.asarray(f(x, y, N=2)), x * y + x, rtol=1e-6)
    assert f.hot_calls == hot and len(f._entries) == 3
    with pytest.raises(KinaCallError, match="positive int"):
        f(0, x, y)


def test_an_array_refilled_in_place_each_call_keeps_its_memo(src: Path) -> None:
    torch = pytest.importorskip("torch")
    f = kinac.compile(src, "g", no_cache=True)
    x, y = torch.randn(3, 4), torch.randn(4)
    _hot(f, x, y)
    memo = f._memo[0]
    for i in range(3):
        x.copy_(torch.full((3, 4), float(i)))  # the version moves: the fast path serves
        torch.testing.assert_close(torch.from_dlpack(f(x, y)), x + y)
        assert f._memo[0][5] is memo[5]  # renewed, not rebuilt (the same weak references)
    hot = f.hot_calls
    torch.testing.assert_close(torch.from_dlpack(f(x, y)), x + y)
    assert f.hot_calls == hot + 1  # unchanged since the last call: hot again


def test_a_bound_call_that_checks_some_forms_itself_answers_miss(src: Path) -> None:
    """An entry's bound call may check the form of some arrays itself (a GPU entry's staged
    host arrays): it lists them in ``vouched``, the hot path then reads only the others' state,
    and the bound call answers ``MISS`` (nothing run) when a vouched array changed form, so the
    full path decides: the same error as a fresh callable, then hot again once it is back."""
    from kinac.rt.hot import MISS

    f = kinac.compile(src, "g", no_cache=True)
    r = np.random.default_rng(8)
    x, y = _rand(r, 2, 4), _rand(r, 4)
    f(x, y)
    entry = next(iter(f._entries.values()))
    answers: list[str] = []

    class Bound:
        vouched = frozenset({0})

        def __init__(self, arrays: tuple[Any, ...]) -> None:
            self.form = (arrays[0].shape, arrays[0].dtype)

        def __call__(self, *a: Any) -> Any:
            if (a[0].shape, a[0].dtype) != self.form:
                answers.append("miss")
                return MISS
            answers.append("run")
            return entry(*a)

    f._entries = {k: _WithHotPath(e, Bound) for k, e in f._entries.items()}
    f._fast.clear()
    _hot(f, x, y)
    hot = f.hot_calls
    assert answers[-1] == "run" and f._memo[0][7] == ((y.shape, y.dtype),)  # x's not read
    x.shape = (1, 8)  # type: ignore[misc]  # in place: D = 8 against y's 4
    with pytest.raises(KinaCallError):
        f(x, y)
    assert answers[-1] == "miss" and f.hot_calls == hot
    x.shape = (2, 4)  # type: ignore[misc]
    _hot(f, x, y)
    np.testing.assert_allclose(np.asarray(f(x, y)), x + y, rtol=1e-6)
    assert f.hot_calls > hot and answers[-1] == "run"


class _WithHotPath:
    """An entry with a bound call of ``make``'s (a CPU entry has none)."""

    def __init__(self, entry: Any, make: Any) -> None:
        self.entry, self.make = entry, make

    def __call__(self, *a: Any) -> Any:
        return self.entry(*a)

    def hot_path(self, arrays: tuple[Any, ...]) -> Any:
        return self.make(arrays)


def test_torch_tensors_beside_a_vouched_array_are_read_by_version(src: Path) -> None:
    """A vouched numpy ``x`` beside torch tensors (a staged MLP's weights): the hot path reads
    the tensors' versions only (through one getter, inline), and sees each in-place change."""
    torch = pytest.importorskip("torch")
    import operator

    from kinac.rt.hot import MISS

    f = kinac.compile(src, "h", no_cache=True)
    x = _rand(np.random.default_rng(9), 2, 4)
    y, z = torch.randn(4), torch.randn(4)
    f(x, y, z)

    class Bound:
        vouched = frozenset({0})

        def __init__(self, arrays: tuple[Any, ...]) -> None:
            self.form = (arrays[0].shape, arrays[0].dtype)

        def __call__(self, *a: Any) -> Any:
            return MISS if (a[0].shape, a[0].dtype) != self.form else entry(*a)

    entry = next(iter(f._entries.values()))
    f._entries = {k: _WithHotPath(e, Bound) for k, e in f._entries.items()}
    f._fast.clear()
    _hot(f, x, y, z)
    assert type(f._memo[0][6]) is operator.itemgetter
    assert f._memo[0][7] == (y._version, z._version)
    hot = f.hot_calls
    z.add_(1.0)  # a data write: the version moves, the fast path serves, the new data read
    np.testing.assert_allclose(np.asarray(f(x, y, z)), x + y.numpy() + z.numpy(), rtol=1e-6)
    assert f.hot_calls == hot
    np.testing.assert_allclose(np.asarray(f(x, y, z)), x + y.numpy() + z.numpy(), rtol=1e-6)
    assert f.hot_calls == hot + 1  # renewed: hot again
    y.unsqueeze_(0)  # in place: [1, 4] where [D] is declared
    with pytest.raises(KinaCallError):
        f(x, y, z)
    assert f.hot_calls == hot + 1
