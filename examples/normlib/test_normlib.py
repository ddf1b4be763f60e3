"""normlib's own tests (run by the guide's command `python3 -m pytest -q examples/normlib`)."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
import normlib  # noqa: E402
from normlib import gpu  # noqa: E402

RNG = np.random.default_rng(0)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_ops_match_numpy(dtype: type) -> None:
    x = RNG.standard_normal((2, 3, 16)).astype(dtype)
    g, b, c = (RNG.uniform(0.5, 2.0, 16).astype(dtype) for _ in range(3))
    tol = 1e-5 if dtype == np.float32 else 1e-12
    np.testing.assert_allclose(np.asarray(normlib.scale_shift(x, g, b)), x * g + b, rtol=tol)
    rms = x / np.sqrt((x * x).mean(-1, keepdims=True) + 1e-6) * g + b
    np.testing.assert_allclose(np.asarray(normlib.rms_scale_shift(x, g, b)), rms, rtol=tol * 10)
    np.testing.assert_allclose(np.asarray(normlib.soft_clip(x, c)), c * np.tanh(x / c), rtol=tol)


def test_a_wrong_shape_is_refused_before_running() -> None:
    import kinac

    with pytest.raises(kinac.KinaCallError, match="D"):
        normlib.soft_clip(np.ones((2, 8), np.float32), np.ones(4, np.float32))


def test_own_kernel_compiles_to_ptx_without_a_gpu() -> None:
    ptx = gpu.scale_ptx("sm_80")
    assert ".entry normlib_scale" in ptx and ".target sm_80" in ptx
