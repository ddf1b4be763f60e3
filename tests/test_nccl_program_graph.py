"""A rank's per-device program bound as one graph (kinac/rt/comm/program_graph.py), on the CPU:
the fake device (numpy buffers; its "graph" replays the bound calls) and the fake NCCL over the
simulator (tests/nccl_fakes.py). After the first call, a call is the shards' copies into the
bound inputs and the bound calls: no allocation, no check (no plan made), no log append, one
wait; results equal the unsharded entry's and the step-by-step runner's. GPU: the scaling row
of benches/collectives.py and tests/test_nccl_gpu.py."""

from __future__ import annotations

import types
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from nccl_fakes import FakeLib, Handle
from test_nccl_program import compiled_mlp, step

import kinac
from kinac.artifacts.sharded import DeviceProgram, MeshSpec, ParamLayout
from kinac.rt.comm import nccl, program_graph, simulate
from kinac.rt.comm.device_run import HostOps, HostStream
from kinac.rt.comm.execute import collective_step
from kinac.rt.comm.gpu_rank import host_segment
from kinac.tir.graph import TType


class CountingOps(HostOps):
    """The fake device, counting allocations, page-locked buffers, waits and reads."""

    def __init__(self) -> None:
        super().__init__()
        self.allocs = self.waits = self.reads = 0

    def empty(self, shape: tuple[int, ...], dtype: Any, stream: int = 0) -> np.ndarray:
        self.allocs += 1
        return super().empty(shape, dtype, stream)

    def pinned(self, shape: tuple[int, ...], dtype: Any) -> np.ndarray:
        self.allocs += 1
        return super().pinned(shape, dtype)

    def stream(self) -> HostStream:
        ops = self

        class Counted(HostStream):
            def synchronize(self) -> None:
                ops.waits += 1

        return Counted()

    def synchronize(self) -> None:
        self.waits += 1

    def download(self, buf: np.ndarray) -> np.ndarray:
        self.reads += 1
        return super().download(buf)


@pytest.fixture(scope="module")
def mlp1(tmp_path_factory: pytest.TempPathFactory) -> tuple[Any, list[np.ndarray], Any]:
    """The sharded MLP on a mesh of one, its arguments and the unsharded entry (compiled once
    for the module's tests)."""
    tmp = tmp_path_factory.mktemp("mlp1")
    fn, args = compiled_mlp(tmp, 1)
    return fn, args, kinac.compile(str(tmp / "m.kina"), "mlp", cache_dir=str(tmp / "c"))


@pytest.mark.parametrize("graphed", [True, False], ids=["graph", "steps"])
def test_run_nccl_steady_state_is_the_bound_calls_alone(
    mlp1: Any, monkeypatch: pytest.MonkeyPatch, graphed: bool
) -> None:
    """``run_nccl`` in a world of one, three calls on new inputs: each equals the unsharded
    entry within 1e-5; with the graph, calls 2 and 3 make exactly the program's NCCL calls
    (its all-reduce, the outputs' all-gather), allocate nothing, make no plan, log nothing
    into the communicator and wait once; step by step, each call plans its steps' layouts
    again (one wait and one read per call, as before)."""
    from kinac.rt.comm import tcp
    from kinac.rt.comm.distributed import run_nccl
    from kinac.rt.comm.launch import free_port
    from kinac.rt.comm.rendezvous import DistEnv

    monkeypatch.setenv(program_graph.ENV, "1" if graphed else "0")
    fn, args, plain = mlp1
    (program, segments), _ = fn._prepared(*args)
    env = DistEnv(0, 1, 0, "127.0.0.1", free_port(), 10.0)
    monkeypatch.setattr(tcp, "_CLIENT", None)
    nccl.forget_worlds()
    program_graph.forget()
    ops, lib = CountingOps(), FakeLib()
    rng = np.random.default_rng(3)
    segs = [host_segment(s) for s in segments]
    seen: list[Any] = []

    def rank(sim: Any) -> Any:
        lib.sim, lib.mesh = sim, program.mesh
        for _ in range(3):
            new = [rng.standard_normal(a.shape).astype(np.float32) for a in args]
            before = (ops.allocs, ops.waits, ops.reads, len(lib.calls))
            (result,), log = run_nccl(program, segs, new, env, ops, lib)
            world = nccl.world((1,), ("tp",), None)  # the cached world (no rendezvous)
            seen.append(
                (
                    result,
                    plain(*new),
                    log.summary(),
                    [c[0] for c in lib.calls[before[3] :]],
                    (ops.allocs - before[0], ops.waits - before[1], ops.reads - before[2]),
                    world.plans_made,
                    len(world.log),
                )
            )

    try:
        simulate(program.mesh, rank)
    finally:
        nccl.forget_worlds()
        program_graph.forget()
        tcp.close_process_client()
    for result, want, summary, *_ in seen:
        np.testing.assert_allclose(result, want, rtol=1e-5, atol=1e-5)
        assert summary.startswith("1 collectives per device (1 all-reduce over tp)")
    later = seen[1:]
    if graphed:
        assert all(s[3] == ["all_reduce", "all_gather"] for s in later)
        assert [s[4] for s in later] == [(0, 1, 0)] * 2  # no allocation, one wait, no read
        assert seen[0][5] == seen[1][5] == seen[2][5]  # no plan after the first call
        assert seen[0][6] == seen[2][6] == 0  # nothing appended to the communicator's log
    else:
        assert [s[4][1:] for s in later] == [(1, 1)] * 2
        assert all(s[3] == ["all_reduce", "all_gather"] for s in later)


