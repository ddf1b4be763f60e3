"""The GPU rank's path (kinac/rt/comm/gpu_rank.py: StagedComm over the NCCL Communicator) runs a
real per-device program on the CPU with a fake device (numpy) and a fake NCCL whose
collectives are the simulator's: the sharded MLP on meshes of 2 and 4 gives bit-identical
outputs to the simulator, with the same collectives logged, and the NCCL calls receive the
ops and buffers the protocol says (every call reaches the fake as NCCL's method). A real run
needs GPUs (tests/test_nccl_backend.py, gpu)."""

from __future__ import annotations

import types
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import kinac
import kinac.cli
from kinac.rt.comm import nccl, simulate
from kinac.rt.comm.execute import run_program
from kinac.rt.comm.gpu_rank import StagedComm, device_dtype, host_segment
from kinac.rt.comm.layout import shard_global

SOURCE = """(mesh tp [2])
(defn mlp [(x : (tensor f32 [N D]))
           (w1 : (tensor f32 [D F] @sharded(axis=1, mesh=tp)))
           (w2 : (tensor f32 [F D] @sharded(axis=0, mesh=tp)))]
  -> (tensor f32 [N D])
  (matmul (relu (matmul x w1)) w2))
"""


class NumpyIO:
    """A fake device: buffers are numpy arrays (copies, as uploads are)."""

    def __init__(self) -> None:
        self.copies = 0

    def empty(self, shape: tuple[int, ...], dtype: Any) -> np.ndarray:
        return np.empty(shape, dtype)

    def upload(self, a: np.ndarray) -> np.ndarray:
        self.copies += 1
        return a.copy()

    def download(self, b: np.ndarray) -> np.ndarray:
        self.copies += 1
        return b.copy()

    def synchronize(self) -> None:
        pass


class SimNccl:
    """nccl4py's Communicator methods over a simulator rank (the op enum mapped back)."""

    def __init__(self, sim: Any, calls: list[Any]) -> None:
        self.sim, self.calls = sim, calls

    def _op(self, op: Any) -> str:
        return {v: k for k, v in nccl.NCCL_OPS.items()}[op.name]

    def allreduce(self, s: Any, r: Any, op: Any, *, stream: Any = None) -> None:
        self.calls.append(("allreduce", op.name))
        self.sim.all_reduce(s, r, self._op(op))

    def allgather(self, s: Any, r: Any, *, stream: Any = None) -> None:
        self.calls.append(("allgather",))
        self.sim.all_gather(s, r)

    def reduce_scatter(self, s: Any, r: Any, op: Any, *, stream: Any = None) -> None:
        self.calls.append(("reduce_scatter", op.name))
        self.sim.reduce_scatter(s, r, self._op(op))

    def alltoall(self, s: Any, r: Any, *, stream: Any = None) -> None:
        self.calls.append(("alltoall",))
        self.sim.all_to_all(s, r)


OPS = types.SimpleNamespace(**{v: types.SimpleNamespace(name=v) for v in nccl.NCCL_OPS.values()})


@pytest.mark.parametrize("n", [2, 4])
def test_sharded_mlp_through_staged_nccl_equals_the_simulator(tmp_path: Path, n: int) -> None:
    (tmp_path / "m.kina").write_text(SOURCE)
    fn = kinac.compile(str(tmp_path / "m.kina"), "mlp", mesh=n, cache_dir=str(tmp_path / "c"))
    rng = np.random.default_rng(5)
    args = [rng.standard_normal(s).astype(np.float32) for s in ((8, 4), (4, 8), (8, 4))]
    want = fn(*args)
    (program, segments), _ = fn._prepared(*args)
    mesh = program.mesh
    calls: list[list[Any]] = [[] for _ in range(n)]
    ios = [NumpyIO() for _ in range(n)]
    core = types.SimpleNamespace(NcclRedOp=OPS)

    def rank(sim: Any) -> Any:
        r = sim.global_rank
        inner = nccl.NcclComm(
            core,
            SimNccl(sim, calls[r]),
            tuple(mesh.shape),
            tuple(mesh.axes),
            tuple(mesh.axes),
            r,
            alloc=ios[r].empty,
        )
        comm = StagedComm(inner, ios[r])
        local = [
            shard_global(a, lay, mesh, r)
            for a, (_, _, lay) in zip(args, program.params, strict=True)
        ]
        outs = run_program(program, [host_segment(s) for s in segments], comm, local)
        return outs, comm.log

    got = simulate(mesh, rank)
    from kinac.rt.comm.layout import assemble

    out = assemble([g[0][0] for g in got], program.outputs[0][2], mesh)
    assert out.tobytes() == want.tobytes()
    assert all(c == [("allreduce", "SUM")] for c in calls)  # Megatron: one all-reduce
    assert [(e.kind, e.axis) for e in got[0][1]] == [("all-reduce", "tp")]
    assert ios[0].copies == 2  # the staging's two copies per collective (docs/distributed.md)


def test_device_dtype_names() -> None:
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
    pytest.importorskip("nccl.core")
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
    p = subprocess.run(
        [
            sys.executable,
            "-m",
            "kinac",
            "launch",
            "-n",
            "2",
            "--",
            "kinac",
            "run",
            str(ws),
            "mlp",
            "--distributed",
            "--target",
            "cuda",
            "--save",
            str(dist),
        ],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=root,
    )
    assert p.returncode == 0, p.stderr
    np.testing.assert_allclose(np.load(dist)["arr_0"], np.load(sim)["arr_0"], rtol=1e-5, atol=1e-5)
