"""Gradient buckets attacked (bug round 2026-12-02e): ``bucket_all_reduces`` decided that
nothing was bucketed by comparing step counts, and a bucketed program can have exactly as many
steps as the original (each bucket is pack, all-reduce, unpack: 6 all-reduces in two buckets,
one per dtype, are 6 steps too), so the unbucketed program came back: ``bucket_mb=25`` ran 6
all-reduces here, while ``bucket_mb`` of 48 bytes ran 5. Now any bucket emitted is kept. The
values are bitwise the unbucketed ones at every cap, f64 and f32 gradients interleaved."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

import kinac

SRC = """(mesh dp [2])
(defn f [(x : (tensor f64 [4 3] @sharded(axis=0, mesh=dp))) (w1 : (tensor f64 [3 5]))
         (b1 : (tensor f32 [5])) (w2 : (tensor f64 [5 2])) (s : f64) (b2 : (tensor f32 [1 2]))
         (i : (tensor i32 [4] @sharded(axis=0, mesh=dp)))] -> f64
  (let [(h (tanh (add (matmul x w1) (cast b1 :to f64))))
        (o (add (matmul h w2) (cast b2 :to f64)))]
    (add (mul s (sum (sum (square o) :axis 1) :axis 0))
         (sum (mul (cast i :to f64) (sum o :axis 1)) :axis 0))))
"""
WRT = ["b2", "w1", "s", "b1", "w2", "x"]


@pytest.fixture(scope="module")
def path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    p = tmp_path_factory.mktemp("bucket") / "b.kina"
    p.write_text(SRC)
    return p


def _args() -> list[Any]:
    rng = np.random.default_rng(0)
    return [
        rng.standard_normal((4, 3)),
        rng.standard_normal((3, 5)),
        rng.standard_normal(5).astype(np.float32),
        rng.standard_normal((5, 2)),
        np.float64(0.7),
        rng.standard_normal((1, 2)).astype(np.float32),
        rng.integers(-2, 3, 4).astype(np.int32),
    ]


@pytest.mark.parametrize(("bucket_mb", "all_reduces"), [(None, 6), (48 / 2**20, 5), (25, 2)])
def test_buckets_are_kept_and_bitwise(
    path: Path, bucket_mb: float | None, all_reduces: int
) -> None:
    base = kinac.value_and_grad(path, "f", wrt=WRT, mesh="")
    v0, g0 = base(*_args())
    fn = kinac.value_and_grad(path, "f", wrt=WRT, mesh="", bucket_mb=bucket_mb)
    v, g = fn(*_args())
    # at 25 MB one bucket per dtype: the f64 partial sums (the loss among them), the f32 ones
    assert fn.last_log.counts() == {("all-reduce", "dp"): all_reduces}
    assert v == v0
    for k in WRT:
        assert g[k].dtype == g0[k].dtype and g[k].shape == g0[k].shape
        np.testing.assert_array_equal(g[k], g0[k])
