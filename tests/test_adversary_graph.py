"""Graph-contract findings of the adversary hunt (2026-12-02): ops a Graph may hold (the
checker refuses them in source, but the graph contract and the GPU lowering define them),
where the host back end disagreed with the GPU's and PyTorch's semantics."""

from __future__ import annotations

import numpy as np
import pytest
from gpu_support import run_emulated
from host_support import run, torch_eval

from kinac.ir.testing import GraphBuilder


@pytest.mark.parametrize("shape", [(4, 3), (4, 17), (4, 257)])
def test_a_bool_sum_is_any_on_host_and_gpu(shape: tuple[int, int]) -> None:
    """Bool ``add`` is or; the host's ``reduce_sum`` of bools added i1s (xor: a row of two
    Trues summed to False) where the GPU and ``torch.sum(dtype=bool)`` give any."""
    a = np.zeros(shape, bool)
    for r in range(shape[0]):
        a[r, :r] = True  # r Trues in row r
    g = GraphBuilder("bool_sum")
    x = g.param("a", "bool", shape)
    graph = g.build(g.reduce("reduce_sum", x, 1), g.reduce("reduce_sum", x, 0))
    want = torch_eval(graph, a)
    assert [w.tolist() for w in want] == [a.any(1).tolist(), a.any(0).tolist()]
    for got in (run(graph, a), run_emulated(graph, a)):
        for gv, wv in zip(got, want, strict=True):
            np.testing.assert_array_equal(gv, wv)
