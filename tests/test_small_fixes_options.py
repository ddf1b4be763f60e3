"""``kinac.compile``'s keyword options: an unknown one is a usage error naming it (with the
closest valid name), a GPU-only one with ``target="cpu"`` is ignored with a warning. Before the
fix every unknown option was accepted silently (``graph=False`` changed nothing)."""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pytest
from small_fixes_support import dense_file

import kinac
from kinac.api_options import GPU_OPTIONS, IgnoredOptionWarning

__all__ = ["dense_file"]


def test_an_unknown_option_is_a_usage_error_listing_the_valid_ones(dense_file: Path) -> None:
    with pytest.raises(kinac.KinaUsageError) as e:
        kinac.compile(dense_file, "dense", bogus=1, no_cache=True)
    msg = str(e.value)
    assert "unknown option `bogus`" in msg
    assert "cache_dir, no_cache" in msg
    assert all(k in msg for k in GPU_OPTIONS)
    with pytest.raises(
        kinac.KinaUsageError, match=r"unknown option `graph` \(did you mean `graphs`"
    ):
        kinac.compile(dense_file, "dense", target="cuda", graph=False, no_cache=True)
    with pytest.raises(kinac.KinaUsageError, match=r"unknown option `no_cahce`.*`no_cache`"):
        kinac.value_and_grad(dense_file, "dense", wrt=["w"], no_cahce=True)


def test_a_sharded_compile_names_its_own_options(dense_file: Path) -> None:
    with pytest.raises(kinac.KinaUsageError) as e:
        kinac.compile(dense_file, "dense", mesh=2, graphs=True, no_cache=True)
    msg = str(e.value)
    assert "unknown option `graphs`" in msg and "timeout_s" in msg and "backend" in msg


def test_gpu_options_on_the_cpu_warn_and_are_ignored(dense_file: Path) -> None:
    with pytest.warns(IgnoredOptionWarning, match=r"graphs=, pdl= apply to target='cuda' only"):
        fn = kinac.compile(dense_file, "dense", graphs=True, pdl=False, no_cache=True)
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        kinac.compile(dense_file, "dense", graphs=False, no_cache=True)
    assert [w.filename for w in seen] == [__file__]  # the caller's line, not kinac's
    x, w, b = np.ones((2, 3), np.float32), np.ones((3, 4), np.float32), np.ones(4, np.float32)
    np.testing.assert_array_equal(np.asarray(fn(x, w, b)), np.full((2, 4), 4, np.float32))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        kinac.compile(dense_file, "dense", no_cache=True, cache_dir=None)