MOVES = [step("all-gather", 1), step("all-to-all", 1, cat=2), step("slice", 2)]


@pytest.mark.parametrize("st", MOVES, ids=lambda s: f"{s.kind}-{s.dim}-{s.concat_dim}")
def test_graph_dim_moves_equal_the_host_runner(st: Any) -> None:
    """A program of one collective step that moves a dim (2-D copies between bound buffers),
    on a dp x tp mesh of fake ranks: each rank's result equals the host runner's on two calls
    with new data, and the second call allocates nothing and makes no plan."""
    mesh = MeshSpec("m", (2, 2), ("dp", "tp"))
    whole = ParamLayout(((), (), ()))
    t = TType("f32", (4, 6, 8))
    program = DeviceProgram(mesh, (("x", t, whole),), ((1, t, whole),), (st,), ())
    m = types.SimpleNamespace(shape=(2, 2), axes=("dp", "tp"))

    def rank(sim: Any) -> list[Any]:
        ops = CountingOps()
        c = nccl.NcclComm(
            FakeLib(sim, m), Handle(sim), (2, 2), ("dp", "tp"), ("dp", "tp"), sim.global_rank,
            alloc=ops.empty,
        )  # fmt: skip
        rng = np.random.default_rng(sim.global_rank)
        oks = []
        pg = None
        for _ in range(2):
            x = rng.standard_normal((4, 6, 8)).astype(np.float32)
            pg = pg or program_graph.ProgramGraph(program, (), c, ops, [x])
            allocs, plans = ops.allocs, c.plans_made
            (glob,) = pg.run([x])  # type: ignore[misc]  # replicated: rank 0's; each rank's in the gather
            want = collective_step(st, x, sim)
            mine = pg.host_out[0][sim.global_rank]
            oks.append(mine.tobytes() == want.tobytes() and glob.shape == want.shape)
        return [oks, (ops.allocs - allocs, c.plans_made - plans), ops.copies]

    got = simulate(m, rank)
    assert all(ok == [True, True] for ok, _, _ in got)
    assert {n for _, n, _ in got} == {(0, 0)}
    assert all(copies > 0 for *_, copies in got) or st.kind == "slice"


