"""The NCCL path's device-resident run of a per-device program (kinac/rt/comm/device_run.py)
on the CPU: a fake device (numpy buffers, addresses; the same 2-D copy arithmetic as
cuMemcpy2DAsync) and a fake ``nccl.bindings.nccl`` over the simulator (tests/nccl_fakes.py).
The dim moves against numpy, every collective step on every dim against the host runner's
(execute.collective_step), the sharded MLP on meshes of 2 and 4 bit-identical to the
simulator with no copy at all, and ``run_nccl`` (the rendezvous, the world, the outputs'
gather) in a world of one. Real GPUs: tests/test_nccl_gpu.py and the 2-GPU launch test here."""

from __future__ import annotations

import types
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from nccl_fakes import FakeLib, Handle

import kinac
import kinac.cli
from kinac.artifacts.sharded import Collective
from kinac.rt.comm import device_run, nccl, simulate
from kinac.rt.comm.device_run import HostOps, move_back, move_front, run_device_program, take
from kinac.rt.comm.execute import collective_step
from kinac.rt.comm.gpu_rank import device_dtype, device_segment, host_segment
from kinac.rt.comm.layout import assemble, shard_global

SOURCE = """(mesh tp [2])
(defn mlp [(x : (tensor f32 [N D]))
           (w1 : (tensor f32 [D F] @sharded(axis=1, mesh=tp)))
           (w2 : (tensor f32 [F D] @sharded(axis=0, mesh=tp)))]
  -> (tensor f32 [N D])
  (matmul (relu (matmul x w1)) w2))
"""


