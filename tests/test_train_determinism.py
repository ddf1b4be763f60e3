"""Same seed, same inputs: bitwise-identical losses and weights across two training runs of
the ~1M decoder, on the host and (``-m gpu``) on the GPU; another seed differs."""

from __future__ import annotations

import numpy as np
import pytest
from train_support import CACHE, DECODER

from kinac.train import Trainer
from kinac.train.optim import to_numpy


def _run(seed: int, target: str, steps: int = 3, cache: str = CACHE) -> tuple[list[float], dict]:
    tr = Trainer(DECODER, "decoder_1m", seed=seed, target=target, cache_dir=cache)
    losses = [r.loss for r in tr.run(steps)]
    return losses, {k: to_numpy(v).copy() for k, v in tr.weights.items()}


def _same(a: tuple[list[float], dict], b: tuple[list[float], dict]) -> None:
    assert a[0] == b[0]  # bitwise: floats compare exactly
    assert a[1].keys() == b[1].keys()
    for k in a[1]:
        assert a[1][k].tobytes() == b[1][k].tobytes(), k


def test_host_training_is_bitwise_deterministic() -> None:
    first, second = _run(7, "cpu"), _run(7, "cpu")
    _same(first, second)
    other = _run(8, "cpu")
    assert other[0] != first[0]
    assert not np.array_equal(other[1]["emb"], first[1]["emb"])


def _no_gpu() -> bool:
    from kinac.rt import cuda

    return not cuda.available()


@pytest.mark.gpu
@pytest.mark.skipif(_no_gpu(), reason="no CUDA GPU")
def test_gpu_training_is_bitwise_deterministic(tmp_path_factory: pytest.TempPathFactory) -> None:
    cache = str(tmp_path_factory.mktemp("gpu-cache"))
    first, second = _run(7, "cuda", cache=cache), _run(7, "cuda", cache=cache)
    _same(first, second)
    assert first[0][-1] < first[0][0]


def test_without_donation_the_same_bits() -> None:
    """The GPU's way (each call returns new arrays: no ``out=``, no ping-pong), run on the
    host, gives the donated run's losses and weights bit for bit (f32, and f16 with the
    scaler's unscale and checks)."""
    for entry in ("decoder_1m", "decoder_1m_f16"):
        a = Trainer(DECODER, entry, seed=5, cache_dir=CACHE)
        b = Trainer(DECODER, entry, seed=5, cache_dir=CACHE, donate=False)
        ra, rb = a.run(3), b.run(3)
        assert [r.loss for r in ra] == [r.loss for r in rb]
        assert [r.skipped for r in ra] == [r.skipped for r in rb]
        for k, v in a.weights.items():
            assert v.tobytes() == to_numpy(b.weights[k]).tobytes(), (entry, k)
        assert b.allocations_per_step[1] > 0  # it did allocate: the other path ran
