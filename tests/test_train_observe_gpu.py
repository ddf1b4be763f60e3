"""``kinac train --target cuda --deterministic`` (``gpu``): the first step's kernels recorded
by ``record_gpu`` (eagerly, step by step, each output copied back), every loss and the final
weights; two runs agree bit for bit, a planted seed-ordered product in the first step is
named, and the CLI records then compares a manifest. Skips without a GPU."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from test_determinism_planted import seeded_matmul
from train_observe_support import tiny_workspace

STEPS = 3


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    from kinac.rt import cuda

    if not cuda.available():
        pytest.skip(f"no CUDA GPU ({cuda.unavailable_reason()})")
    return tiny_workspace(tmp_path)


def _record(ws: Path, plant_seed: int | None = None, at: int = -1) -> dict[str, Any]:
    """One training run on the GPU; ``plant_seed``: step ``at``'s output (the forward product
    ``h @ head``, ``h`` the first batch's rows of the table) summed in a seeded order."""
    from kinac.train import Trainer
    from kinac.train.data import batch
    from kinac.train.observe import Recorder
    from kinac.train.optim import to_numpy

    tr = Trainer(str(ws), "tiny", target="cuda", cache_dir=str(ws / ".c"))
    table, head = (np.array(to_numpy(tr.weights[k])) for k in ("table", "head"))
    tokens, _ = batch(0, 0, 4, 8, 32)
    h = table[tokens.reshape(-1)]

    def plant(i: int, out: np.ndarray) -> bool:
        if i != at or plant_seed is None:
            return False
        out[...] = seeded_matmul(h, head, plant_seed).reshape(out.shape)
        return True

    rec = Recorder({"seed": 0}, plant)
    rec.install(tr)
    list(tr.steps(STEPS))
    return rec.manifest(tr)


@pytest.mark.gpu
def test_gpu_training_gate(ws: Path) -> None:
    from kinac.train.observe import train_difference

    base = _record(ws)
    assert train_difference(base, _record(ws)) is None  # the default GPU path: bit-stable
    assert all(k["cache_key"]["arch"].startswith("sm_") for k in base["kernels"])
    at = next(
        i for i, k in enumerate(base["kernels"]) if k["kind"] == "matmul" and k["shape"] == [32, 32]
    )
    one, two = _record(ws, 1, at), _record(ws, 2, at)
    assert train_difference(one, _record(ws, 1, at)) is None
    why = train_difference(one, two) or ""
    assert why.startswith(f"step 1: kernel {at} ({one['kernels'][at]['sym']}, matmul"), why


@pytest.mark.gpu
def test_kinac_train_deterministic_on_cuda(ws: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from kinac.cli import main

    cmd = ["train", str(ws), "tiny", "--steps", str(STEPS), "--target", "cuda",
           "--cache-dir", str(ws / ".c")]  # fmt: skip
    assert main([*cmd, "--deterministic"]) == 0
    assert "bit-identical to a second run" in capsys.readouterr().out
    man = ws / "m.json"
    assert main([*cmd, "--manifest", str(man)]) == 0
    assert f"recorded {STEPS} steps" in capsys.readouterr().out
    assert json.loads(man.read_text())["target"].startswith("cuda:")
    assert main([*cmd, "--manifest", str(man)]) == 0
    assert f"bit-identical to {man}" in capsys.readouterr().out
    assert main([*cmd, "--manifest", str(man), "--seed", "1"]) == 1
    assert "it was recorded with --seed 0, this run has --seed 1" in capsys.readouterr().err
