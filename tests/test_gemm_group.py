"""Projections sharing an input as one cuBLAS call (issue 14, ``kinac/ir/gpu/gemm_group.py``).

``x·wk`` and ``x·wv`` (and ``x·wq`` where H == KV), ``n·wg`` and ``n·wu`` become one pointer-
array batched call: the plan's steps show it, the emulated entry (numpy for each cuBLAS
call through the column-major arguments the runtime passes) equals the ungrouped plan's
outputs bit for bit and float64, and products whose members would overlap, that write an
entry output or that carry an epilogue stay apart."""

from __future__ import annotations

import numpy as np
import pytest
from gpu_support import run_emulated

from kinac.ir.gpu import gemm_group
from kinac.ir.gpu.pipeline import lower_graph_gpu
from kinac.ir.testing import GraphBuilder, block_graph
from kinac.tir.graph import Graph


def _swiglu(dt: str, shared: bool = True) -> Graph:
    """``(silu(x wg) * (x wu)) wd``, the gate and up products reading one input (or two)."""
    g = GraphBuilder("swiglu")
    x = g.param("x", dt, (2, 24, 32))
    y = g.param("y", dt, (2, 24, 32)) if not shared else x
    wg, wu, wd = (g.param(n, dt, s) for n, s in (("wg", (32, 48)), ("wu", (32, 48)), ("wd", (48, 32))))  # fmt: skip
    a, b = g.matmul(x, wg), g.matmul(y, wu)
    sig = g.unary("sigmoid", a)
    h = g.binary("mul", g.binary("mul", a, sig), b)
    return g.build(g.matmul(h, wd))


def _inputs(graph: Graph, seed: int) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [(rng.standard_normal(t.shape) * 0.5).astype(np.float32) for _, t in graph.params]


def _matmul_modes(graph: Graph) -> list[tuple[str, int]]:
    return [(s.gemm.mode, s.gemm.batch) for s in lower_graph_gpu(graph).steps if s.gemm]


