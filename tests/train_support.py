"""Shared by the training tests: the decoder workspace and one compile cache per test process
(the decoder's gradient is compiled once, not once per test module)."""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
DECODER = Path(os.environ.get("KINAC_TEST_DECODER", ROOT / "workspaces" / "decoder"))
CACHE = tempfile.mkdtemp(prefix="kinac-train-cache-")
atexit.register(shutil.rmtree, CACHE, True)


def decoder_loss_torch(
    tokens: Any, targets: Any, weights: dict[str, Any], h: int, kv: int, layers: int = 4
) -> Any:
    """``workspaces/decoder``'s ``decoder-loss`` in plain torch (the independent reference of
    the tests and of ``benches/train.py``): embedding, pre-norm blocks, final RMSNorm, head,
    mean cross-entropy in f32."""
    import torch
    import torch.nn.functional as F
    from gpu_refs import block_torch

    s = tokens.shape[1]
    dt = weights["emb"].dtype
    mask = torch.triu(torch.full((s, s), float("-inf"), device=tokens.device), 1).to(dt)
    x = F.embedding(tokens.long(), weights["emb"])
    for i in range(layers):
        names = ("wn1", "wq", "wk", "wv", "wo", "wn2", "wg", "wu", "wd")
        x = block_torch(x, *(weights[f"{n}{i}"] for n in names), h=h, kv=kv, mask=mask)  # type: ignore[misc]
    n = x / torch.sqrt(torch.mean(x * x, dim=-1, keepdim=True) + 1e-6) * weights["wnf"]
    logits = (n @ weights["head"]).float()
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1).long())
