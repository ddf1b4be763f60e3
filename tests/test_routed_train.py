"""``kinac train``'s summary and ``--save`` (routed from the new-user round): ``--save`` is
decided before training as ``kinac run --save`` does (a directory refused, ``.npz`` added
and the file written named), "1 step" is singular, and no steady-state tokens/s is claimed
from a single step (it includes compiling the gradient). Unit-level: nothing is trained."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from kinac.cli import main
from kinac.train.cli import _save, _summary, _summary_line
from kinac.train.trainer import StepResult


def test_save_to_a_directory_is_refused_before_training(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ws = Path(__file__).resolve().parents[1] / "workspaces" / "decoder"
    code = main(["train", str(ws), "decoder_1m", "--steps", "1", "--save", str(tmp_path)])
    err = capsys.readouterr().err
    assert code == 2 and "is a directory" in err and "Traceback" not in err, err
    assert not Path(f"{tmp_path}.npz").exists()


def test_save_names_the_file_it_writes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    trainer = SimpleNamespace(weights={"w": np.arange(3.0)})
    _save(trainer, str(tmp_path / "out.txt"))
    written = tmp_path / "out.txt.npz"
    assert f"saved 1 weight array to {written}" in capsys.readouterr().out
    np.testing.assert_array_equal(np.load(written)["w"], np.arange(3.0))


def _line(n: int) -> str:
    results = [StepResult(i + 1, 4.0 - i, 256, 0.5 if i else 3.0) for i in range(n)]
    trainer = SimpleNamespace(allocations_per_step=[0] * n, n_weights=800_000)
    done = _summary(trainer, results, 4.0)
    return _summary_line("dec", trainer, done, "")


def test_one_step_is_singular_and_claims_no_rate() -> None:
    one = _line(1)
    assert "for 1 step:" in one and "tokens/s" not in one, one
    three = _line(3)
    assert "for 3 steps:" in three and "512 tokens/s after the first step" in three, three
