"""Gradients of the MLP and the transformer block workspaces against PyTorch autograd (f32).

The workspaces are the acceptance programs (``workspaces/mlp``, ``workspaces/transformer``),
copied with a loss defn added: ``mean((model(x) - y)^2)`` over every element. Every weight's
gradient must agree with ``torch.autograd`` within 1e-5 relative (max error over max
magnitude), and two runs must give bitwise-identical values and gradients.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import kinac

ROOT = Path(__file__).resolve().parent.parent / "workspaces"
MLP_W = ["w1", "b1", "w2", "b2"]
BLOCK_W = ["wn1", "wq", "wk", "wv", "wo", "wn2", "wg", "wu", "wd"]

MLP_LOSS = """(module mlp_loss)
(import "mlp.kina")
(defn mlp-loss [(x : (tensor f32 [B S D]))
                (w1 : (tensor f32 [D F])) (b1 : (tensor f32 [F]))
                (w2 : (tensor f32 [F D])) (b2 : (tensor f32 [D]))
                (y : (tensor f32 [B S D]))] -> f32
  (mean (reshape (square (sub (mlp x w1 b1 w2 b2) y)) [(* B S D)]) :axis 0))
"""

BLOCK_LOSS = """(module block_loss)
(import "block.kina")
(defn block-loss [(H : dim) (KV : dim) (x : (tensor T [B S D]))
                  (wn1 : (tensor T [D]))
                  (wq : (tensor T [D D])) (wk : (tensor T [D (* KV Dh)]))
                  (wv : (tensor T [D (* KV Dh)])) (wo : (tensor T [D D]))
                  (wn2 : (tensor T [D]))
                  (wg : (tensor T [D F])) (wu : (tensor T [D F])) (wd : (tensor T [F D]))
                  (y : (tensor T [B S D]))] -> T
  (where (= D (* H Dh)) (= H (* KV G)))
  (mean (reshape (square (sub (block H KV x wn1 wq wk wv wo wn2 wg wu wd) y)) [(* B S D)])
        :axis 0))
