"""Bad optimizer requests, found by the adversary round (2026-12-02d): each is a
``KinaUsageError`` naming what is wrong, as ``torch.optim`` refuses them with a ValueError.

Before: ``AdamW(betas=(1.0, 0.999))`` divided by ``1 - b1^t = 0`` and every weight became
NaN after the first step, ``eps=-1`` gave -inf, a negative or NaN learning rate, momentum or
weight decay ran silently, Nesterov without momentum ran as plain SGD; a gradient of the wrong
shape was a bare numpy ``ValueError`` (could not broadcast) on the flat buffers, a K0801 about
``adamw-m``'s group ``..s`` without them, and one of another dtype was cast silently on the
flat buffers only."""

from __future__ import annotations

import os
from typing import Any

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kinac.errors import KinaUsageError
from kinac.train.optim import SGD, AdamW

P = {"w": np.ones((2, 3), np.float32), "b": np.zeros(3, np.float32)}


@pytest.mark.parametrize(
    ("cls", "kw", "what"),
    [
        (AdamW, {"betas": (1.0, 0.999)}, "betas"),
        (AdamW, {"betas": (0.9, 1.5)}, "betas"),
        (AdamW, {"betas": (-0.1, 0.9)}, "betas"),
        (AdamW, {"eps": -1.0}, "eps"),
        (AdamW, {"lr": -1e-3}, "learning rate"),
        (AdamW, {"lr": float("nan")}, "learning rate"),
        (AdamW, {"weight_decay": -0.1}, "weight decay"),
        (SGD, {"momentum": -0.5}, "momentum"),
        (SGD, {"nesterov": True, "momentum": 0.0}, "Nesterov"),
        (SGD, {"lr": float("inf")}, "learning rate"),
    ],
)
def test_bad_hyperparameters_are_usage_errors(cls: Any, kw: dict[str, Any], what: str) -> None:
    with pytest.raises(KinaUsageError, match=what):
        cls(dict(P), **kw)


@pytest.mark.parametrize("donate", [None, False, "inplace"])
def test_a_gradient_of_another_shape_or_dtype_is_a_usage_error(donate: Any) -> None:
    opt = AdamW(dict(P), donate=donate)
    with pytest.raises(
        KinaUsageError, match=r"gradient of `w` is f32\[3 2\].*parameter is f32\[2 3\]"
    ):
        opt.step({"w": np.ones((3, 2), np.float32), "b": np.ones(3, np.float32)})
    with pytest.raises(KinaUsageError, match=r"gradient of `b` is f64\[3\].*parameter is f32\[3\]"):
        opt.step({"w": np.ones((2, 3), np.float32), "b": np.ones(3, np.float64)})
    assert opt.t == 0, "a refused step counts no step"
    opt.step({"w": np.ones((2, 3), np.float32), "b": np.ones(3, np.float32)})
    assert opt.t == 1
    np.testing.assert_allclose(opt.params["w"], 1 - 1e-3 * (1 + 1e-2), rtol=1e-5)


def _settings(n: int) -> Any:
    return settings(
        max_examples=int(os.environ.get("ADV_EXAMPLES", n)),
        deadline=None,
        suppress_health_check=list(HealthCheck),
    )


SHAPE = st.lists(st.sampled_from([1, 2, 3, 17, 65]), min_size=0, max_size=3).map(tuple)


@_settings(2)
@given(
    st.dictionaries(st.sampled_from("abcde"), st.tuples(SHAPE, st.sampled_from(["f32", "f64"])),
                    min_size=1, max_size=4),
    st.sampled_from(["adamw", "sgd"]),
    st.sampled_from([None, False, "inplace"]),
    st.data(),
)  # fmt: skip
def test_random_optimizer_steps_equal_torch_optim(
    params: dict[str, tuple[tuple[int, ...], str]], kind: str, donate: Any, data: st.DataObject
) -> None:
    """Random parameter sets (rank 0 to 3, sizes across the flat layout's 64-element
    alignment, f32 beside f64), hyperparameters and optimizer modes, a learning rate changed
    between steps (a schedule): every parameter after every step against ``torch.optim``."""
    rng = np.random.default_rng(data.draw(st.integers(0, 2**31)))
    np_dt = {"f32": np.float32, "f64": np.float64}
    init = {k: rng.standard_normal(s).astype(np_dt[d]) for k, (s, d) in params.items()}
    lr = data.draw(st.sampled_from([1e-3, 0.05, 0.3]))
    wd = data.draw(st.sampled_from([0.0, 0.01, 0.2]))
    tp = {k: torch.tensor(v.copy(), requires_grad=True) for k, v in init.items()}
    if kind == "adamw":
        betas = data.draw(st.sampled_from([(0.9, 0.999), (0.0, 0.5), (0.5, 0.0), (0.99, 0.9999)]))
        eps = data.draw(st.sampled_from([1e-8, 1e-3, 0.0]))
        kw: dict[str, Any] = {"lr": lr, "betas": betas, "eps": eps, "weight_decay": wd}
        opt: Any = AdamW(dict(init), donate=donate, **kw)
        topt: torch.optim.Optimizer = torch.optim.AdamW(list(tp.values()), **kw)
    else:
        mom = data.draw(st.sampled_from([0.0, 0.5, 0.9]))
        nest = mom > 0 and data.draw(st.booleans())
        kw = {"lr": lr, "momentum": mom, "weight_decay": wd, "nesterov": nest}
        opt = SGD(dict(init), donate=donate, **kw)
        topt = torch.optim.SGD(list(tp.values()), **kw)
    for step in range(3):
        if step == 2:  # a schedule: the next step's learning rate
            opt.lr = lr / 2
            for g in topt.param_groups:
                g["lr"] = lr / 2
        grads = {k: rng.standard_normal(v.shape).astype(v.dtype) for k, v in init.items()}
        opt.step(grads)
        for k, p in tp.items():
            p.grad = torch.tensor(grads[k])
        topt.step()
        for k, p in tp.items():
            tol = 2e-5 if params[k][1] == "f32" else 1e-12
            got, want = np.asarray(opt.params[k]), p.detach().numpy()
            assert got.dtype == want.dtype and got.shape == want.shape, k
            np.testing.assert_allclose(
                got, want, rtol=tol, atol=tol, err_msg=f"{k} step {step} {kind} {kw} {donate}"
            )
