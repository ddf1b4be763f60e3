"""The staging copy with streaming stores (``kinac.rt.cuda.staging_nt``, issue 17's last goal):
bit-identical to ``numpy.copyto`` at every size and alignment of the source (which calls take
it: ``tests/test_staging_hot.py``)."""

from __future__ import annotations

import numpy as np
import pytest

from kinac.rt.cuda import staging_nt

pytestmark = pytest.mark.skipif(not staging_nt.available(), reason="no llvmlite host target")


def _aligned(n: int) -> np.ndarray:
    raw = np.zeros(n + 64, np.uint8)
    off = -raw.ctypes.data % 64
    return raw[off : off + n]


@pytest.mark.parametrize("n", [0, 1, 31, 127, 128, 129, 4096 + 77, 70_000])
def test_stream_copy_equals_numpy_at_every_size_and_source_offset(n: int) -> None:
    rng = np.random.default_rng(n)
    src = rng.integers(0, 256, n + 3, dtype=np.uint8)
    for off in (0, 1, 3):  # unaligned sources
        dst = _aligned(n)
        staging_nt.copy_bytes(dst.ctypes.data, src[off:].ctypes.data, n)
        np.testing.assert_array_equal(dst, src[off : off + n])
        if n:  # (an empty array's data pointer need not be aligned)
            blk = _aligned(n * 4).view(np.float32)
            x = rng.standard_normal(n).astype(np.float32)
            cp = staging_nt.stream_copier(blk)
            assert cp is not None
            cp(blk, x)
            assert blk.tobytes() == x.tobytes()
    # a misaligned block: no streaming copier (the stores are aligned)
    assert staging_nt.stream_copier(_aligned(256 + 4)[4:].view(np.float32)) is None
