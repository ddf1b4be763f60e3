"""The launches of the small bf16 transformer block (issue 14 item 2), on the CPU: the list
of steps a CUDA graph replays per call, pinned, so a change that adds a launch is seen and a
fusion that removes one updates this list on purpose (docs/call_path.md says what each step
is and what would fuse it). The estimate uses ``kinac/ir/gpu/cost.py``'s floors plus a
launch gap per step, the H200's ~1.5 us inside a graph."""

from __future__ import annotations

from kinac.ir.gpu.cost import estimate_steps
from kinac.ir.gpu.pipeline import lower_graph_gpu
from kinac.ir.testing import block_graph

LAUNCH_GAP_S = 1.5e-6  # a kernel node's launch inside a graph on the H200 (1.2-2.0 us measured)

SMALL_BF16_STEPS = [  # gpu-small-gemm (docs/gpu.md, "Small products"): 9 -> 5 launches
    ("matmul", "kernel"),  # RMSNorm of x as the prologue of q, k and v: one generated GEMM
    ("attention", "kernel"),  # fused causal GQA reading q, k, v as slices; tokens-major output
    ("matmul", "kernel"),  # o wo + x (residual epilogue)
    ("matmul", "kernel"),  # RMSNorm of h, gate and up, silu(g) u: one generated GEMM
    ("matmul", "kernel"),  # (silu(g) u) wd + h
]

BLOCK_45M_BF16_STEPS = [  # products past the size rule: cuBLAS
    ("row", "kernel"),  # RMSNorm of x
    ("matmul", "cublas"),  # q
    ("matmul", "cublas"),  # k and v: one grouped call (pointer arrays, gemm_group.py)
    ("attention", "kernel"),  # fused causal GQA, written tokens-major (o_strides): no map after
    ("matmul", "cublasLt"),  # o wo + x (residual epilogue)
    ("row", "kernel"),  # RMSNorm of h
    ("matmul", "cublas"),  # gate and up: one grouped call
    ("map", "kernel"),  # silu(g) u
    ("matmul", "cublasLt"),  # (silu(g) u) wd + h
]


def test_small_bf16_block_launches_and_estimate() -> None:
    lw = lower_graph_gpu(block_graph(4, 128, 256, 4, 2, 704, "bf16"))
    assert [(s.kind, s.impl) for s in lw.steps] == SMALL_BF16_STEPS
    launches = sum(len(s.launches) or 1 for s in lw.steps)  # a library call is one launch
    # 12 before the tokens-major attention output and grouped projections, 9 before gpu-small-gemm
    assert launches == 5
    costs = estimate_steps(lw.steps)
    work_s = sum(c.est_s for c in costs)
    # every step's own work is under a microsecond at this size: the launches are the cost
    assert max(c.est_s for c in costs) < 1e-6
    assert work_s < 0.25 * launches * LAUNCH_GAP_S
    est_us = (work_s + launches * LAUNCH_GAP_S) * 1e6
    # the model's floors are far below the measured 24.6 us of GPU per call (with PDL; 26.7
    # with the 9 launches before: docs/measurements/small_gemm_2026-12-02d.md)
    assert 7 < est_us < 30


def test_45m_bf16_block_launches() -> None:
    """The 45M block (B4 S1024 D2048 H16 KV4 F5632) lowers to 9 steps (cuBLAS: its products
    are past gpu-small-gemm's size rule): the
    attention kernel writes the output projection's [B, S, H*Dh] input itself, k/v and
    gate/up are one grouped cuBLAS call each."""
    lw = lower_graph_gpu(block_graph(4, 1024, 2048, 16, 4, 5632, "bf16"))
    assert [(s.kind, s.impl) for s in lw.steps] == BLOCK_45M_BF16_STEPS
    (att,) = [s for s in lw.steps if s.kind == "attention"]
    assert att.shape == (4, 1024, 2048)
    est_us = sum(c.est_s for c in estimate_steps(lw.steps)) * 1e6
    assert 550 < est_us < 650  # 605 us with the 8.4 us transpose map (cost.py's floors)
