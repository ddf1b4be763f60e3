"""On the GPU (issue 14): the transformer block whose attention kernel writes tokens-major
(no transpose map after it) and whose k/v and gate/up projections are grouped cuBLAS calls,
against PyTorch in float64, Dh 64 and 128, S not a multiple of the tiles, on whichever mma
path the device takes (wgmma on an H200); a grouped call against the ungrouped one."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from kinac.rt import cuda  # noqa: E402

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(
        not (cuda.available() and torch.cuda.is_available()), reason="no CUDA GPU with PyTorch"
    ),
]

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize("d,h,kv", [(256, 4, 2), (512, 4, 2)])
def test_block_tokens_major_attention_matches_torch(d: int, h: int, kv: int) -> None:
    import kinac

    sys.path.insert(0, str(ROOT / "tests"))
    from gpu_refs import block_inputs, block_torch, causal_mask, rel_l2

    dims = {"b": 2, "s": 200, "d": d, "h": h, "kv": kv, "f": 704}
    fn = kinac.compile(ROOT / "workspaces/transformer", "block", target="cuda")
    ins = block_inputs(dims, torch.bfloat16)
    out = torch.from_dlpack(fn(dims["h"], dims["kv"], *ins))
    ent = next(iter(fn._entries.values()))
    steps = ent.lowered.steps
    i = [s.kind for s in steps].index("attention")
    assert steps[i].shape == (2, 200, d) and steps[i + 1].kind == "matmul"  # no map between
    grouped = [s.gemm.batch for s in steps if s.gemm and s.gemm.b.bufs]
    assert grouped == [2, 2]  # k and v, gate and up
    ref = block_torch(*(t.double() for t in ins), dims["h"], dims["kv"],  # type: ignore[call-arg]
                      causal_mask(dims["s"], torch.float64, "cuda"))  # fmt: skip
    assert rel_l2(out, ref) < 1e-2


def test_grouped_projections_match_torch_and_the_ungrouped_call(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The grouped cuBLAS call (gate and up as one ``cublasGemmBatchedEx`` over two weight
    buffers) on the GPU: equal to the ungrouped plan and to torch's float64 SwiGLU."""
    import numpy as np

    from kinac.codegen.ptx import compile_ptx
    from kinac.ir.gpu import gemm_group
    from kinac.ir.gpu.pipeline import lower_graph_gpu
    from kinac.ir.testing import GraphBuilder
    from kinac.rt.cuda.entry import load_gpu_entry

    g = GraphBuilder("swiglu")
    x = g.param("x", "f32", (4, 128, 256))
    wg, wu, wd = (g.param(n, "f32", s) for n, s in (("wg", (256, 704)), ("wu", (256, 704)), ("wd", (704, 256))))  # fmt: skip
    a = g.matmul(x, wg)
    graph = g.build(g.matmul(g.binary("mul", g.binary("mul", a, g.unary("sigmoid", a)), g.matmul(x, wu)), wd))  # fmt: skip
    rng = np.random.default_rng(0)
    ins = [(rng.standard_normal(t.shape) * 0.1).astype(np.float32) for _, t in graph.params]

    def run() -> tuple[np.ndarray, int]:
        lw = lower_graph_gpu(graph)
        out = load_gpu_entry(lw, compile_ptx(lw.llvm_ir))(*ins)
        out = out[0] if isinstance(out, tuple) else out
        host = out if isinstance(out, np.ndarray) else out.numpy()
        return np.array(host), len(lw.steps)

    old = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = False
    try:
        grouped, n_grouped = run()
        monkeypatch.setattr(gemm_group, "MAX_GROUP", 1)
        plain, n_plain = run()
    finally:
        torch.backends.cuda.matmul.allow_tf32 = old
    assert n_grouped == n_plain - 1
    xs, g64, u64, d64 = (torch.from_numpy(i).double() for i in ins)
    h = xs @ g64
    ref = ((h * torch.sigmoid(h)) * (xs @ u64) @ d64).numpy()
    for got in (grouped, plain):
        assert np.linalg.norm(got - ref) / np.linalg.norm(ref) < 1e-5
    assert np.linalg.norm(grouped - plain) / np.linalg.norm(ref) < 1e-6
