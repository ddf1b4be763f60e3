"""Issue 13's must-shows on 2 and 4 GPUs: real ranks (``kinac launch -n N``), NCCL between them.

Each test skips unless this machine has at least its N GPUs (``nvidia-smi -L``) and nccl4py's
bindings import; ``scripts/multi_gpu.sh`` runs them on a lent ``nvidia-h200-x2``/``-x4`` (and
``pytest -m gpu`` does too). What they pin down, each against the same inputs (the block's
at unit scale, ``--inputs``; the trainer's from ``--seed``):

- the sharded transformer block (``block_small``, f32) in tensor parallel (Megatron's weight
  annotations over ``(mesh tp [N])``), data parallel (the batch over ``tp``) and, on 4 GPUs,
  2x2 (``(mesh grid [2 2] :axes [dp tp])``): ``kinac launch -n N -- kinac run ...
  --distributed --target cuda`` (one GPU per rank, device-resident, NCCL) equal within 1e-5 to
  the unsharded block on one GPU and to ``--simulate`` (the threaded simulator on the host);
- a training step of ``decoder_1m`` (``kinac launch -n N -- kinac train ... --target cuda``:
  data parallel, the gradients averaged by NCCL) equal to ``--simulate N``'s loss for loss,
  within 1e-5 relative, and to one GPU's.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from test_shard_propagate import GRID, MEGATRON, annotated_block
from test_simulate_transformer import _inputs

pytestmark = pytest.mark.gpu

ROOT = Path(__file__).resolve().parents[1]
DECODER = ROOT / "workspaces" / "decoder"


def _gpus() -> int:
    if shutil.which("nvidia-smi") is None:
        return 0
    out = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True).stdout
    return out.count("GPU ")


def _need(n: int) -> None:
    if _gpus() < n:
        pytest.skip(f"needs {n} GPUs (this machine has {_gpus()})")
    pytest.importorskip("nccl.bindings.nccl")


def _env() -> dict[str, str]:
    """This process's environment without a launch's variables (the test is not a rank)."""
    drop = ("WORLD_SIZE", "RANK", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")
    env = {k: v for k, v in os.environ.items() if k not in drop}
    env.setdefault("NCCL_NVLS_ENABLE", "0")  # NVLink multicast off (KINDS.md)
    return env


def _kinac(args: list[str], n: int = 0, timeout: int = 600) -> subprocess.CompletedProcess[str]:
    """``kinac ARGS``, under ``kinac launch -n N`` when ``n``; its exit status checked."""
    cmd = [sys.executable, "-m", "kinac"]
    if n:
        cmd += ["launch", "-n", str(n), "--timeout", "300", "--", "kinac"]
    p = subprocess.run(
        [*cmd, *args], capture_output=True, text=True, timeout=timeout, cwd=ROOT, env=_env()
    )
    assert p.returncode == 0, f"{' '.join(args)}:\n{p.stdout[-3000:]}\n{p.stderr[-3000:]}"
    assert "Traceback" not in p.stderr
    return p


LAYOUTS = {  # name -> (GPUs, annotations, mesh declaration)
    "tp2": (2, MEGATRON, "(mesh tp [2])"),
    "dp2": (2, {"x": "@sharded(axis=0, mesh=tp)"}, "(mesh tp [2])"),
    "tp4": (4, MEGATRON, "(mesh tp [4])"),
    "dp4": (4, {"x": "@sharded(axis=0, mesh=tp)"}, "(mesh tp [4])"),
    "2x2": (
        4,
        {
            **{k: v.replace("mesh=tp", "mesh=grid, over=tp") for k, v in MEGATRON.items()},
            "x": "@sharded(axis=0, mesh=grid, over=dp)",
        },
        GRID,
    ),
}


@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_sharded_block_on_gpus_equals_one_gpu_and_the_simulator(
    layout: str, tmp_path: Path
) -> None:
    n, annotations, mesh = LAYOUTS[layout]
    _need(n)
    cache = str(tmp_path / "cache")
    ws = annotated_block(tmp_path / "sharded", annotations, mesh)
    plain = annotated_block(tmp_path / "plain", {})
    files = {k: tmp_path / f"{k}.npz" for k in ("one", "sim", "dist")}
    names = ["x", "wn1", "wq", "wk", "wv", "wo", "wn2", "wg", "wu", "wd"]
    np.savez(tmp_path / "in.npz", **dict(zip(names, _inputs(), strict=True)))  # type: ignore[arg-type]  # unit scale
    common = ["block_small", "--inputs", str(tmp_path / "in.npz"), "--repeat", "1"]
    common += ["--cache-dir", cache]
    _kinac(["run", str(plain), *common, "--target", "cuda", "--save", str(files["one"])])
    _kinac(["run", str(ws), *common, "--simulate", "--save", str(files["sim"])])
    p = _kinac(
        [
            "run",
            str(ws),
            *common,
            "--distributed",
            "--target",
            "cuda",
            "--save",
            str(files["dist"]),
        ],
        n=n,
    )
    one, sim, dist = (np.load(files[k])["arr_0"] for k in ("one", "sim", "dist"))
    assert dist.shape == one.shape == sim.shape and dist.dtype == np.float32
    np.testing.assert_allclose(dist, one, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(dist, sim, rtol=1e-5, atol=1e-5)
    print(
        f"{layout}: max |dist - one| {np.max(np.abs(dist - one)):.2e}, "
        f"max |dist - sim| {np.max(np.abs(dist - sim)):.2e}\n{p.stdout[-600:]}"
    )


def _losses(out: str) -> list[float]:
    events = [json.loads(x) for x in out.splitlines() if x.startswith("{")]
    return [float(e["loss"]) for e in events if e.get("event") == "step"]


@pytest.mark.parametrize("n", [2, 4])
def test_training_step_on_gpus_equals_the_simulator(n: int, tmp_path: Path) -> None:
    _need(n)
    cache = str(tmp_path / "cache")
    argv = ["train", str(DECODER), "decoder_1m", "--steps", "2", "--json", "--cache-dir", cache]
    sim = _losses(_kinac([*argv, "--simulate", str(n)]).stdout)
    one = _losses(_kinac([*argv, "--target", "cuda"]).stdout)
    dist = _losses(_kinac([*argv, "--target", "cuda"], n=n).stdout)  # rank 0 prints
    assert len(sim) == len(one) == len(dist) == 2
    np.testing.assert_allclose(dist, sim, rtol=1e-5)
    np.testing.assert_allclose(dist, one, rtol=1e-5)
    print(f"n={n}: losses launched {dist}, simulated {sim}, one GPU {one}")
