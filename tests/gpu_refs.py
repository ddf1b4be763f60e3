"""PyTorch references for the GPU acceptance workloads (shared by the GPU tests and
``benches/gpu.py``): the MLP, and the transformer block written the eager way (explicit
matmuls, ``repeat_interleave`` of K/V, a causal mask added before the softmax), plus inputs.

The references are written independently of kinac's Graphs (plain ``torch`` ops), so a
kinac result that matches them matches what the spec says the programs mean.
"""

from __future__ import annotations

import math
from typing import Any

SMALL = {"b": 4, "s": 128, "d": 256, "h": 4, "kv": 2, "f": 704}
BIG = {"b": 4, "s": 1024, "d": 2048, "h": 16, "kv": 4, "f": 5632}
BLOCK_PARAMS = ("x", "wn1", "wq", "wk", "wv", "wo", "wn2", "wg", "wu", "wd")


def mlp_torch(x: Any, w1: Any, b1: Any, w2: Any, b2: Any) -> Any:
    import torch.nn.functional as F

    return F.gelu(x @ w1 + b1) @ w2 + b2


def mlp_inputs(dtype: Any, device: str = "cuda", seed: int = 0, b: int = 4, s: int = 128, d: int = 256, f: int = 1024) -> list[Any]:  # fmt: skip
    import torch

    g = torch.Generator(device="cpu").manual_seed(seed)

    def r(*shape: int, scale: float = 1.0) -> Any:
        return (torch.randn(*shape, generator=g) * scale).to(device=device, dtype=dtype)

    return [
        r(b, s, d),
        r(d, f, scale=d**-0.5),
        r(f, scale=0.1),
        r(f, d, scale=f**-0.5),
        r(d, scale=0.1),
    ]


def causal_mask(s: int, dtype: Any, device: str) -> Any:
    import torch

    m = torch.full((s, s), float("-inf"), device=device)
    return torch.triu(m, diagonal=1).to(dtype)


def block_torch(x: Any, wn1: Any, wq: Any, wk: Any, wv: Any, wo: Any, wn2: Any, wg: Any, wu: Any, wd: Any, h: int, kv: int, mask: Any) -> Any:  # fmt: skip
    import torch
    import torch.nn.functional as F

    b, s, d = x.shape
    dh = d // h

    def rms(t: Any, w: Any) -> Any:
        return t / torch.sqrt(torch.mean(t * t, dim=-1, keepdim=True) + 1e-6) * w

    n = rms(x, wn1)
    q = (n @ wq).reshape(b, s, h, dh).transpose(1, 2)
    k = (n @ wk).reshape(b, s, kv, dh).transpose(1, 2).repeat_interleave(h // kv, dim=1)
    v = (n @ wv).reshape(b, s, kv, dh).transpose(1, 2).repeat_interleave(h // kv, dim=1)
    sc = (q @ k.transpose(-1, -2)) * (1.0 / math.sqrt(dh)) + mask
    o = torch.softmax(sc, dim=-1) @ v
    hid = x + o.transpose(1, 2).reshape(b, s, d) @ wo
    n2 = rms(hid, wn2)
    return hid + (F.silu(n2 @ wg) * (n2 @ wu)) @ wd


def block_inputs(dims: dict[str, int], dtype: Any, device: str = "cuda", seed: int = 0) -> list[Any]:  # fmt: skip
    """x ~ N(0, 1); norm weights ~ 1 + N(0, 0.1); projections ~ N(0, 1 / fan_in)."""
    import torch

    g = torch.Generator(device="cpu").manual_seed(seed)
    b, s, d, h, kv, f = (dims[k] for k in ("b", "s", "d", "h", "kv", "f"))
    kvd = kv * (d // h)
    shapes = [(b, s, d), (d,), (d, d), (d, kvd), (d, kvd), (d, d), (d,), (d, f), (d, f), (f, d)]
    out = []
    for name, shape in zip(BLOCK_PARAMS, shapes, strict=True):
        t = torch.randn(*shape, generator=g)
        if name.startswith("wn"):
            t = 1.0 + 0.1 * t
        elif len(shape) == 2:
            t = t / math.sqrt(shape[0])
        out.append(t.to(device=device, dtype=dtype))
    return out


def rel_l2(got: Any, ref: Any) -> float:
    """``||got - ref|| / ||ref||`` in float64 (NaN if either has a NaN)."""
    g, r = got.double(), ref.double()
    if not (bool(g.isfinite().all()) and bool(r.isfinite().all())):
        return float("nan")
    return float((g - r).norm() / r.norm())


def max_rel(got: Any, ref: Any) -> float:
    """``max |got - ref| / max |ref|``."""
    g, r = got.double(), ref.double()
    return float((g - r).abs().max() / r.abs().max())