def test_gate_and_up_are_one_call_and_equal_the_ungrouped_plan(monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    graph = _swiglu("f32")
    assert _matmul_modes(graph) == [("pointers", 2), ("single", 1)]
    ins = _inputs(graph, 0)
    (grouped,) = run_emulated(graph, *ins)
    monkeypatch.setattr(gemm_group, "MAX_GROUP", 1)
    assert _matmul_modes(graph) == [("single", 1), ("single", 1), ("single", 1)]
    (plain,) = run_emulated(graph, *ins)
    np.testing.assert_array_equal(grouped, plain)
    x, wg, wu, wd = (i.astype(np.float64) for i in ins)
    a = x @ wg
    ref = (a / (1 + np.exp(-a)) * (x @ wu)) @ wd
    assert np.linalg.norm(grouped - ref) / np.linalg.norm(ref) < 1e-5


def test_products_of_different_inputs_stay_apart() -> None:
    assert _matmul_modes(_swiglu("f32", shared=False)) == [("single", 1)] * 3


def test_outputs_and_epilogues_stay_apart() -> None:
    """Two products of one input returned as the entry's outputs: the runtime writes each
    output by its own step (entry_into), so they stay two calls."""
    g = GraphBuilder("two")
    x = g.param("x", "f32", (8, 16))
    w1, w2 = g.param("w1", "f32", (16, 16)), g.param("w2", "f32", (16, 16))
    assert _matmul_modes(g.build(g.matmul(x, w1), g.matmul(x, w2))) == [("single", 1)] * 2


@pytest.mark.parametrize(
    "dims,calls",
    [
        ((4, 128, 256, 4, 2, 704), [1, 2, 1, 2, 1]),  # q alone (H != KV), k+v, o, g+u, down
        ((1, 40, 128, 2, 2, 64), [3, 1, 2, 1]),  # H == KV: q, k and v together
    ],
)
def test_block_plans(dims: tuple[int, ...], calls: list[int], monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    # the cuBLAS plans: the small block's products go to the generated small GEMM (346cdae)
    monkeypatch.setenv("KINAC_SMALL_GEMM", "0")
    lw = lower_graph_gpu(block_graph(*dims, "bf16"))  # type: ignore[arg-type,call-arg]
    got = [s.gemm.batch if s.gemm.mode == "pointers" else 1 for s in lw.steps if s.gemm]
    assert got == calls
    for s in lw.steps:  # every grouped call writes arena temporaries, one per member
        if s.gemm and s.gemm.mode == "pointers":
            assert s.gemm.c.bufs == (s.writes, *s.also_writes)
            assert all(w.startswith("arena+") for w in s.gemm.c.bufs)
            assert len(set(s.gemm.b.bufs)) == s.gemm.batch


def test_overlapping_members_stay_apart() -> None:
    """The soundness check on the arena plan: a member whose output overlaps another
    member's input (or output) is not grouped with it."""
    spans = {0: ("arena", 0, 100), 1: ("arena", 100, 200), 2: ("arena", 50, 150), 9: ("param0", 0, 2**62)}  # fmt: skip
    assert gemm_group._disjoint([0, 1], [0, 1], [[9], [9]], spans.__getitem__)
    assert not gemm_group._disjoint([0, 1], [0, 2], [[9], [9]], spans.__getitem__)
    assert not gemm_group._disjoint([0, 1], [0, 1], [[9], [9, 0]], spans.__getitem__)


class _FakeCublas:
    """cuBLAS's entry points as the binding calls them: records each call by name, and the
    workspace each call ran with."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, tuple[object, ...]]] = []
        self.workspace: int | None = None

    def set_stream(self, h: int, stream: int) -> None:
        self.workspace = None  # as cuBLAS does: the default workspace pool again

    def set_workspace(self, h: int, ws: int, nbytes: int) -> None:
        self.workspace = ws

    def __getattr__(self, name: str) -> object:
        if not name.startswith("gemm"):
            raise AttributeError(name)
        return lambda *a: self.calls.append((name, a, self.workspace))  # type: ignore[arg-type]


def _bind_grouped(order: list[str]) -> tuple[object, _FakeCublas, list[bytes], dict[str, int]]:
    """The runtime's binding (fake cuBLAS) of the f32 gate/up group, its buffers at 1 MiB
    steps in ``order`` (``c0``, ``c1``: the members' outputs); issued twice."""
    from kinac.rt.cuda.blas import Blas

    lw = lower_graph_gpu(_swiglu("f32"))
    (s,) = [s for s in lw.steps if s.gemm and s.gemm.mode == "pointers"]
    real = dict(zip(("c0", "c1"), s.gemm.c.bufs, strict=True))  # type: ignore[union-attr]  # the members' outputs
    base = {real.get(n, n): (1 + i) << 20 for i, n in enumerate(order)}
    blas = object.__new__(Blas)
    fake = _FakeCublas()
    blas.cublas, blas.handle, blas.allow_tf32, blas._keep, blas.ws = fake, 7, False, [], 1 << 40
    blas.bound_forms = []
    uploads: list[bytes] = []

    def upload(b: bytes) -> int:
        uploads.append(b)
        return len(uploads)

    call = blas.bind(s.gemm, base.__getitem__, upload)  # type: ignore[arg-type]
    call(0)
    call(0)
    form = {"gemm_strided_batched_ex": "strided", "gemm_batched_ex": "pointers"}[fake.calls[0][0]]
    assert blas.bound_forms == [form]
    assert [c[2] for c in fake.calls] == [1 << 40] * 2  # type: ignore[misc]  # the entry's workspace, not the pool
    return s.gemm, fake, uploads, base


def test_grouped_call_is_strided_where_bound_addresses_have_one_stride() -> None:
    """Weights and outputs each in ascending order at one distance: one strided-batched call
    (cuBLAS's strided kernel, no pointer arrays), the distance as the stride in elements."""
    _, fake, uploads, base = _bind_grouped(["param0", "param1", "param2", "c0", "c1"])
    assert uploads == [] and [c[0] for c in fake.calls] == ["gemm_strided_batched_ex"] * 2
    a = fake.calls[0][1]
    # (h, ta, tb, m, n, k, alpha, A, at, lda, strideA, B, bt, ldb, strideB, beta, C, ...)
    assert (a[7], a[10]) == (base["param1"], (base["param2"] - base["param1"]) // 4)  # weights
    assert (a[11], a[14]) == (base["param0"], 0)  # x, shared
    assert a[-3] == 2  # batch


def test_grouped_call_keeps_pointer_arrays_where_strides_differ_in_sign() -> None:
    """Weights in descending order, outputs ascending: no one stride order fits both, so one
    ``cublasGemmBatchedEx`` whose pointer arrays, uploaded once at bind time, hold each
    member's own weight and output buffer."""
    import ctypes

    g, fake, uploads, base = _bind_grouped(["param0", "param2", "param1", "c0", "c1"])
    assert len(uploads) == 3 and [c[0] for c in fake.calls] == ["gemm_batched_ex"] * 2
    assert fake.calls[0][1][-3] == 2  # batch
    arrays = [list((ctypes.c_uint64 * 2).from_buffer_copy(u)) for u in uploads]
    assert arrays[0] == [base["param1"], base["param2"]]  # the weights wg, wu
    assert arrays[1] == [base["param0"], base["param0"]]  # x, shared
    assert arrays[2] == [base[b] for b in g.c.bufs]  # type: ignore[attr-defined]  # each member's output


def test_strided_form_of_bound_addresses() -> None:
    """Which bound pointer-array batches become one strided batch (pure): one stride per
    operand, 16-byte multiples, every non-zero stride of one sign (batches reversed if all
    are negative), the output never at stride 0."""
    from kinac.rt.cuda.blas_strides import strided_form

    x, w, o = (4096,) * 3, (1 << 20, 3 << 20, 5 << 20), (9 << 20, 10 << 20, 11 << 20)
    assert strided_form((w, x, o), (2, 2, 2)) == ((1 << 20, 4096, 9 << 20), (1 << 20, 0, 1 << 19))
    back = tuple(reversed(w)), x, tuple(reversed(o))  # all descending: taken in reverse
    assert strided_form(back, (2, 2, 2)) == ((1 << 20, 4096, 9 << 20), (1 << 20, 0, 1 << 19))
    assert strided_form((tuple(reversed(w)), x, o), (2, 2, 2)) is None  # signs differ
    assert strided_form(((0, 32, 96), x, o), (2, 2, 2)) is None  # no one stride
    assert strided_form(((0, 8, 16), x, o), (2, 2, 2)) is None  # 8 bytes: not 16-aligned
    assert strided_form((w, x, x), (2, 2, 2)) is None  # every batch writing one place
    assert strided_form(((0, 1 << 40), x[:2], o[:2]), (2, 2, 2)) is None  # past TMA's strides
    assert strided_form(((64,), (0,), (128,)), (4, 4, 4)) == ((64, 0, 128), (0, 0, 0))
