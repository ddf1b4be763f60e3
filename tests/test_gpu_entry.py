"""CPU tests of the GPU runtime's pure parts: binding keys (volatile arguments) and the
row-major to column-major translation of cuBLAS calls."""

from __future__ import annotations

import numpy as np

from kinac.artifacts.gpu import GemmOperand, GpuGemm, GpuLoweredEntry
from kinac.artifacts.host import BufferSpec
from kinac.rt.cuda.blas import colmajor, stride
from kinac.rt.cuda.entry import VOLATILE, GpuEntry


def _entry() -> GpuEntry:
    lw = GpuLoweredEntry(
        "e", "", (BufferSpec("x", "f32", (4,)), BufferSpec("w", "f32", (4,))),
        (BufferSpec("out0", "f32", (4,)),), ("cuda:0", "cuda:0"), ("cuda:0",), 64, 8, (), (),
    )  # fmt: skip
    e = GpuEntry.__new__(GpuEntry)
    e.lowered = lw
    e._seen = [set() for _ in range(3)]
    e.volatile = set()
    return e


def test_binding_keys_stage_only_arguments_that_keep_moving() -> None:
    e = _entry()
    assert e._key((100, 200, 300)) == (100, 200, 300)
    assert e._key((100, 200, 400)) == (100, 200, 400)  # two output blocks alternate: in place
    assert e._key((100, 200, 300)) == (100, 200, 300)
    assert VOLATILE == 3
    assert e._key((100, 200, 500)) == (100, 200, 0)  # a third address: the output is staged
    assert e._key((100, 200, 600)) == (100, 200, 0)
    assert e.volatile == {2}


def test_colmajor_translation() -> None:
    g = GpuGemm(
        "f32", "f32", 5, 3, 7, 2,
        GemmOperand("A", (0, 35), 7, False), GemmOperand("B", (0, 0), 7, True),
        GemmOperand("C", (0, 15), 3), "strided",
    )  # fmt: skip
    cm = colmajor(g)
    assert (cm.m, cm.n, cm.k) == (3, 5, 7)  # C^T = B^T A^T
    assert (cm.a_buf, cm.transa, cm.lda) == ("B", True, 7)
    assert (cm.b_buf, cm.transb, cm.ldb) == ("A", False, 7)
    assert stride(cm.b_offs) == 35 and stride(cm.a_offs) == 0 and stride(cm.c_offs) == 15
    # the column-major reading of the same memory gives the row-major product
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((5, 7)), rng.standard_normal((3, 7))  # B stored transposed
    at = np.lib.stride_tricks.as_strided(a.ravel(), (cm.k, cm.n), (8, cm.ldb * 8))  # A^T
    bt = np.lib.stride_tricks.as_strided(b.ravel(), (cm.k, cm.m), (8, cm.lda * 8)).T  # (B^T)
    np.testing.assert_allclose((bt @ at).T, a @ b.T)


def test_an_entry_runs_on_one_gpu() -> None:
    import pytest

    from kinac.rt.cuda.entry import KinaGpuError, placement

    def lowered(pdev: tuple[str, ...], odev: tuple[str, ...]) -> GpuLoweredEntry:
        params = tuple(BufferSpec(f"p{i}", "f32", (4,)) for i in range(len(pdev)))
        outs = tuple(BufferSpec(f"out{j}", "f32", (4,)) for j in range(len(odev)))
        return GpuLoweredEntry("e", "", params, outs, pdev, odev, 64, 8, (), ())

    assert placement(lowered(("cpu", "cpu"), ("cuda:0",))) == 0
    assert placement(lowered(("cuda:1", "cpu"), ("cuda:1",))) == 1
    assert placement(lowered(("cpu",), ("cpu",))) == 0
    with pytest.raises(KinaGpuError, match=r"one entry runs on one GPU, but its arrays are on "
                       r"cuda:0, cuda:1 \(p0 on cuda:0, p1 on cuda:1, out0 on cuda:1\)"):  # fmt: skip
        placement(lowered(("cuda:0", "cuda:1"), ("cuda:1",)))


def test_outputs_stay_on_the_gpu_of_the_params() -> None:
    from kinac.ir.gpu.pipeline import lower_graph_gpu
    from kinac.ir.testing import GraphBuilder

    g = GraphBuilder("on1")
    x = g.param("x", "f32", (4, 8), "cuda:1")
    y = g.param("y", "f32", (4, 8))
    lw = lower_graph_gpu(g.build(g.binary("add", x, y), g.to_device(x, "cpu")))
    assert lw.param_devices == ("cuda:1", "cpu") and lw.output_devices == ("cuda:1", "cpu")
