"""Bad training options are usage errors, from Python as from ``kinac train`` (bug round
2026-12-02e). Before: ``Trainer(ws, e, lr="1")`` / ``weight_decay="x"`` raised a bare
``TypeError`` from a comparison, ``seed=-1`` / ``seed=1.5`` numpy's ``ValueError`` /
``TypeError`` from seeding, ``growth_interval=0`` trained with a loss scale doubled every
step, ``simulate=0`` said "must split evenly over 0 devices" and ``simulate=True`` ran on one;
a fixed loss scale outside f32's range (``1e39`` is inf as the f32 ``scale`` argument,
``1e-45`` has no finite f32 reciprocal) printed a numpy ``RuntimeWarning`` and skipped every
step (the run reported success with weights never updated). ``bucket_mb`` NaN or inf was a
``ValueError``/``OverflowError`` from ``int()``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from train_support import CACHE, DECODER

import kinac
from kinac.cli import main
from kinac.errors import KinaUsageError
from kinac.train import Trainer

TOML = """[workspace]
name = "tinyamp"
sources = ["*.kina"]

[[entry]]
name = "amp"
defn = "amp-loss"
dims = { B = 2, S = 3, D = 4, V = 5 }
"""
SRC = """(import "std/loss.kina")
(defn amp-loss [(tokens : (tensor i32 [B S])) (targets : (tensor i32 [B S]))
                (table : (tensor f32 [V D])) (head : (tensor f32 [D V])) (scale : f32)] -> f32
  (where (<= (* B S V) 2147483647))
  (let [(h (gather (cast table :to f16) (reshape tokens [(* B S)])))
        (logits (matmul h (cast head :to f16)))]
    (mul (cross-entropy logits (reshape targets [(* B S)])) scale)))
"""


@pytest.fixture(scope="module")
def ws(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("tinyamp")
    (d / "kina.toml").write_text(TOML)
    (d / "amp.kina").write_text(SRC)
    return d


BAD_OPTIONS = [
    ({"lr": "1"}, "learning rate"),
    ({"lr": float("nan")}, "learning rate"),
    ({"weight_decay": "x"}, "weight decay"),
    ({"seed": -1}, "seed"),
    ({"seed": 1.5}, "seed"),
    ({"seed": True}, "seed"),
    ({"growth_interval": 0}, "growth_interval"),
    ({"growth_interval": -3}, "growth_interval"),
    ({"simulate": 0}, "--simulate"),
    ({"simulate": -2}, "--simulate"),
    ({"simulate": True}, "--simulate"),
    ({"simulate": 2.5}, "--simulate"),
]


@pytest.mark.parametrize(("options", "named"), BAD_OPTIONS, ids=[repr(o) for o, _ in BAD_OPTIONS])
def test_bad_trainer_options_are_usage_errors(options: dict[str, Any], named: str) -> None:
    with pytest.raises(KinaUsageError, match=named) as e:
        Trainer(DECODER, "decoder_1m", cache_dir=CACHE, **options)
    assert repr(next(iter(options.values()))) in str(e.value)


@pytest.mark.parametrize("scale", [1e39, 1e-45, 1e-39, True])
def test_a_fixed_loss_scale_outside_f32_is_refused(ws: Path, scale: float) -> None:
    with pytest.raises(KinaUsageError, match="loss scale"):
        Trainer(ws, "amp", loss_scale=scale, cache_dir=CACHE)


def test_a_fixed_loss_scale_inside_f32_trains(ws: Path) -> None:
    tr = Trainer(ws, "amp", loss_scale=2.0**-10, cache_dir=CACHE, lr=1e-1)
    before = {k: np.array(v, copy=True) for k, v in tr.weights.items()}
    r = tr.run(2)
    assert not any(s.skipped for s in r) and all(np.isfinite(s.loss) for s in r)
    assert any(not np.array_equal(before[k], tr.weights[k]) for k in before)


@pytest.mark.parametrize("scale", ["1e39", "1e-45"])
def test_cli_fixed_loss_scale_outside_f32(
    ws: Path, scale: str, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["train", str(ws), "amp", "--steps", "1", "--loss-scale", scale, "--cache-dir", CACHE]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("kinac: error: loss scale") and "Traceback" not in err
    assert "RuntimeWarning" not in err


@pytest.mark.parametrize("bucket_mb", [float("nan"), float("inf"), -1.0])
def test_bucket_mb_nan_or_inf_is_a_usage_error(tmp_path: Path, bucket_mb: float) -> None:
    (tmp_path / "g.kina").write_text(
        "(mesh m [2])\n"
        "(defn f [(x : (tensor f32 [4 3] @sharded(axis=0, mesh=m)))] -> f32\n"
        "  (sum (sum (mul x x) :axis 1) :axis 0))\n"
    )
    with pytest.raises(KinaUsageError, match="bucket_mb"):
        kinac.value_and_grad(tmp_path / "g.kina", "f", wrt=["x"], mesh="", bucket_mb=bucket_mb)
