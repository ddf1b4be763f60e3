"""``run_program`` (a DeviceProgram's steps on a communicator) and ``layout`` (global arrays to
shards and back), on hand-written programs whose segments are numpy functions, so these tests
need no compiler: each collective kind along a dim other than 0, and a Megatron MLP on 2x2.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from kinac.artifacts.sharded import Collective, DeviceProgram, MeshSpec, ParamLayout, RunSegment
from kinac.errors import KinaRuntimeError
from kinac.rt.comm import CommLog, simulate
from kinac.rt.comm.execute import run_program
from kinac.rt.comm.layout import assemble, local_shape, shard_global
from kinac.tir.graph import TType

LINE = MeshSpec("tp", (4,), ("tp",))
GRID = MeshSpec("grid", (2, 2), ("dp", "tp"))
R2 = ParamLayout(((), ()))


def _t(*shape: int) -> TType:
    return TType("f32", shape)


def _coll(kind: str, axis: str, dim: int, concat: int = -1) -> Collective:
    return Collective(kind, axis, 0, 1, dim, "sum", 0, "m.kina:1:2", "test", concat)


def _one_step(mesh: MeshSpec, step: Collective, locals_: list[np.ndarray]) -> list[np.ndarray]:
    prog = DeviceProgram(mesh, (("x", _t(*locals_[0].shape), R2),), ((1, _t(1), R2),), (step,), ())
    world = lambda c: run_program(prog, [], c, [locals_[c.global_rank]])[0]  # noqa: E731
    return simulate(mesh, world, timeout_s=10.0)


def _locals(n: int, shape: tuple[int, ...]) -> list[np.ndarray]:
    return [
        np.random.default_rng(r).standard_normal(shape).astype(np.float32) * (r + 1)
        for r in range(n)
    ]


def test_all_gather_along_dim_1() -> None:
    xs = _locals(4, (3, 2))
    for got in _one_step(LINE, _coll("all-gather", "tp", 1), xs):
        np.testing.assert_array_equal(got, np.concatenate(xs, axis=1))


def test_reduce_scatter_along_dim_1() -> None:
    xs = _locals(4, (3, 8))
    total = xs[0] + xs[1] + xs[2] + xs[3]
    for r, got in enumerate(_one_step(LINE, _coll("reduce-scatter", "tp", 1), xs)):
        np.testing.assert_allclose(got, total[:, 2 * r : 2 * r + 2], rtol=1e-6)


def test_all_to_all_split_dim_1_concat_dim_0() -> None:
    xs = _locals(4, (3, 8))
    for r, got in enumerate(_one_step(LINE, _coll("all-to-all", "tp", 1, 0), xs)):
        want = np.concatenate([x[:, 2 * r : 2 * r + 2] for x in xs], axis=0)
        np.testing.assert_array_equal(got, want)


def test_all_to_all_without_concat_dim_concatenates_along_dim() -> None:
    xs = _locals(4, (3, 8))
    for r, got in enumerate(_one_step(LINE, _coll("all-to-all", "tp", 1), xs)):
        np.testing.assert_array_equal(
            got, np.concatenate([x[:, 2 * r : 2 * r + 2] for x in xs], axis=1)
        )


def test_slice_keeps_this_ranks_chunk_over_the_axis() -> None:
    x = _locals(1, (2, 4))[0]
    for r, got in enumerate(_one_step(GRID, _coll("slice", "dp", 1), [x] * 4)):
        dp = r // 2
        np.testing.assert_array_equal(got, x[:, 2 * dp : 2 * dp + 2])


def test_all_reduce_over_one_axis_of_a_grid() -> None:
    xs = _locals(4, (2, 3))
    for r, got in enumerate(_one_step(GRID, _coll("all-reduce", "tp", -1), xs)):
        peers = [2 * (r // 2), 2 * (r // 2) + 1]  # the ranks sharing r's dp coordinate
        np.testing.assert_allclose(got, xs[peers[0]] + xs[peers[1]], rtol=1e-6)


def _megatron() -> tuple[DeviceProgram, list[Callable[..., Any]]]:
    """y = relu(x @ w1) @ w2, x split on batch over dp, w1 on columns and w2 on rows over tp:
    the second product is a partial sum over tp, all-reduced."""
    dp, col, row = (
        ParamLayout((("dp",), ())),
        ParamLayout(((), ("tp",))),
        ParamLayout((("tp",), ())),
    )
    prog = DeviceProgram(
        GRID,
        (("x", _t(2, 6), dp), ("w1", _t(6, 4), col), ("w2", _t(4, 6), row)),
        ((5, _t(2, 6), dp),),
        (
            RunSegment(0, (0, 1), (3,)),
            RunSegment(1, (3, 2), (4,)),
            Collective("all-reduce", "tp", 4, 5, -1, "sum", 48, "m.kina:3:4", "row-parallel"),
        ),
        (),
    )
    segs = [lambda x, w: np.maximum(x @ w, 0), lambda h, w: h @ w]
    return prog, segs


def test_megatron_mlp_on_a_2x2_mesh_equals_the_global_computation() -> None:
    prog, segs = _megatron()
    rng = np.random.default_rng(7)
    x, w1, w2 = (rng.standard_normal(s).astype(np.float32) for s in ((4, 6), (6, 8), (8, 6)))
    layouts = [lay for _, _, lay in prog.params]
    log = CommLog()

    def rank(c: Any) -> list[np.ndarray]:
        ins = [
            shard_global(a, lay, GRID, c.global_rank)
            for a, lay in zip((x, w1, w2), layouts, strict=True)
        ]
        return run_program(prog, segs, c, ins)

    outs = simulate(GRID, rank, timeout_s=10.0, log=log)
    y = assemble([o[0] for o in outs], prog.outputs[0][2], GRID, check=True)
    np.testing.assert_allclose(y, np.maximum(x @ w1, 0) @ w2, rtol=1e-5, atol=1e-5)
    assert (
        log.counts()
        == {("all-reduce", "tp"): 1}
        == {("all-reduce", "tp"): prog.count("all-reduce")}
    )
    assert log.bytes_per_device() == prog.steps[2].nbytes  # type: ignore[union-attr]  # what the compiler's cost model said


def test_layout_major_first_chunk_order() -> None:
    x = np.arange(8 * 4).reshape(8, 4)
    by_dp_tp = ParamLayout((("dp", "tp"), ()))
    by_tp_dp = ParamLayout((("tp", "dp"), ()))
    # rank 1 is (dp 0, tp 1): chunk 0*2+1 = 1 when dp is major, 1*2+0 = 2 when tp is
    np.testing.assert_array_equal(shard_global(x, by_dp_tp, GRID, 1), x[2:4])
    np.testing.assert_array_equal(shard_global(x, by_tp_dp, GRID, 1), x[4:6])
    for lay in (by_dp_tp, by_tp_dp, ParamLayout(((), ("tp",))), ParamLayout((("dp",), ("tp",)))):
        parts = [shard_global(x, lay, GRID, r) for r in range(4)]
        np.testing.assert_array_equal(assemble(parts, lay, GRID, check=True), x)


def test_layout_partial_shares_sum_and_replicas_are_checked() -> None:
    lay = ParamLayout((("dp",), ()), ("tp",))
    x = np.random.default_rng(1).standard_normal((4, 3)).astype(np.float32)
    shares = [shard_global(x, lay, GRID, r) for r in range(4)]
    assert not shares[1].any() and not shares[3].any()  # tp coordinate 1 holds zeros
    np.testing.assert_array_equal(assemble(shares, lay, GRID), x)
    uneven = [s + (r % 2) * 0.25 - (1 - r % 2) * 0.25 for r, s in enumerate(shares)]
    np.testing.assert_allclose(assemble(uneven, lay, GRID), x, rtol=1e-6)
    rep = ParamLayout((("dp",), ()))
    parts = [shard_global(x, rep, GRID, r) for r in range(4)]
    parts[3] = parts[3] + 1
    np.testing.assert_array_equal(assemble(parts, rep, GRID), x)  # replicas not compared
    with pytest.raises(KinaRuntimeError, match="rank 3's replica differs"):
        assemble(parts, rep, GRID, check=True)


def test_local_shape_says_which_dim_does_not_divide() -> None:
    lay = ParamLayout(((), ("dp", "tp")))
    assert local_shape((3, 8), lay, GRID) == (3, 2)
    assert local_shape((3, 6), lay, GRID) == (
        "dim 1 has size 6, which the 4 devices of mesh axes dp x tp do not divide"
    )
