"""The synthetic token task ``kinac train`` learns: arithmetic progressions modulo the vocab.

Each sequence is ``x_i = (a + i k) mod V`` with a random start ``a`` and a random stride ``k``
in ``1..STRIDES``; the model sees ``x_0 .. x_{S-1}`` and predicts ``x_1 .. x_S``. It is
generated in-process (no downloads), deterministic in ``(seed, step)``, and learnable in
stages a loss curve shows: from ``ln V`` (uniform) to about ``ln STRIDES`` (the next token is
one of STRIDES given the current one) within a few steps, then towards 0 once attention
reads the stride off the previous tokens.
"""

from __future__ import annotations

from typing import Any

STRIDES = 3


def batch(seed: int, step: int, b: int, s: int, vocab: int) -> tuple[Any, Any]:
    """Tokens and targets, both ``int32 [b, s]``, of training step ``step``."""
    import numpy as np

    rng = np.random.default_rng([seed, step])
    start = rng.integers(0, vocab, size=(b, 1))
    stride = rng.integers(1, min(STRIDES, vocab - 1) + 1, size=(b, 1))
    seq = (start + stride * np.arange(s + 1)[None, :]) % vocab
    seq = seq.astype(np.int32)
    return np.ascontiguousarray(seq[:, :-1]), np.ascontiguousarray(seq[:, 1:])
