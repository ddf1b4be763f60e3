"""Mixed precision: the dynamic loss scaler (a planted inf skips the step and halves the scale;
N clean steps grow it) and bf16/f16 training of the ~1M decoder with f32 master weights."""

from __future__ import annotations

import math

import numpy as np
import pytest
from train_support import CACHE, DECODER

from kinac.train import Trainer
from kinac.train.amp import LossScaler


@pytest.mark.parametrize("bad", [np.inf, -np.inf, np.nan])
@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_a_planted_nonfinite_is_found_and_halves_the_scale(bad: float, dtype: type) -> None:
    sc = LossScaler(init_scale=1024.0, growth_interval=3, cache_dir=CACHE)
    rng = np.random.default_rng(0)
    grads = {"a": rng.standard_normal((4, 6)).astype(dtype), "b": rng.standard_normal(5).astype(dtype),  # type: ignore[var-annotated]
             "c": rng.standard_normal((2, 3, 2)).astype(dtype), "s": np.asarray(2.0, dtype)}  # fmt: skip
    unscaled, finite = sc.unscale(grads)
    assert finite
    for k, g in grads.items():
        np.testing.assert_array_equal(unscaled[k], g * dtype(1 / 1024))
    for k in grads:
        planted = {n: g.copy() for n, g in grads.items()}
        planted[k].reshape(-1)[-1] = bad
        assert sc.unscale(planted)[1] is False, k
    sc.update(False)
    assert (sc.scale, sc.clean_steps, sc.skipped) == (512.0, 0, 1)


def test_clean_steps_grow_the_scale() -> None:
    sc = LossScaler(init_scale=8.0, growth_interval=3)
    seen = []
    for finite in [True, True, True, True, False, True, True, True]:
        sc.update(finite)
        seen.append(sc.scale)
    assert seen == [8.0, 8.0, 16.0, 16.0, 8.0, 8.0, 8.0, 16.0]


def test_f16_training_skips_overflowing_steps_and_keeps_the_weights() -> None:
    tr = Trainer(DECODER, "decoder_1m_f16", seed=0, growth_interval=2, cache_dir=CACHE)
    assert tr.scaler is not None
    tr.scaler.scale = 2.0**40  # f16 gradients overflow at this scale: the step is skipped
    before = {k: v.copy() for k, v in tr.weights.items()}
    r = tr.step()
    assert r.skipped and r.scale == 2.0**40 and tr.scaler.scale == 2.0**39
    for k, v in tr.weights.items():
        assert v.tobytes() == before[k].tobytes(), k
    tr.scaler.scale = 1024.0
    results = tr.run(4)
    assert [r.skipped for r in results] == [False] * 4
    assert [r.scale for r in results] == [1024.0, 1024.0, 2048.0, 2048.0]
    assert tr.scaler.scale == 4096.0
    assert any(not np.array_equal(v, before[k]) for k, v in tr.weights.items())
    assert all(math.isfinite(r.loss) for r in results)


@pytest.mark.parametrize("entry", ["decoder_1m_bf16", "decoder_1m_f16"])
def test_mixed_precision_training_learns_and_tracks_f32(entry: str) -> None:
    ref = [r.loss for r in Trainer(DECODER, "decoder_1m", seed=3, cache_dir=CACHE).run(6)]
    tr = Trainer(DECODER, entry, seed=3, cache_dir=CACHE, loss_scale="dynamic")
    assert all(w.dtype == np.float32 for w in tr.weights.values())  # f32 master weights
    res = tr.run(6)
    done = [r.loss for r in res if not r.skipped]
    assert done[-1] < 0.7 * done[0]
    # the first step (same weights, same data) agrees with f32 to the compute dtype's precision
    assert res[0].loss == pytest.approx(ref[0], rel=2e-2)


def test_a_fixed_loss_scale_stays_and_tracks_the_dynamic_run() -> None:
    fixed = Trainer(DECODER, "decoder_1m_f16", seed=2, loss_scale=256.0, cache_dir=CACHE)
    dyn = Trainer(DECODER, "decoder_1m_f16", seed=2, cache_dir=CACHE)
    dyn.scaler.scale = 256.0  # type: ignore[union-attr]
    a, b = fixed.run(3), dyn.run(3)
    assert [r.scale for r in a] == [256.0] * 3 and not any(r.skipped for r in a)
    assert [r.loss for r in a] == [r.loss for r in b]  # same scale, same bits