def test_launched_gradients_reduce_through_calls_prepared_once() -> None:
    """``kinac train`` under a launch on GPUs: the loss and gradient buffers are the same every
    step, so their all-reduces are prepared once; on two fake ranks each step's buffers become
    the ranks' mean, with exactly one NCCL call per buffer, no plan and no log append."""
    from kinac.train.launched import PreparedReduce

    m = types.SimpleNamespace(shape=(2,), axes=("dp",))

    def rank(sim: Any) -> Any:
        ops, lib = HostOps(), FakeLib(sim, m)
        c = nccl.NcclComm(lib, Handle(sim), (2,), ("dp",), ("dp",), sim.global_rank, ops.empty)
        bufs = (ops.empty((), np.float32), ops.empty((3, 4), np.float32))
        red = PreparedReduce(c, bufs)
        plans, out = c.plans_made, []
        for k in range(3):
            mine = [np.float32(sim.global_rank + k), np.full((3, 4), 2.0 * sim.global_rank)]
            for b, v in zip(bufs, mine, strict=True):
                b[...] = v
            n = len(lib.calls)
            log = red()
            out.append((float(bufs[0]), float(bufs[1][0, 0]), [call[0] for call in lib.calls[n:]]))
            out.append(log.counts())
        return out, c.plans_made - plans, len(c.log)

    for out, plans, logged in simulate(m, rank):
        assert (plans, logged) == (0, 0)
        for k in range(3):
            loss, grad, calls = out[2 * k]
            assert (loss, grad, calls) == (0.5 + k, 1.0, ["all_reduce", "all_reduce"])
            assert out[2 * k + 1] == {("all-reduce", "dp"): 2}


def test_a_failed_first_run_falls_back_to_the_steps_with_a_warning(
    mlp1: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A graph whose first run fails (here its capture) warns once and the call, and every
    later one, runs step by step with the right result."""
    from kinac.rt.comm import tcp
    from kinac.rt.comm.distributed import run_nccl
    from kinac.rt.comm.launch import free_port
    from kinac.rt.comm.rendezvous import DistEnv

    class NoCapture(HostOps):
        def capture(self, sequence: Any, stream: Any, name: str = "") -> Any:
            raise RuntimeError("capture refused")

    monkeypatch.setenv(program_graph.ENV, "1")
    fn, args, plain = mlp1
    want = plain(*args)
    (program, segments), _ = fn._prepared(*args)
    env = DistEnv(0, 1, 0, "127.0.0.1", free_port(), 10.0)
    monkeypatch.setattr(tcp, "_CLIENT", None)
    nccl.forget_worlds()
    ops, lib = NoCapture(), FakeLib()
    segs = [host_segment(s) for s in segments]

    def rank(sim: Any) -> Any:
        lib.sim, lib.mesh = sim, program.mesh
        with pytest.warns(program_graph.ProgramGraphWarning, match="capture refused"):
            first = run_nccl(program, segs, args, env, ops, lib)[0][0]
        second = run_nccl(program, segs, args, env, ops, lib)[0][0]
        return first, second

    try:
        ((first, second),) = simulate(program.mesh, rank)
    finally:
        nccl.forget_worlds()
        tcp.close_process_client()
    np.testing.assert_allclose(first, want, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(second, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("n", [2, 4])
def test_graph_on_fake_ranks_slices_and_assembles_like_the_simulator(
    tmp_path: Path, n: int
) -> None:
    """The sharded MLP bound as one graph on every rank of a mesh of ``n`` (the weights'
    slices taken at bind time, the outputs placed by the slices worked out then): twice,
    the simulator's result on every rank, bit for bit."""
    fn, args = compiled_mlp(tmp_path, n)
    want = fn(*args)
    (program, segments), _ = fn._prepared(*args)
    mesh = program.mesh

    def rank(sim: Any) -> Any:
        ops = HostOps()
        axes = tuple(mesh.axes)
        comm = nccl.NcclComm(
            FakeLib(sim, mesh), Handle(sim), tuple(mesh.shape), axes, axes, sim.global_rank,
            alloc=ops.empty,
        )  # fmt: skip
        pg = program_graph.ProgramGraph(program, segments, comm, ops, args)
        return [pg.run(args)[0].tobytes() for _ in range(2)]  # type: ignore[index]

    for got in simulate(mesh, rank):
        assert got == [want.tobytes()] * 2
