"""Bad optimizer requests, found by the adversary round (2026-12-02d): each is a
``KinaUsageError`` naming what is wrong, as ``torch.optim`` refuses them with a ValueError.

Before: ``AdamW(betas=(1.0, 0.999))`` divided by ``1 - b1^t = 0`` and every weight became
NaN after the first step, ``eps=-1`` gave -inf, a negative or NaN learning rate, momentum or
weight decay ran silently, Nesterov without momentum ran as plain SGD; a gradient of the wrong
shape was a bare numpy ``ValueError`` (could not broadcast) on the flat buffers, a K0801 about
``adamw-m``'s group ``..s`` without them, and one of another dtype was cast silently on the
flat buffers only."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

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
