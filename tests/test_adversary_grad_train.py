"""The trainer against ``torch.optim``, step by step, on one small model written twice (Kina
and torch): the same first weights (``Trainer.weights``), the same batches
(``kinac.train.data.batch``), then after each step the loss kinac reports and every weight.

The model is built to hit what a training step can get wrong: a tied embedding (``table`` is
read by the gather and again, transposed, as the LM head: its gradient is a scatter-add plus
a matmul's), an RMSNorm gain, an ``f32`` bias beside ``f64`` weights (``tiny64``: two
dtypes, so two flat optimizer units), and a weight the loss never reads (its gradient is
zeros, so weight decay still shrinks it, as optax does; torch skips a parameter whose
``grad`` is None, so the reference gives it zeros). AdamW (bias correction, decoupled weight decay) and SGD
(momentum, weight decay), each optimizer mode (ping-pong, one call per tensor, in place).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from kinac.train import Trainer
from kinac.train.data import batch

TOML = """[workspace]
name = "tiny"
sources = ["*.kina"]

[[entry]]
name = "tiny32"
defn = "tiny-loss"
dims = { B = 2, S = 3, D = 8, V = 11 }
dtypes = { T = "f32" }

[[entry]]
name = "tiny64"
defn = "tiny-loss"
dims = { B = 2, S = 3, D = 8, V = 11 }
dtypes = { T = "f64" }
"""

SRC = """(import "std/nn.kina")
(import "std/loss.kina")
(defn tiny-loss [(tokens : (tensor i32 [B S])) (targets : (tensor i32 [B S]))
                 (table : (tensor T [V D])) (w1 : (tensor T [D D])) (g : (tensor T [D]))
                 (bias : (tensor f32 [V])) (unused : (tensor T [3 2]))] -> f32
  (where (<= (* B S V) 2147483647))
  (let [(h (embedding table tokens))
        (a (rms-norm (tanh (matmul h w1)) g))
        (logits (matmul a (transpose table :perm [1 0])))
        (flat (reshape logits [(* B S) V]))]
    (cross-entropy (add flat (cast bias :to T)) (reshape targets [(* B S)]))))
"""


@pytest.fixture(scope="module")
def ws(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("tiny")
    (d / "kina.toml").write_text(TOML)
    (d / "tiny.kina").write_text(SRC)
    return d


def torch_loss(tokens: Any, targets: Any, w: dict[str, torch.Tensor]) -> torch.Tensor:
    """``tiny-loss`` in torch, in float64 (the weights are promoted)."""
    d = {k: v.to(torch.float64) for k, v in w.items()}
    a = torch.tanh(F.embedding(torch.from_numpy(tokens).long(), d["table"]) @ d["w1"])
    a = a / torch.sqrt(torch.mean(a * a, dim=-1, keepdim=True) + 1e-6) * d["g"]
    logits = (a @ d["table"].T).reshape(-1, d["table"].shape[0]) + d["bias"]
    return F.cross_entropy(logits, torch.from_numpy(targets).reshape(-1).long())


CASES = [
    ("tiny64", "adamw", None, 0.1, 3e-2, None),
    ("tiny32", "adamw", "inplace", 0.0, 1e-2, None),
    ("tiny32", "sgd", False, 0.05, 0.2, None),
    ("tiny64", "adamw", None, 0.01, 1e-2, "dp"),
    ("tiny64", "sgd", None, 0.01, 0.1, "tp"),
    ("tiny32", "adamw", None, 0.01, 1e-2, "2d"),
]


@pytest.mark.parametrize(("entry", "optimizer", "donate", "wd", "lr", "layout"), CASES)
def test_trainer_steps_equal_torch_optim(
    ws: Path, tmp_path_factory: pytest.TempPathFactory, entry: str, optimizer: str,
    donate: Any, wd: float, lr: float, layout: str | None,
) -> None:  # fmt: skip
    cache = str(tmp_path_factory.getbasetemp() / "cache")
    tr = Trainer(
        str(ws), entry, lr=lr, optimizer=optimizer, weight_decay=wd, donate=donate,
        seed=3, cache_dir=cache, **({} if layout is None else {"simulate": 4 if layout == "2d" else 2, "layout": layout}),
    )  # fmt: skip
    params = {k: torch.tensor(np.array(v), requires_grad=True) for k, v in tr.weights.items()}
    if optimizer == "adamw":
        opt: torch.optim.Optimizer = torch.optim.AdamW(
            list(params.values()), lr=lr, betas=(0.9, 0.999), eps=1e-8, weight_decay=wd
        )
    else:
        opt = torch.optim.SGD(list(params.values()), lr=lr, momentum=0.9, weight_decay=wd)
    b, s = tr.info.batch_shape
    tol = 1e-5 if entry == "tiny64" else 1e-4
    for step in range(4):
        r = tr.step()
        tokens, targets = batch(3, step, b, s, tr.info.vocab)
        opt.zero_grad()
        loss = torch_loss(tokens, targets, params)
        loss.backward()
        for p in params.values():  # kinac's gradient of an unread weight is zeros: decayed
            if p.grad is None:
                p.grad = torch.zeros_like(p)
        opt.step()
        assert r.loss == pytest.approx(loss.item(), rel=tol), (step, r.loss, loss.item())
        for k, p in params.items():
            got = np.asarray(tr.weights[k])
            assert got.dtype == p.detach().numpy().dtype, k
            np.testing.assert_allclose(
                got, p.detach().numpy(), rtol=tol, atol=tol * lr, err_msg=f"{k} step {step}"
            )
