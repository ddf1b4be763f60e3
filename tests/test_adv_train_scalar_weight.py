"""A rank-0 weight (a learned temperature) trains (bug round 2026-12-02e). ``init_weights``
made its first value with ``np.ascontiguousarray``, which turns a 0-d array into ``[1]``, so the
first step's call refused it ("argument `temp` has shape [1], but entry `temp` expects []") on
every path: one device in each optimizer mode, ``--simulate`` data parallel, and the gradient
graph's program. Now each path trains it, equal to ``torch.optim.AdamW`` on the same model."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from train_support import CACHE

from kinac.api_grad_sharded import sharded_trainer
from kinac.train import Trainer
from kinac.train.data import batch

TOML = """[workspace]
name = "t"
sources = ["*.kina"]

[[entry]]
name = "temp"
defn = "loss"
dims = { B = 4, S = 3, D = 4, V = 5 }
"""
SRC = """(import "std/loss.kina")
(defn loss [(tokens : (tensor i32 [B S])) (targets : (tensor i32 [B S]))
            (table : (tensor f32 [V D])) (head : (tensor f32 [D V])) (temp : f32)] -> f32
  (where (<= (* B S V) 2147483647))
  (let [(h (gather table (reshape tokens [(* B S)])))]
    (cross-entropy (mul (matmul h head) temp) (reshape targets [(* B S)]))))
"""
STEPS, LR = 3, 0.05


@pytest.fixture(scope="module")
def ws(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("scalarw")
    (d / "kina.toml").write_text(TOML)
    (d / "t.kina").write_text(SRC)
    return d


def _torch(first: dict[str, np.ndarray]) -> tuple[list[float], dict[str, np.ndarray]]:
    w = {k: torch.tensor(v, dtype=torch.float64, requires_grad=True) for k, v in first.items()}
    opt = torch.optim.AdamW(list(w.values()), lr=LR, weight_decay=0.0)
    losses = []
    for step in range(STEPS):
        tokens, targets = batch(0, step, 4, 3, 5)
        h = F.embedding(torch.from_numpy(tokens).long().reshape(-1), w["table"])
        loss = F.cross_entropy(
            h @ w["head"] * w["temp"], torch.from_numpy(targets).long().reshape(-1)
        )
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(float(loss.detach()))
    return losses, {k: v.detach().numpy() for k, v in w.items()}


@pytest.mark.parametrize("mode", ["pingpong", "calls", "inplace", "dp2", "graph-dp2"])
def test_a_rank_0_weight_trains_as_torch(ws: Path, mode: str) -> None:
    kw = {"seed": 0, "lr": LR, "weight_decay": 0.0, "cache_dir": CACHE}
    if mode == "graph-dp2":
        tr = sharded_trainer(str(ws), "temp", 2, "dp", **kw)  # type: ignore[arg-type]
    elif mode == "dp2":
        tr = Trainer(ws, "temp", simulate=2, **kw)  # type: ignore[arg-type]
    else:
        donate = {"pingpong": None, "calls": False, "inplace": "inplace"}[mode]
        tr = Trainer(ws, "temp", donate=donate, **kw)  # type: ignore[arg-type]
    first = {k: np.array(v, copy=True) for k, v in tr.weights.items()}
    assert first["temp"].shape == () and first["temp"] == 1.0
    losses = [r.loss for r in tr.run(STEPS)]
    want_losses, want = _torch(first)
    np.testing.assert_allclose(losses, want_losses, rtol=2e-5)
    for k, v in tr.weights.items():
        assert np.shape(v) == first[k].shape
        np.testing.assert_allclose(np.asarray(v, np.float64), want[k], rtol=2e-4, atol=2e-5)