"""


def workspace(tmp_path: Path, name: str, loss: str) -> Path:
    ws = tmp_path / name
    shutil.copytree(ROOT / name, ws)
    (ws / "loss.kina").write_text(loss)
    return ws


def rel_err(got: np.ndarray, want: np.ndarray) -> float:
    return float(np.max(np.abs(np.asarray(got, np.float64) - want)) / np.max(np.abs(want)))


def torch_mlp(t: dict[str, Any]) -> Any:
    import torch

    h = torch.nn.functional.gelu(t["x"] @ t["w1"] + t["b1"])
    return ((h @ t["w2"] + t["b2"] - t["y"]) ** 2).mean()


def torch_block(t: dict[str, Any], H: int, KV: int) -> Any:
    import torch

    F = torch.nn.functional
    x = t["x"]
    B, S, D = x.shape
    Dh = D // H

    def rms(v, w):
        return v / torch.sqrt((v * v).mean(-1, keepdim=True) + 1e-6) * w

    def heads(v, n):
        return v.reshape(B, S, n, Dh).transpose(1, 2)

    a = rms(x, t["wn1"])
    q = heads(a @ t["wq"], H)
    k = heads(a @ t["wk"], KV).repeat_interleave(H // KV, dim=1)
    v = heads(a @ t["wv"], KV).repeat_interleave(H // KV, dim=1)
    mask = torch.triu(torch.full((S, S), float("-inf"), dtype=x.dtype, device=x.device), diagonal=1)
    s = q @ k.transpose(-1, -2) * Dh**-0.5 + mask
    o = (torch.softmax(s, -1) @ v).transpose(1, 2).reshape(B, S, D)
    h = x + o @ t["wo"]
    f = rms(h, t["wn2"])
    out = h + (F.silu(f @ t["wg"]) * (f @ t["wu"])) @ t["wd"]
    return ((out - t["y"]) ** 2).mean()


def check_against_torch(
    fn: Any, names: list[str], arrays: dict[str, np.ndarray], wrt: list[str], loss: Any
) -> None:
    import torch

    value, grads = fn(*[arrays[n] for n in names])  # type: ignore[operator]
    t = {n: torch.tensor(a, requires_grad=n in wrt) for n, a in arrays.items()}
    ref = loss(t)  # type: ignore[operator]
    ref.backward()
    assert abs(float(np.asarray(value)) - ref.item()) <= 1e-5 * abs(ref.item())
    assert list(grads) == wrt
    for n in wrt:
        g = np.asarray(grads[n])
        assert g.shape == arrays[n].shape and g.dtype == np.float32, n
        err = rel_err(g, t[n].grad.numpy())  # type: ignore[union-attr]
        assert err <= 1e-5, (n, err)
    again_value, again = fn(*[arrays[n] for n in names])  # type: ignore[operator]
    assert np.asarray(again_value).tobytes() == np.asarray(value).tobytes()
    for n in wrt:  # deterministic: bitwise identical
        assert np.asarray(again[n]).tobytes() == np.asarray(grads[n]).tobytes(), n


def test_mlp_gradients_match_torch_and_repeat_bitwise(tmp_path: Path) -> None:
    ws = workspace(tmp_path, "mlp", MLP_LOSS)
    fn = kinac.value_and_grad(ws, "mlp-loss", wrt=MLP_W, cache_dir=str(tmp_path / "cache"))
    rng = np.random.default_rng(0)
    B, S, D, F = 2, 16, 32, 64
    shapes = {"x": (B, S, D), "w1": (D, F), "b1": (F,), "w2": (F, D), "b2": (D,), "y": (B, S, D)}
    arrays = {n: (rng.standard_normal(s) * 0.5).astype(np.float32) for n, s in shapes.items()}
    check_against_torch(fn, list(shapes), arrays, MLP_W, torch_mlp)


def block_arrays(B: int, S: int, D: int, F: int, H: int, KV: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(1)
    Dh = D // H
    shapes = {
        "x": (B, S, D),
        "wn1": (D,),
        "wq": (D, D),
        "wk": (D, KV * Dh),
        "wv": (D, KV * Dh),
        "wo": (D, D),
        "wn2": (D,),
        "wg": (D, F),
        "wu": (D, F),
        "wd": (F, D),
        "y": (B, S, D),
    }
    out = {}
    for n, s in shapes.items():
        scale = 1.0 if n in ("x", "y", "wn1", "wn2") else 1.0 / np.sqrt(s[0])
        out[n] = (rng.standard_normal(s) * scale).astype(np.float32)
    return out


def block_names() -> list[str]:
    return ["x", *BLOCK_W, "y"]


def test_block_gradients_match_torch_and_repeat_bitwise(tmp_path: Path) -> None:
    ws = workspace(tmp_path, "transformer", BLOCK_LOSS)
    fn = kinac.value_and_grad(ws, "block-loss", wrt=BLOCK_W, cache_dir=str(tmp_path / "cache"))
    H, KV = 4, 2
    arrays = block_arrays(2, 16, 32, 48, H, KV)
    names = block_names()

    def call(*xs: np.ndarray) -> Any:
        return fn(H, KV, *xs)

    check_against_torch(call, names, arrays, BLOCK_W, lambda t: torch_block(t, H, KV))


def test_block_gradients_in_bf16_keep_the_dtype(tmp_path: Path) -> None:
    """bf16 weights get bf16 gradients, within bf16's precision of torch's bf16 autograd."""
    import torch

    ws = workspace(tmp_path, "transformer", BLOCK_LOSS)
    fn = kinac.value_and_grad(ws, "block-loss", wrt=BLOCK_W, cache_dir=str(tmp_path / "cache"))
    H, KV = 4, 2
    t = {
        k: torch.tensor(a).to(torch.bfloat16) for k, a in block_arrays(2, 16, 32, 48, H, KV).items()
    }
    value, grads = fn(H, KV, *[t[n] for n in block_names()])
    ref = {k: x.clone().requires_grad_(k in BLOCK_W) for k, x in t.items()}
    torch_block(ref, H, KV).backward()  # type: ignore[attr-defined]
    for n in BLOCK_W:
        bits = np.asarray(grads[n])
        assert bits.dtype == np.uint16 and bits.shape == tuple(t[n].shape)  # bf16 bit patterns
        got = torch.from_numpy(bits.view(np.int16)).view(torch.bfloat16).float().numpy()
        assert rel_err(got, ref[n].grad.float().numpy()) <= 2e-2, n  # type: ignore[union-attr]


def _no_cuda() -> bool:
    import torch

    return not torch.cuda.is_available()


@pytest.mark.gpu
@pytest.mark.skipif(_no_cuda(), reason="no CUDA GPU with PyTorch")
def test_block_gradients_on_the_gpu(tmp_path: Path) -> None:
    """The block's gradients on the GPU (target cuda) against torch on the host, f32."""
    import torch

    ws = workspace(tmp_path, "transformer", BLOCK_LOSS)
    fn = kinac.value_and_grad(
        ws, "block-loss", wrt=BLOCK_W, target="cuda", cache_dir=str(tmp_path / "cache")
    )
    H, KV = 4, 2
    arrays = block_arrays(2, 64, 128, 352, H, KV)
    names = block_names()

    def call(*xs: np.ndarray) -> Any:
        value, grads = fn(H, KV, *[torch.tensor(x, device="cuda") for x in xs])
        return torch.from_dlpack(value).cpu().numpy(), {
            k: torch.from_dlpack(g).cpu().numpy() for k, g in grads.items()
        }

    check_against_torch(call, names, arrays, BLOCK_W, lambda t: torch_block(t, H, KV))


def test_block_gradient_gpu_lowering_emulated(tmp_path: Path) -> None:
    """The block's gradient graph through the GPU back end (kernels run on the CPU by the
    emulator, cuBLAS calls by numpy) equals torch autograd: what the H200 run measures."""
    import torch
    from gpu_support import run_emulated

    from kinac import pipeline_grad
    from kinac.pipeline_support import EntryKey
    from kinac.session import Session

    ws = workspace(tmp_path, "transformer", BLOCK_LOSS)
    H, KV, B, S, D, F = 4, 2, 1, 8, 32, 48
    dims = tuple(sorted(dict(H=H, KV=KV, B=B, S=S, D=D, F=F).items()))
    key = EntryKey("loss.kina", "block-loss", dims, (("T", "f32"),), "cuda")
    spec = pipeline_grad.grad_graph(Session(ws, no_cache=True).db, (key, tuple(BLOCK_W)))
    assert spec.graph is not None and {t.device for _, t in spec.graph.params} == {"cuda:0"}
    arrays = block_arrays(B, S, D, F, H, KV)
    value, *grads = run_emulated(spec.graph, *[arrays[n] for n in block_names()])
    t = {n: torch.tensor(a, requires_grad=n in BLOCK_W) for n, a in arrays.items()}
    ref = torch_block(t, H, KV)
    ref.backward()
    assert abs(float(value) - ref.item()) <= 1e-5 * abs(ref.item())
    for n, g in zip(BLOCK_W, grads, strict=True):
        assert rel_err(g, t[n].grad.numpy()) <= 1e-5, n  # type: ignore[union-attr]
