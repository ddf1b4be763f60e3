"""A world of one rank on one GPU, for real: NCCL through nccl4py's bindings (all marked gpu).

Every collective on device buffers equals the simulator's result (f32, bf16, i32; the
reductions; a communicator split off a 1x1 mesh), the dim moves of the device-resident path
(cuMemcpy2DAsync) equal numpy's, collectives captured in a CUDA graph replay on new data,
and the sharded transformer block on a mesh of one through ``kinac.compile(target='cuda',
mesh=1)`` under a launch's environment (so: the NCCL backend, device-resident) equals the
unsharded GPU block within 1e-5. Run by ``scripts/gpu.sh`` (``pytest -m gpu``); the same
rendezvous and world as ``kinac launch -n 1``.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from kinac.rt.comm import nccl, simulate

pytestmark = pytest.mark.gpu


def _gpu_or_skip() -> Any:
    if shutil.which("nvidia-smi") is None:
        pytest.skip("no NVIDIA GPU")
    from kinac.rt import cuda

    if not cuda.available():
        pytest.skip(f"no CUDA: {cuda.unavailable_reason()}")
    try:
        nccl.nccl_lib()
    except Exception as e:  # noqa: BLE001 - the reason is the skip message
        pytest.skip(str(e))
    return cuda


@pytest.fixture(scope="module")
def world() -> Iterator[tuple[Any, Any, Any]]:
    """This process as rank 0 of a launch of one (the environment ``kinac launch -n 1``
    sets), its rendezvous, and the mesh's NCCL communicator on GPU 0."""
    cuda = _gpu_or_skip()
    from kinac.rt.comm import tcp
    from kinac.rt.comm.device_run import CudaOps
    from kinac.rt.comm.launch import free_port
    from kinac.rt.comm.rendezvous import DistEnv

    env = {"RANK": "0", "LOCAL_RANK": "0", "WORLD_SIZE": "1", "LOCAL_WORLD_SIZE": "1"}
    env |= {"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(free_port())}
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    cuda.get_device(0)
    ops = CudaOps()
    nccl.forget_worlds()
    client = tcp.process_client(DistEnv.from_env())
    try:
        yield nccl.world((1,), ("tp",), client, alloc=ops.empty), ops, cuda
    finally:
        nccl.forget_worlds()
        tcp.close_process_client()
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


CASES = [
    ("all_reduce", "sum", np.float32),
    ("all_reduce", "max", np.int32),
    ("all_reduce", "avg", np.float32),
    ("all_reduce", "sum", np.uint16),  # bf16
    ("all_gather", None, np.float32),
    ("reduce_scatter", "sum", np.float32),
    ("all_to_all", None, np.float32),
    ("all_to_all", None, np.uint16),
]


@pytest.mark.parametrize(("method", "op", "dtype"), CASES)
def test_each_collective_on_device_equals_the_simulator(
    world: tuple[Any, Any, Any], method: str, op: str | None, dtype: Any
) -> None:
    comm, ops, cuda = world
    rng = np.random.default_rng(3)
    x = (rng.standard_normal((64, 33)) * 8).astype(np.float32)
    x = (x.view(np.uint32) >> 16).astype(np.uint16) if dtype == np.uint16 else x.astype(dtype)
    kw = {} if op is None else {"op": op}
    d = ops.upload(x)
    got = getattr(comm, method)(d, **kw)
    cuda.current_device().synchronize()
    (want,) = simulate(_mesh((1,), ("tp",)), lambda s: getattr(s, method)(x, **kw))
    host = ops.download(got)
    assert host.shape == want.shape and host.tobytes() == want.tobytes()


def _mesh(shape: tuple[int, ...], axes: tuple[str, ...]) -> Any:
    from kinac.artifacts.sharded import MeshSpec

    return MeshSpec("m", shape, axes)


def test_split_communicator_of_a_one_by_one_mesh(world: tuple[Any, Any, Any]) -> None:
    """ncclCommSplit for real: the world of a 1x1 dp x tp mesh split along tp, then used."""
    comm, ops, cuda = world
    from kinac.rt.comm.tcp import process_client

    grid = nccl.world((1, 1), ("dp", "tp"), process_client(), alloc=ops.empty)
    tp = grid.sub("tp")
    assert grid.sub("tp") is tp and (tp.rank, tp.size, tp.axis) == (0, 1, "tp")
    x = np.arange(10, dtype=np.float32)
    got = tp.all_reduce(ops.upload(x))
    grid.barrier()
    cuda.current_device().synchronize()
    assert ops.download(got).tobytes() == x.tobytes()


@pytest.mark.parametrize(("shape", "dim"), [((6, 4, 5), 1), ((64, 3, 2), 1), ((4, 8), 0)])
def test_device_dim_moves_equal_numpy(
    world: tuple[Any, Any, Any], shape: tuple[int, ...], dim: int
) -> None:
    from kinac.rt.comm.device_run import move_back, move_front, take

    _, ops, cuda = world
    x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
    d = ops.upload(x)
    front = move_front(d, dim, ops)
    back = move_back(front, dim, ops)
    part = take(d, dim, 1, 2, ops)
    cuda.current_device().synchronize()
    assert ops.download(front).tobytes() == np.ascontiguousarray(np.moveaxis(x, dim, 0)).tobytes()
    assert ops.download(back).tobytes() == x.tobytes()
    assert ops.download(part).tobytes() == np.ascontiguousarray(np.take(x, [1, 2], dim)).tobytes()


def _each_run_passes_new_data(
    run: Callable[[], Any], seeds: range, n: int, x: Any, out: Any, stream: Any, ops: Any
) -> None:
    """Per seed: new random data in ``x``, ``run()`` (the calls eager, or their graph's
    replay), ``stream`` synced; ``out`` holds ``x``'s data bit for bit (on a mesh of one each
    collective here passes its input through)."""
    for k in seeds:
        want = np.random.default_rng(k).standard_normal(n).astype(np.float32)
        x.copy_from_host(want)
        run()
        stream.synchronize()
        assert ops.download(out).tobytes() == want.tobytes()


def test_collectives_captured_in_a_cuda_graph_replay(world: tuple[Any, Any, Any]) -> None:
    """All-reduce, all-gather, all-to-all and the device barrier captured on one stream into
    one CUDA graph; each replay computes from the inputs' current contents."""
    comm, ops, cuda = world
    n = 1 << 16
    x = ops.upload(np.zeros(n, np.float32))
    r, g, a = ops.empty((n,), "float32"), ops.empty((n,), "float32"), ops.empty((n,), "float32")
    stream = cuda.Stream()

    def seq(s: Any) -> None:
        comm.all_reduce(x, r, "sum", stream=s)
        comm.all_gather(r, g, stream=s)
        comm.all_to_all(g, a, stream=s)
        comm.barrier(stream=s)

    seq(stream)  # warm up outside the capture (NCCL's lazy connection setup)
    stream.synchronize()
    graph = cuda.capture(seq, stream, name="nccl")
    assert graph.captured, graph.fallback_reason
    assert graph.num_nodes != 0
    _each_run_passes_new_data(graph.replay, range(3), n, x, a, stream, ops)
    graph.close()


def test_sharded_block_on_a_mesh_of_one_through_nccl_equals_the_unsharded(
    world: tuple[Any, Any, Any], tmp_path: Path
) -> None:
    """``kinac.compile(target='cuda', mesh=1)`` under the launch environment picks NCCL and
    runs the Megatron block's program device-resident: the unsharded GPU block's result."""
    from test_shard_propagate import MEGATRON, annotated_block
    from test_simulate_transformer import DIMS, _inputs

    import kinac

    _, _, _ = world
    cache = str(tmp_path / "cache")
    plain = annotated_block(tmp_path / "p", {})
    sharded = annotated_block(tmp_path / "s", MEGATRON, "(mesh tp [1])")
    want = kinac.compile(plain, "block_small", target="cuda", cache_dir=cache)(*_inputs(), **DIMS)
    want = np.asarray(want.numpy() if hasattr(want, "numpy") else want)
    fn = kinac.compile(sharded, "block_small", target="cuda", mesh=1, cache_dir=cache)
    assert fn.backend == "nccl"
    got = fn(*_inputs(), **DIMS)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    assert fn.last_log.counts() == {("all-reduce", "tp"): 2}  # Megatron's two, through NCCL
    # the steady state: the program bound once, captured as one CUDA graph (kernels, both
    # all-reduces, the copies in and out), replayed on new inputs; equal to step by step
    from kinac.rt.comm import program_graph

    single = kinac.compile(plain, "block_small", target="cuda", cache_dir=cache)
    for scale in (0.5, 2.0):
        args = [a * np.float32(scale) if i == 0 else a for i, a in enumerate(_inputs())]
        want = single(*args, **DIMS)
        want = np.asarray(want.numpy() if hasattr(want, "numpy") else want)
        np.testing.assert_allclose(fn(*args, **DIMS), want, rtol=1e-5, atol=1e-5)
        assert fn.last_log.counts() == {("all-reduce", "tp"): 2}
    assert program_graph.last_fallback_reason == ""  # why it ran step by step, if it did
    (pg,) = [
        g
        for _, g in program_graph._GRAPHS.values()
        if g is not None and g.program is fn.last_program
    ]
    assert pg.graph.captured and pg.replays == 2, pg.graph.fallback_reason
    os.environ[program_graph.ENV] = "0"
    try:
        np.testing.assert_allclose(fn(*args, **DIMS), want, rtol=1e-5, atol=1e-5)
    finally:
        del os.environ[program_graph.ENV]


@pytest.mark.parametrize(
    ("kind", "dim", "cat"),
    [("all-gather", 1, -1), ("reduce-scatter", 2, -1), ("all-to-all", 1, 2), ("slice", 1, -1)],
)
def test_device_collective_steps_equal_the_host_runners(
    world: tuple[Any, Any, Any], kind: str, dim: int, cat: int
) -> None:
    """A program's collective steps on device buffers (dim moves, NCCL, the concatenation of
    an all-to-all along another dim) give the host runner's bytes."""
    from kinac.artifacts.sharded import Collective
    from kinac.rt.comm.device_run import device_collective
    from kinac.rt.comm.execute import collective_step

    comm, ops, cuda = world
    st = Collective(kind, "tp", 0, 1, dim, "sum", 0, "m.kina:1:1", "test", cat)
    x = np.random.default_rng(2).standard_normal((4, 6, 8)).astype(np.float32)
    got = device_collective(st, ops.upload(x), comm, ops)
    cuda.current_device().synchronize()
    (want,) = simulate(_mesh((1,), ("tp",)), lambda s: collective_step(st, x, s))
    assert ops.download(got).tobytes() == want.tobytes()


def test_cached_calls_on_device_reuse_the_plan_and_refuse_host_memory(
    world: tuple[Any, Any, Any],
) -> None:
    """The per-layout cache on real buffers: new data in the same buffers gives new results
    with one plan per layout; a host tensor of the cached layout is refused before NCCL."""
    comm, ops, cuda = world
    x, r = ops.empty((256, 4), "float32"), ops.empty((256, 4), "float32")
    made = 0
    for k in range(3):
        want = np.random.default_rng(k).standard_normal((256, 4)).astype(np.float32)
        x.copy_from_host(want)
        assert comm.all_reduce(x, r, "max") is r
        cuda.current_device().synchronize()
        assert ops.download(r).tobytes() == want.tobytes()
        made = made or comm.plans_made  # after the first call, no new plan
    assert comm.plans_made == made
    from kinac.errors import KinaRuntimeError

    with pytest.raises(KinaRuntimeError, match="receive buffer is host memory"):
        comm.all_reduce(x, cuda.Tensor.host(np.zeros((256, 4), np.float32)), "max")
    del comm.log[:]


def test_prepared_collectives_eager_and_captured(world: tuple[Any, Any, Any]) -> None:
    """Prepared calls (checks at bind time, each call the binding's alone) on a non-default
    stream: eager on new data each time, then captured into one CUDA graph and replayed; the
    barrier's buffer made on that stream; nothing logged."""
    comm, ops, cuda = world
    n = 1 << 16
    x = ops.upload(np.zeros(n, np.float32))
    r, g, a = ops.empty((n,), "float32"), ops.empty((n,), "float32"), ops.empty((n,), "float32")
    stream = cuda.Stream()
    calls = [
        comm.prepare("all-reduce", x, r, "sum", stream=stream),
        comm.prepare("all-gather", r, g, stream=stream),
        comm.prepare("reduce-scatter", g, a, "max", stream=stream),
        comm.prepare("all-to-all", a, r, stream=stream),
        comm.prepare("barrier", stream=stream),
    ]
    logged = len(comm.log)

    def seq(_: Any = None) -> None:
        for p in calls:
            p()

    _each_run_passes_new_data(seq, range(2), n, x, r, stream, ops)  # eager
    graph = cuda.capture(seq, stream, name="nccl-prepared")
    assert graph.captured, graph.fallback_reason
    _each_run_passes_new_data(graph.replay, range(2, 4), n, x, r, stream, ops)
    graph.close()
    assert len(comm.log) == logged


def test_launched_training_steps_reduce_prepared_and_equal_the_plain_trainer(
    world: tuple[Any, Any, Any], tmp_path: Path
) -> None:
    """``kinac train`` under a launch of one on the GPU: the entry writes its loss and
    gradients into buffers made once and their all-reduces are prepared once (no eager
    NCCL call per gradient); the losses equal the plain trainer's."""
    from kinac.train import Trainer

    root = Path(__file__).resolve().parent.parent / "workspaces" / "decoder"
    cache = str(tmp_path / "cache")
    launched = Trainer(root, "decoder_1m", target="cuda", cache_dir=cache)
    got = [r.loss for r in launched.run(3)]
    assert launched.parallel._reduce is not None
    assert launched.parallel.log.counts()[("all-reduce", "dp")] == 1 + len(
        launched.parallel._entry.wrt
    )
    size = os.environ.pop("WORLD_SIZE")
    try:
        want = [r.loss for r in Trainer(root, "decoder_1m", target="cuda", cache_dir=cache).run(3)]
    finally:
        os.environ["WORLD_SIZE"] = size
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
