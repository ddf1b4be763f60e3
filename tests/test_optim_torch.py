"""std/optim.kina and std/loss.kina against PyTorch on random data: several SGD (momentum,
weight decay, Nesterov) and AdamW steps against ``torch.optim`` with the same gradients,
cross-entropy against ``F.cross_entropy`` (f32, bf16, large logits), embedding against
``F.embedding``. The optimizers run through ``kinac.train.optim`` (the trainer's path, with
donated buffers)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

import kinac
from kinac.rt.host import OUTPUT_STATS
from kinac.train.optim import SGD, AdamW

STD = Path(kinac.__file__).parent / "std"
SHAPES = {"w": (7, 5), "b": (5,), "t": (2, 3, 4)}


@pytest.fixture(scope="module")
def cache(tmp_path_factory: pytest.TempPathFactory) -> str:
    return str(tmp_path_factory.mktemp("cache"))


def _run(kopt: Any, topt_cls: Any, topt_kw: dict[str, Any], steps: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    init = {k: rng.standard_normal(s).astype(np.float32) for k, s in SHAPES.items()}
    tparams = {k: torch.tensor(v.copy(), requires_grad=True) for k, v in init.items()}
    opt = kopt(init)
    topt = topt_cls(list(tparams.values()), **topt_kw)
    for step in range(steps):
        grads = {k: rng.standard_normal(s).astype(np.float32) for k, s in SHAPES.items()}
        if step == 1:
            before = OUTPUT_STATS.allocations
        opt.step(grads)
        for k, p in tparams.items():
            p.grad = torch.tensor(grads[k])
        topt.step()
        for k, p in tparams.items():
            np.testing.assert_allclose(
                opt.params[k], p.detach().numpy(), rtol=2e-5, atol=2e-6, err_msg=f"{k} {step}"
            )
    assert OUTPUT_STATS.allocations == before, "steps after the first allocate no output"


@pytest.mark.parametrize("nesterov", [False, True])
def test_sgd_momentum_matches_torch(cache: str, nesterov: bool) -> None:
    kw = {"lr": 0.05, "momentum": 0.9, "weight_decay": 0.01, "nesterov": nesterov}
    _run(lambda p: SGD(p, cache_dir=cache, **kw), torch.optim.SGD, kw, steps=5, seed=1)  # type: ignore[arg-type]


def test_adamw_matches_torch(cache: str) -> None:
    kw = {"lr": 1e-2, "betas": (0.9, 0.95), "eps": 1e-8, "weight_decay": 0.1}
    _run(lambda p: AdamW(p, cache_dir=cache, **kw), torch.optim.AdamW, kw, steps=6, seed=2)  # type: ignore[arg-type]


@pytest.mark.parametrize("scale", [1.0, 30.0])
@pytest.mark.parametrize("n,v", [(37, 53), (1, 2), (64, 1000)])
def test_cross_entropy_matches_torch(cache: str, n: int, v: int, scale: float) -> None:
    ce = kinac.compile(STD / "loss.kina", "cross-entropy", cache_dir=cache)
    rng = np.random.default_rng(n * v)
    x = (rng.standard_normal((n, v)) * scale).astype(np.float32)
    t = rng.integers(0, v, n).astype(np.int32)
    got = float(ce(x, t))
    want = torch.nn.functional.cross_entropy(
        torch.tensor(x, dtype=torch.float64), torch.tensor(t).long()
    )
    assert np.isfinite(got)
    assert got == pytest.approx(float(want), rel=1e-5, abs=1e-6)


def test_cross_entropy_bf16_logits_computes_in_f32(cache: str) -> None:
    ce = kinac.compile(STD / "loss.kina", "cross-entropy", cache_dir=cache)
    rng = np.random.default_rng(5)
    x = torch.randn(16, 40, generator=torch.Generator().manual_seed(5)).to(torch.bfloat16) * 20
    t = rng.integers(0, 40, 16).astype(np.int32)
    got = float(ce(x, t))
    want = torch.nn.functional.cross_entropy(x.double(), torch.tensor(t).long())
    assert got == pytest.approx(float(want), rel=1e-5)


def test_cross_entropy_target_out_of_range_is_a_runtime_error(cache: str) -> None:
    ce = kinac.compile(STD / "loss.kina", "cross-entropy", cache_dir=cache)
    x = np.zeros((3, 4), np.float32)
    for bad in ([0, 1, 7], [5, 1, 2], [0, -1, 2]):  # 5 at row 0 would read row 1's logit
        with pytest.raises(kinac.KinaRuntimeError, match="gather index -1"):
            ce(x, np.array(bad, np.int32))


def test_embedding_matches_torch(cache: str) -> None:
    emb = kinac.compile(STD / "nn.kina", "embedding", cache_dir=cache)
    rng = np.random.default_rng(3)
    table = rng.standard_normal((11, 6)).astype(np.float32)
    ids = rng.integers(0, 11, (2, 3, 4)).astype(np.int32)
    want = torch.nn.functional.embedding(torch.tensor(ids).long(), torch.tensor(table))
    np.testing.assert_array_equal(emb(table, ids), want.numpy())
