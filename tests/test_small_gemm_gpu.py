"""The generated small tensor-core GEMM on the GPU (skipped without a CUDA device and PyTorch
with CUDA): each fusion alone against float64 on random data, odd shapes (left to cuBLAS,
still correct), and the small bf16 block through ``kinac.compile`` (5 kernels)."""

from __future__ import annotations

import functools
import math
from pathlib import Path
from typing import Any

import pytest
import torch
import torch.nn.functional as F
from gpu_refs import SMALL, block_inputs, block_torch, causal_mask, rel_l2
from small_gemm_cases import norm_product, norm_swiglu, norm_two_multiplied, residual

from kinac.codegen.ptx import compile_ptx
from kinac.ir.gpu.pipeline import lower_graph_gpu
from kinac.rt import cuda
from kinac.rt.cuda.entry import GpuEntry, load_gpu_entry
from kinac.tir.graph import Graph

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(
        not (cuda.available() and torch.cuda.is_available()), reason="no CUDA GPU with PyTorch"
    ),
]

ROOT = Path(__file__).resolve().parent.parent
TDT = {"bf16": torch.bfloat16, "f16": torch.float16}


@functools.cache
def _entry(graph: Graph) -> tuple[GpuEntry, tuple[str, ...]]:
    lw = lower_graph_gpu(graph)
    notes = tuple(f.note for s in lw.steps for f in s.launches) + tuple(
        s.impl for s in lw.steps if s.gemm is not None
    )
    return load_gpu_entry(lw, compile_ptx(lw.llvm_ir)), notes


def _rand(*shape: int, dt: str, scale: float = 1.0) -> Any:
    return (torch.randn(*shape, device="cuda", dtype=torch.float64) * scale).to(TDT[dt])


def _rms(x: Any, w: Any) -> Any:
    return x / torch.sqrt((x * x).mean(-1, keepdim=True) + 1e-6) * w


@pytest.mark.parametrize(("m", "k", "n", "dt", "tc"), [
    (512, 256, 256, "bf16", True), (96, 192, 128, "f16", True), (512, 704, 256, "bf16", True),
    (100, 200, 72, "bf16", False), (96, 256, 96, "bf16", False),
])  # fmt: skip
def test_residual_product_against_float64(m: int, k: int, n: int, dt: str, tc: bool) -> None:
    torch.manual_seed(m + k + n)
    x, w, r = _rand(m, k, dt=dt), _rand(k, n, dt=dt, scale=1 / math.sqrt(k)), _rand(m, n, dt=dt)
    e, notes = _entry(residual(m, k, n, dt))
    assert any(x.startswith("tc ") for x in notes) == tc, notes
    out = torch.from_dlpack(e(x, w, r))
    ref = r.double() + x.double() @ w.double()
    assert rel_l2(out, ref) < 1e-2


@pytest.mark.parametrize(("b", "s", "k", "n", "tc"), [
    (4, 128, 256, 512, True), (2, 48, 128, 64, True), (3, 50, 256, 64, False),
])  # fmt: skip
def test_norm_prologue_against_float64(b: int, s: int, k: int, n: int, tc: bool) -> None:
    torch.manual_seed(b + s + k + n)
    x, wn = _rand(b, s, k, dt="bf16"), (1 + 0.1 * torch.randn(k, device="cuda")).bfloat16()
    w = _rand(k, n, dt="bf16", scale=1 / math.sqrt(k))
    e, notes = _entry(norm_product(b, s, k, n))
    assert any(x.startswith("tc ") and " rms" in x for x in notes) == tc, notes
    out = torch.from_dlpack(e(x, wn, w))
    ref = _rms(x.double(), wn.double()) @ w.double()
    assert rel_l2(out, ref) < 1e-2


@pytest.mark.parametrize(("m", "k", "f"), [(512, 256, 704), (64, 128, 192)])
def test_norm_swiglu_against_float64(m: int, k: int, f: int) -> None:
    torch.manual_seed(m + k + f)
    x, wn = _rand(m, k, dt="bf16"), (1 + 0.1 * torch.randn(k, device="cuda")).bfloat16()
    wg, wu = (_rand(k, f, dt="bf16", scale=1 / math.sqrt(k)) for _ in range(2))
    e, notes = _entry(norm_swiglu(m, k, f))
    assert any("swiglu" in x for x in notes), notes
    out = torch.from_dlpack(e(x, wn, wg, wu))
    n = _rms(x.double(), wn.double())
    ref = F.silu(n @ wg.double()) * (n @ wu.double())
    assert rel_l2(out, ref) < 1e-2


