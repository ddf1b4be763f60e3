"""``CudaOps.upload`` keeps a rank-0 argument rank 0 (``np.ascontiguousarray`` makes any 0-d array
``[1]``, which the entry then refused: a learned scalar of a sharded program on GPU ranks).
The device half is replaced by a recorder, so this runs without a GPU."""

from __future__ import annotations

from typing import Any

import numpy as np

from kinac.rt.comm.device_run import CudaOps


class _Recorder:
    def __init__(self) -> None:
        self.shapes: list[tuple[int, ...]] = []
        self.copied: list[np.ndarray] = []


def _ops(rec: _Recorder) -> CudaOps:
    ops = object.__new__(CudaOps)  # no CUDA here: only upload's own logic is under test

    class _Tensor:
        def __init__(self, shape: tuple[int, ...]) -> None:
            self.shape = shape

        def copy_from_host(self, a: np.ndarray) -> None:
            rec.copied.append(a)

    def empty(shape: tuple[int, ...], dtype: Any, stream: int = 0) -> Any:
        rec.shapes.append(tuple(shape))
        return _Tensor(tuple(shape))

    ops.empty = empty  # type: ignore[method-assign]
    return ops


def test_upload_keeps_a_scalar_rank_zero_and_makes_views_contiguous() -> None:
    rec = _Recorder()
    ops = _ops(rec)
    ops.upload(np.float32(2.5) * np.ones((), np.float32))
    strided = np.arange(12, dtype=np.float32).reshape(3, 4)[:, ::2]
    ops.upload(strided)
    assert rec.shapes == [(), (3, 2)]
    assert rec.copied[0].shape == () and float(rec.copied[0]) == 2.5
    assert rec.copied[1].flags.c_contiguous
    np.testing.assert_array_equal(rec.copied[1], strided)