@pytest.mark.parametrize(
    ("shape", "dim"),
    [((6, 4), 0), ((6, 4), 1), ((2, 8, 3), 1), ((8, 2, 3), 1), ((3, 4, 5, 2), 2), ((1, 1, 6), 2)],
)
def test_dim_moves_and_slices_match_numpy(shape: tuple[int, ...], dim: int) -> None:
    ops = HostOps()
    x = np.random.default_rng(1).standard_normal(shape).astype(np.float32)
    front = move_front(x, dim, ops)
    assert (front is x) == (dim == 0)  # dim 0: the buffer itself, no view built per step
    assert front.tobytes() == np.ascontiguousarray(np.moveaxis(x, dim, 0)).tobytes()
    assert move_back(front, dim, ops).tobytes() == x.tobytes()
    p, s = int(np.prod(shape[:dim])), shape[dim]
    assert ops.copies == (0 if p == 1 else 2 * min(p, s))  # none when nothing precedes dim
    half = take(x, dim, s // 2, s - s // 2, ops)
    assert half.tobytes() == np.ascontiguousarray(np.take(x, range(s // 2, s), dim)).tobytes()


def step(kind: str, dim: int, op: str = "sum", cat: int = -1) -> Collective:
    return Collective(kind, "tp", 0, 1, dim, op, 0, "m.kina:1:1", "test", cat)


STEPS = [
    step("all-reduce", -1),
    step("all-reduce", -1, "max"),
    *(
        step(k, d)
        for k in ("all-gather", "reduce-scatter", "all-to-all", "slice")
        for d in (0, 1, 2)
    ),
    step("all-to-all", 1, cat=2),  # concatenates along another dim than it splits
    step("all-to-all", 2, cat=0),
    step("all-to-all", 0, cat=1),
]


@pytest.mark.parametrize("st", STEPS, ids=lambda s: f"{s.kind}-{s.dim}-{s.concat_dim}")
def test_device_steps_equal_the_host_runners(st: Collective) -> None:
    """On a dp x tp mesh, each step on the device path gives the host runner's bytes."""
    m = types.SimpleNamespace(shape=(2, 2), axes=("dp", "tp"))

    def rank(sim: Any) -> list[Any]:
        x = np.random.default_rng(sim.global_rank).standard_normal((4, 6, 8)).astype(np.float32)
        ops = HostOps()
        c = nccl.NcclComm(
            FakeLib(sim, m),
            Handle(sim),
            (2, 2),
            ("dp", "tp"),
            ("dp", "tp"),
            sim.global_rank,
            alloc=ops.empty,
        )
        got = device_run.device_collective(st, x, c, ops)
        want = collective_step(st, x, sim)
        return [got.shape == want.shape and got.tobytes() == want.tobytes(), ops.copies]

    got = simulate(m, rank)
    assert all(ok for ok, _ in got)
    copies = {n for _, n in got}  # the 2-D copies of the dim moves (none at dim 0)
    if st.kind == "all-reduce" or (st.dim == 0 and st.concat_dim in (-1, 0)):
        assert copies == {0}


def compiled_mlp(tmp_path: Path, n: int) -> tuple[Any, list[np.ndarray]]:
    (tmp_path / "m.kina").write_text(SOURCE)
    fn = kinac.compile(str(tmp_path / "m.kina"), "mlp", mesh=n, cache_dir=str(tmp_path / "c"))
    rng = np.random.default_rng(5)
    args = [rng.standard_normal(s).astype(np.float32) for s in ((8, 4), (4, 8), (8, 4))]
    return fn, args


@pytest.mark.parametrize("n", [2, 4])
def test_sharded_mlp_device_resident_equals_the_simulator(tmp_path: Path, n: int) -> None:
    fn, args = compiled_mlp(tmp_path, n)
    want = fn(*args)
    (program, segments), _ = fn._prepared(*args)
    mesh = program.mesh
    libs: list[Any] = [None] * n
    opss = [HostOps() for _ in range(n)]

    def rank(sim: Any) -> Any:
        r = sim.global_rank
        libs[r] = FakeLib(sim, mesh)
        axes = tuple(mesh.axes)
        comm = nccl.NcclComm(
            libs[r], Handle(sim), tuple(mesh.shape), axes, axes, r, alloc=opss[r].empty
        )
        local = [
            shard_global(a, lay, mesh, r)
            for a, (_, _, lay) in zip(args, program.params, strict=True)
        ]
        outs = run_device_program(program, segments, comm, local, opss[r])
        return outs, comm.log

    got = simulate(mesh, rank)
    out = assemble([g[0][0] for g in got], program.outputs[0][2], mesh)
    assert out.tobytes() == want.tobytes()
    # Megatron: one all-reduce, f32 sum, straight on the segment's buffer; no copy at all
    assert all([c[0] for c in lib.calls] == ["all_reduce"] for lib in libs)
    assert all(c[4:6] == (7, 0) for lib in libs for c in lib.calls)
    assert [(e.kind, e.axis) for e in got[0][1]] == [("all-reduce", "tp")]
    assert sum(o.copies for o in opss) == 0
    # the same call site, other row counts: the argument types are remembered by form
    # (kinac/api_sharded_types.py), so a stale one would run another shape's program
    for rows in (16, 8) if n == 2 else ():
        x = np.random.default_rng(rows).standard_normal((rows, 4)).astype(np.float32)
        np.testing.assert_allclose(
            fn(x, *args[1:]), np.maximum(x @ args[1], 0) @ args[2], rtol=1e-5, atol=1e-5
        )


def test_run_nccl_in_a_world_of_one(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The NCCL path end to end on the CPU: the rendezvous of one rank, the world made from its
    unique id, the program device-resident, the outputs gathered: the unsharded result."""
    from kinac.rt.comm import tcp
    from kinac.rt.comm.distributed import run_nccl
    from kinac.rt.comm.launch import free_port
    from kinac.rt.comm.rendezvous import DistEnv

    fn, args = compiled_mlp(tmp_path, 1)
    want = kinac.compile(str(tmp_path / "m.kina"), "mlp", cache_dir=str(tmp_path / "c"))(*args)
    (program, segments), _ = fn._prepared(*args)
    env = DistEnv(0, 1, 0, "127.0.0.1", free_port(), 10.0)
    monkeypatch.setattr(tcp, "_CLIENT", None)
    monkeypatch.setenv("KINAC_PROGRAM_GRAPH", "0")  # step by step (one graph: _graph's tests)
    nccl.forget_worlds()
    libs: list[Any] = []

    class Counting(HostOps):  # the host waits once, and reads only the gathered output
        waits = reads = 0

        def synchronize(self) -> None:
            Counting.waits += 1

        def download(self, buf: np.ndarray) -> np.ndarray:
            Counting.reads += 1
            return super().download(buf)

    def rank(sim: Any) -> Any:
        libs.append(FakeLib(sim, program.mesh))
        segs = [host_segment(s) for s in segments]
        return run_nccl(program, segs, args, env, Counting(), libs[0])

    try:
        ((result, log),) = simulate(program.mesh, rank)
    finally:
        nccl.forget_worlds()
        tcp.close_process_client()
    np.testing.assert_allclose(result[0], want, rtol=1e-5, atol=1e-5)
    calls = [c[0] for c in libs[0].calls]  # destroyed by forget_worlds
    assert calls == ["get_unique_id", "init", "all_reduce", "all_gather", "destroy"]
    assert log.summary().startswith("1 collectives per device (1 all-reduce over tp)")
    assert (Counting.waits, Counting.reads) == (1, 1)


def test_segment_wrappers_and_device_dtype_names() -> None:
    def seg(*a: Any) -> Any:
        return a

    assert device_segment(host_segment(seg)) is seg and device_segment(seg) is seg
    assert device_dtype(np.dtype(np.uint16)) == "bfloat16"
    assert device_dtype(np.float32) == "float32"
    assert device_dtype(types.SimpleNamespace(name="bfloat16")) == "bfloat16"


@pytest.mark.gpu
def test_two_gpus_run_the_mlp_like_the_simulator(tmp_path: Path) -> None:  # pragma: no cover
    """`kinac launch -n 2 -- kinac run ... --distributed --target cuda` (NCCL, one GPU per
    rank) against `--simulate 2` on the host, within 1e-5."""
    import shutil
    import subprocess
    import sys

    if shutil.which("nvidia-smi") is None:
        pytest.skip("no NVIDIA GPU")
    gpus = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True).stdout.count("GPU ")
    if gpus < 2:
        pytest.skip("needs 2 GPUs")
    pytest.importorskip("nccl.bindings.nccl")
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "kina.toml").write_text(
        '[workspace]\nname = "g"\n\n[[entry]]\nname = "mlp"\ndefn = "mlp"\n'
        "dims = { N = 64, D = 128, F = 256 }\n"
    )
    (ws / "m.kina").write_text(SOURCE)
    root = Path(__file__).resolve().parents[1]
    sim, dist = tmp_path / "sim.npz", tmp_path / "dist.npz"
    assert kinac.cli.main(["run", str(ws), "mlp", "--simulate", "2", "--save", str(sim)]) == 0
    cmd = [sys.executable, "-m", "kinac", "launch", "-n", "2", "--", "kinac", "run", str(ws)]
    cmd += ["mlp", "--distributed", "--target", "cuda", "--save", str(dist)]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=600, cwd=root)
    assert p.returncode == 0, p.stderr
    np.testing.assert_allclose(np.load(dist)["arr_0"], np.load(sim)["arr_0"], rtol=1e-5, atol=1e-5)