def test_side_by_side_products_read_as_slices_against_float64() -> None:
    torch.manual_seed(3)
    x, wn = _rand(64, 128, dt="bf16"), (1 + 0.1 * torch.randn(128, device="cuda")).bfloat16()
    w1, w2 = (_rand(128, 64, dt="bf16", scale=1 / math.sqrt(128)) for _ in range(2))
    e, notes = _entry(norm_two_multiplied(64, 128, 64))
    assert any(x.startswith("tc ") and " rms" in x for x in notes), notes
    out = torch.from_dlpack(e(x, wn, w1, w2))
    n = _rms(x.double(), wn.double())
    assert rel_l2(out, (n @ w1.double()) * (n @ w2.double())) < 1e-2


def test_small_block_through_kinac_compile_against_float64() -> None:
    import kinac

    h, kv = SMALL["h"], SMALL["kv"]
    ins = block_inputs(SMALL, torch.bfloat16)
    f = kinac.compile(ROOT / "workspaces/transformer", "block", target="cuda")
    out = torch.from_dlpack(f(h, kv, *ins))
    ref = block_torch(*(t.double() for t in ins), h, kv, causal_mask(SMALL["s"], torch.float64, "cuda"))  # type: ignore[call-arg]  # fmt: skip
    assert rel_l2(out, ref) < 1e-2
    lw = lower_graph_gpu(
        __import__("kinac.ir.testing", fromlist=["block_graph"]).block_graph(dtype="bf16")
    )
    assert len(lw.steps) == 5 and sum(s.gemm is not None for s in lw.steps) == 0


def test_round_two_variants_of_the_small_block(monkeypatch: pytest.MonkeyPatch) -> None:
    """The L2 prefetches, the early residual loads and 16-row blocks change no bit of the
    block's output (round 1's kernels, KINAC_SMALL_GEMM_PREFETCH=0 and _EARLY=0, are the
    reference); the folded norm rounds
    ``x w`` instead of ``x / rms w``: within 1e-2 of float64 and near round 1's output."""
    from kinac.ir.testing import block_graph

    ins = block_inputs(SMALL, torch.bfloat16)
    ref = block_torch(*(t.double() for t in ins), SMALL["h"], SMALL["kv"], causal_mask(SMALL["s"], torch.float64, "cuda"))  # type: ignore[call-arg]  # fmt: skip
    outs: dict[str, Any] = {}
    # three lowerings (the GPU suite runs under a time limit): the bit-identical changes
    # together, then the fold on top of them
    variants = {"r1": ("0", "0", "0"), "pf+early+m16": ("1", "0", "1"), "fold+m16": ("1", "1", "1")}
    for name, (pf, fold, m16) in variants.items():
        monkeypatch.setenv("KINAC_SMALL_GEMM_PREFETCH", pf)
        monkeypatch.setenv("KINAC_SMALL_GEMM_EARLY", pf)  # with the prefetches: round 2's
        monkeypatch.setenv("KINAC_SMALL_GEMM_FOLD", fold)
        monkeypatch.setenv("KINAC_SMALL_GEMM_M16", m16)
        lw = lower_graph_gpu(block_graph(dtype="bf16"))
        notes = [n.note for s in lw.steps for n in s.launches if n.note.startswith("tc")]
        assert len(notes) == 4 and (" fold" in notes[0]) == (fold == "1"), notes
        assert ("tc 16x64" in notes[1]) == (m16 == "1"), notes
        e = load_gpu_entry(lw, compile_ptx(lw.llvm_ir))
        outs[name] = torch.from_dlpack(e(*ins)).clone()
        torch.cuda.synchronize()
    for name, out in outs.items():
        assert rel_l2(out, ref) < 1e-2, name
        if "fold" not in name:
            assert torch.equal(out, outs["r1"]), name
        else:
            assert rel_l2(out, outs["r1"].double()) < 1e-2, name
