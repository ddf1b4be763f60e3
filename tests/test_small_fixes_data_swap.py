"""A torch tensor whose ``.data`` is swapped for another shape between calls (which moves no
``_version``, so the hot path took it for the same form): before the fix the entry's own check
raised ``KinaRuntimeError``; now it is a ``KinaCallError`` naming the argument, its shape and
the expected one, like any other wrong shape, and a swap to a shape that fits simply runs."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from small_fixes_support import dense_file

import kinac

__all__ = ["dense_file"]

ROOT = Path(__file__).resolve().parent.parent


def _hot(fn: object, *args: object) -> None:
    for _ in range(4):  # slow, fast, fast (memoised), hot
        fn(*args)  # type: ignore[operator]
    assert fn.hot_calls >= 1  # type: ignore[attr-defined]


def test_a_swapped_data_of_the_wrong_shape_is_a_call_error(tmp_path: Path) -> None:
    ws = tmp_path / "mlp"
    shutil.copytree(ROOT / "workspaces" / "mlp", ws, ignore=shutil.ignore_patterns(".kinac-*"))
    cfg = ws / "kina.toml"
    cfg.write_text(
        cfg.read_text().replace("B = 4, S = 128, D = 256, F = 1024", "B = 2, S = 3, D = 8, F = 16")
    )
    fn = kinac.compile(ws, "mlp", no_cache=True)
    x = torch.ones(2, 3, 8)
    args = (x, torch.ones(8, 16), torch.ones(16), torch.ones(16, 8), torch.ones(8))
    _hot(fn, *args)
    x.data = torch.ones(2, 3, 9)
    for _ in range(2):  # and again (the memo is not left pointing at the refused form)
        with pytest.raises(kinac.KinaCallError) as e:
            fn(*args)
        assert not isinstance(e.value, kinac.KinaRuntimeError)
        assert "argument `x` has shape [2, 3, 9], but entry `mlp` expects [2, 3, 8]" in str(e.value)


def test_a_swapped_data_of_a_shape_that_fits_runs(dense_file: Path) -> None:
    fn = kinac.compile(dense_file, "dense", no_cache=True)
    x, w, b = torch.ones(2, 3), torch.ones(3, 4), torch.zeros(4)
    _hot(fn, x, w, b)
    x.data = torch.full((5, 3), 2.0)
    y = torch.from_dlpack(fn(x, w, b))
    assert tuple(y.shape) == (5, 4)
    np.testing.assert_array_equal(y.numpy(), np.full((5, 4), 6, np.float32))
    x.data = torch.ones(5, 7)
    with pytest.raises(kinac.KinaCallError, match=r"shape \[3, 4\].*`x` says K = 7"):
        fn(x, w, b)


def test_a_runtime_error_of_the_same_form_is_still_raised_as_it_is(tmp_path: Path) -> None:
    src = tmp_path / "g.kina"
    src.write_text(
        "(module g)\n(defn pick [(t : (tensor f32 [V D])) (i : (tensor i32 [N]))] -> "
        "(tensor f32 [N D])\n  (gather t i))\n"
    )
    fn = kinac.compile(src, "pick", no_cache=True)
    t, i = torch.arange(4.0).reshape(4, 1), torch.tensor([0, 3], dtype=torch.int32)
    _hot(fn, t, i)
    i[1] = 9  # a data write: same form, and the entry's gather check fails
    with pytest.raises(kinac.KinaRuntimeError, match="gather index 9"):
        fn(t, i)


class _LaunchFirst:
    """A GPU entry's bound-call protocol (:func:`kinac.rt.cuda.entry_hot.bind_hot`: ``run``
    taking the arrays as one tuple, launched first, versions compared after) around a real
    host entry; like the GPU's, a call whose addresses moved falls back to the entry's general
    call, which refuses the new shape with the runtime's error (``KinaGpuError`` there)."""

    def __init__(self, entry: Any) -> None:
        self.entry = entry

    def __call__(self, *arrays: Any) -> Any:
        return self.entry(*arrays)

    def hot_path(self, arrays: tuple[Any, ...]) -> Any:
        def run(xs: tuple[Any, ...]) -> Any:
            return self.entry(*xs)

        def call(*xs: Any) -> Any:
            return run(xs)

        call.run = run  # type: ignore[attr-defined]
        call.launch_first = True  # type: ignore[attr-defined]
        call.ins = None  # type: ignore[attr-defined]
        return call


def test_the_launch_first_hot_path_redoes_a_swapped_call_too(dense_file: Path) -> None:
    fn = kinac.compile(dense_file, "dense", no_cache=True)
    x, w, b = torch.ones(2, 3), torch.ones(3, 4), torch.zeros(4)
    fn(x, w, b)
    ((key, (entry, where)),) = fn._fast.items()
    fn._fast[key] = (_LaunchFirst(entry), where)
    _hot(fn, x, w, b)
    assert fn._memo[0] is not None and fn._memo[0][9]  # the launch-first branch
    x.data = torch.ones(5, 7)
    with pytest.raises(kinac.KinaCallError, match=r"shape \[3, 4\].*`x` says K = 7"):
        fn(x, w, b)
    x.data = torch.full((5, 3), 2.0)
    np.testing.assert_array_equal(np.asarray(fn(x, w, b)), np.full((5, 4), 6, np.float32))
