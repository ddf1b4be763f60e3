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
