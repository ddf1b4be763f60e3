"""Runtime details the sharded gradients exposed: a rank-0 partial sum (a data-parallel loss)
all-reduced by ``run_program`` stays rank 0 (``numpy.ascontiguousarray`` made it ``[1]``, and
assembling the global loss failed on the rank mismatch)."""

from __future__ import annotations

import numpy as np

from kinac.artifacts.sharded import Collective, DeviceProgram, MeshSpec, ParamLayout
from kinac.rt.comm import simulate
from kinac.rt.comm.execute import run_program
from kinac.rt.comm.layout import assemble
from kinac.tir.graph import TType


def test_a_scalar_partial_sum_is_all_reduced_to_a_scalar() -> None:
    mesh = MeshSpec("dp", (4,), ("dp",))
    scalar = ParamLayout(())
    step = Collective("all-reduce", "dp", 0, 1, -1, "sum", 4, "loss.kina:1:2", "partial loss")
    prog = DeviceProgram(
        mesh, (("l", TType("f32", ()), scalar),), ((1, TType("f32", ()), scalar),), (step,), ()
    )
    shares = [np.asarray(0.25 * (r + 1), np.float32) for r in range(4)]
    outs = simulate(mesh, lambda c: run_program(prog, [], c, [shares[c.global_rank]])[0], 10.0)
    assert all(o.shape == () and o.dtype == np.float32 for o in outs)
    assert [float(o) for o in outs] == [2.5] * 4
    assert assemble(outs, scalar, mesh, check=True).shape == ()


def test_a_scalar_argument_is_sharded_as_a_scalar() -> None:
    """A rank-0 argument (a mixed-precision loss's ``scale``) reached the segments as ``[1]``:
    ``argument 's2': shape [1], expected []``."""
    from kinac.rt.comm.layout import shard_global

    mesh = MeshSpec("grid", (2, 2), ("dp", "tp"))
    for rank in range(4):
        got = shard_global(np.asarray(3.0, np.float32), ParamLayout(()), mesh, rank)
        assert got.shape == () and float(got) == 3.0
    got = shard_global(np.arange(8, dtype=np.float32), ParamLayout((("tp",),)), mesh, 3)
    assert got.tolist() == [4.0, 5.0, 6.0, 7.0]
