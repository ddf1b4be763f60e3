"""What an entry's CUDA graph holds (issue 14: the whole entry against the sum of its steps):
:meth:`kinac.rt.cuda.graph.CapturedGraph.nodes` lists each node; a block without runtime
checks replays kernels (its own launches and cuBLAS's), in one chain: no memset of a status word
of its own, no copy, no event node."""

from __future__ import annotations

import pytest

from kinac.codegen.ptx import compile_ptx
from kinac.ir.gpu.pipeline import lower_graph_gpu
from kinac.ir.testing import block_graph
from kinac.rt import cuda

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not cuda.available(), reason="no CUDA GPU"),
]


def test_block_graph_holds_kernels_only() -> None:
    import torch

    from kinac.rt.cuda.entry import load_gpu_entry

    lw = lower_graph_gpu(block_graph(2, 64, 256, 4, 2, 128, "bf16"))
    assert not lw.has_status
    ent = load_gpu_entry(lw, compile_ptx(lw.llvm_ir))
    args = [torch.randn(p.shape, device="cuda").to(torch.bfloat16) * 0.1 for p in lw.params]
    ent(*args)
    ent(*args)
    torch.cuda.synchronize()
    (graph,) = [g for _, _, g in ent._bound.values() if g is not None]
    nodes = graph.nodes()
    kernels = [n for n in nodes if n.startswith("KERNEL ")]
    assert nodes[-1] == f"edges {len(nodes) - 2}", nodes  # one chain
    # kernels (a cuBLAS call may add a memset of its own, e.g. for a split-K reduction)
    assert {n.split()[0] for n in nodes[:-1]} <= {"KERNEL", "MEMSET"}, nodes
    ours = {ln.function for s in lw.steps for ln in s.launches}
    named = [n.split()[1] for n in kernels]
    assert ours <= set(named), nodes  # our launches, by name
    assert len(kernels) >= len(lw.steps) and graph.num_nodes == len(nodes) - 1


@pytest.mark.parametrize("up_first", [False, True])
def test_45m_block_graph_has_no_memory_nodes(up_first: bool) -> None:
    """The 45M bf16 block (issue 14): its grouped GEMMs (k+v, gate+up) bound to weights and
    outputs at one stride each are strided-batched calls (no ptrBatch kernel), and its graph
    holds no MEM_ALLOC/MEM_FREE (cuBLAS's default workspace pool, which cublasSetStream had
    put back). With the up weight below the gate weight (strides of both signs) the gate/up
    call keeps its pointer arrays, without memory nodes too; both equal a float64 reference."""
    import math

    import torch
    from gpu_refs import BIG, block_inputs, block_torch, causal_mask, rel_l2

    from kinac.rt.cuda.entry import load_gpu_entry

    lw = lower_graph_gpu(block_graph(4, 1024, 2048, 16, 4, 5632, "bf16"))
    args = block_inputs(BIG, torch.bfloat16)
    # wk, wv and wg, wu each in one buffer, in this order (the caching allocator's order of
    # separate tensors is not the test's to rely on)
    for lo, hi in ((3, 4), (8, 7) if up_first else (7, 8)):
        pair = torch.stack([args[lo], args[hi]])
        args[lo], args[hi] = pair[0], pair[1]
    ent = load_gpu_entry(lw, compile_ptx(lw.llvm_ir))
    ent(*args)  # the warm-up, eager
    got = torch.from_dlpack(ent(*args))  # captured
    torch.cuda.synchronize()
    assert ent.blas.bound_forms[-2:] == ["strided", "pointers" if up_first else "strided"]
    graph = [g for _, _, g in ent._bound.values() if g is not None][-1]
    nodes = graph.nodes()
    kinds = {n.split()[0] for n in nodes[:-1]}
    # kernels, and a memset where cuBLAS's chosen kernel zeroes part of its workspace (the
    # H200, 2026-12-02: one, before the gate/up GEMM, strided or not); no graph memory nodes
    assert kinds <= {"KERNEL", "MEMSET"}, nodes
    assert sum(n == "MEMSET" for n in nodes) <= 2, nodes
    assert any("ptrBatch" in n for n in nodes) == up_first, nodes
    ref = block_torch(*(t.double() for t in args), 16, 4, causal_mask(1024, torch.float64, "cuda"))  # type: ignore[call-arg]  # fmt: skip
    err = rel_l2(got, ref)
    assert math.isfinite(err) and err < 1e-2, err
