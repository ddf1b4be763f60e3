"""The staging copy with streaming stores (``kinac.rt.cuda.staging_nt``, issue 17's last goal):
bit-identical to ``numpy.copyto`` at every size and alignment of the source (which calls take
it: ``tests/test_staging_hot.py``)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from kinac.rt.cuda import staging_nt

pytestmark = pytest.mark.skipif(not staging_nt.available(), reason="no llvmlite host target")


def _aligned(n: int) -> np.ndarray:
    raw = np.zeros(n + 64, np.uint8)
    off = -raw.ctypes.data % 64
    return raw[off : off + n]


@pytest.mark.parametrize("width", staging_nt.WIDTHS)
@pytest.mark.parametrize("n", [0, 1, 31, 127, 128, 129, 255, 4096 + 77, 70_000])
def test_stream_copy_equals_numpy_at_every_size_and_source_offset(n: int, width: int) -> None:
    rng = np.random.default_rng(n)
    src = rng.integers(0, 256, n + 3, dtype=np.uint8)
    for off in (0, 1, 3):  # unaligned sources
        dst = _aligned(n)
        staging_nt.copy_bytes(dst.ctypes.data, src[off:].ctypes.data, n, width)
        np.testing.assert_array_equal(dst, src[off : off + n])
        if n:  # (an empty array's data pointer need not be aligned)
            blk = _aligned(n * 4).view(np.float32)
            x = rng.standard_normal(n).astype(np.float32)
            cp = staging_nt.stream_copier(blk, width=width)
            assert cp is not None
            cp(blk, x)
            assert blk.tobytes() == x.tobytes()
    # a misaligned block: no streaming copier (the stores are aligned)
    assert staging_nt.stream_copier(_aligned(256 + 4)[4:].view(np.float32), width=width) is None


def test_stream_min_is_a_third_of_the_l2(tmp_path: Any) -> None:
    """The default threshold from sysfs: the level-2 unified (or data) cache's size / 3 + 1; 2
    MiB assumed where it cannot be read."""
    from kinac.rt.cuda.staging import stream_min_default

    for d, (level, kind, size) in enumerate(
        [("1", "Data", "48K"), ("1", "Instruction", "32K"), ("2", "Unified", "2048K")]
    ):
        base = tmp_path / f"index{d}"
        base.mkdir()
        for name, text in (("level", level), ("type", kind), ("size", size)):
            (base / name).write_text(text + "\n")
    assert stream_min_default(str(tmp_path)) == (2 << 20) // 3 + 1
    (tmp_path / "index2" / "size").write_text("1M\n")
    assert stream_min_default(str(tmp_path)) == (1 << 20) // 3 + 1
    assert stream_min_default(str(tmp_path / "missing")) == (2 << 20) // 3 + 1
