"""``kinac launch`` and ``kinac run --distributed`` refuse bad requests with a ``kinac: error:``
line (exit 2), never a traceback; a launched command's failure code comes back."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from kinac.cli import main
from kinac.rt.comm.launch import command_line, launch, rank_env

TOML = """[workspace]
name = "d"

[[mesh]]
name = "tp"
shape = [2]

[[entry]]
name = "mlp"
defn = "mlp"
dims = { N = 8, D = 4, F = 8 }
"""
SOURCE = """(defn mlp [(x : (tensor f32 [N D]))
           (w1 : (tensor f32 [D F] @sharded(axis=1, mesh=tp)))
           (w2 : (tensor f32 [F D] @sharded(axis=0, mesh=tp)))]
  -> (tensor f32 [N D])
  (matmul (relu (matmul x w1)) w2))
"""


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["launch", "-n", "2"], "kinac launch: give the command after --"),
        (["launch", "-n", "2", "--timeout", "0", "--", "true"], "--timeout must be positive"),
    ],
)
def test_launch_usage_errors(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(argv) == 2
    assert f"kinac: error: {message}" in capsys.readouterr().err


def test_launch_without_n_is_argparse_usage() -> None:
    with pytest.raises(SystemExit) as e:
        main(["launch", "--", "true"])
    assert e.value.code == 2


def test_the_first_failed_rank_and_its_code(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(
        [
            "launch",
            "-n",
            "3",
            "--",
            sys.executable,
            "-c",
            "import os, sys, time; r = int(os.environ['RANK']); time.sleep(0.3 * (r != 2)); sys.exit(5 if r == 2 else 0)",
        ]
    )
    assert code == 5
    assert "kinac: error: kinac launch: rank 2 exited with code 5" in capsys.readouterr().err
    assert launch(2, [sys.executable, "-c", "pass"]).code == 0


def test_environment_is_torchruns() -> None:
    env = rank_env({"PATH": "/bin"}, 3, 4, "10.1.2.3", 29500, 7.0)
    assert {
        k: env[k]
        for k in (
            "RANK",
            "WORLD_SIZE",
            "LOCAL_RANK",
            "LOCAL_WORLD_SIZE",
            "MASTER_ADDR",
            "MASTER_PORT",
            "KINAC_DIST_TIMEOUT",
        )
    } == {
        "RANK": "3",
        "WORLD_SIZE": "4",
        "LOCAL_RANK": "3",
        "LOCAL_WORLD_SIZE": "4",
        "MASTER_ADDR": "10.1.2.3",
        "MASTER_PORT": "29500",
        "KINAC_DIST_TIMEOUT": "7",
    }
    assert env["PYTHONPATH"].split(":")[0] == str(Path(__import__("kinac").__file__).parents[1])  # type: ignore[arg-type]
    assert env["CUDA_VISIBLE_DEVICES"] == "3"  # one GPU per rank
    listed = {"CUDA_VISIBLE_DEVICES": "4,5,6,7"}
    assert rank_env(listed, 1, 4, "h", 1, None)["CUDA_VISIBLE_DEVICES"] == "5"
    assert (
        rank_env({"CUDA_VISIBLE_DEVICES": "0"}, 1, 2, "h", 1, None)["CUDA_VISIBLE_DEVICES"] == "0"
    )
    assert "KINAC_DIST_TIMEOUT" not in rank_env({}, 0, 1, "h", 1, None)
    assert command_line(["kinac", "run"]) == [sys.executable, "-m", "kinac", "run"]


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    (tmp_path / "kina.toml").write_text(TOML)
    (tmp_path / "m.kina").write_text(SOURCE)
    return tmp_path


@pytest.mark.parametrize(
    ("extra", "env", "message"),
    [
        ([], {}, "a distributed run needs the environment of `kinac launch -n N -- ...`"),
        (
            ["--simulate"],
            {"WORLD_SIZE": "1", "RANK": "0"},
            "--distributed runs the program in launched processes and does not combine "
            "with --simulate",
        ),
        (
            ["4"],
            {"WORLD_SIZE": "2", "RANK": "0", "MASTER_PORT": "1"},
            "the mesh (4: 4 devices) needs 4 ranks, but this launch has WORLD_SIZE=2",
        ),
    ],
)
def test_run_distributed_usage_errors(
    ws: Path,
    extra: list[str],
    env: dict[str, str],
    message: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    for k in ("WORLD_SIZE", "RANK", "MASTER_PORT"):
        monkeypatch.delenv(k, raising=False)
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    assert main(["run", str(ws), "mlp", "--distributed", *extra, "--repeat", "1"]) == 2
    assert f"kinac: error: {message}" in capsys.readouterr().err


def test_one_rank_world_runs_without_a_launcher(
    ws: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """WORLD_SIZE=1 (torchrun --nproc 1): the mesh resized to one device, the relay in-process."""
    from kinac.rt.comm import distributed, tcp
    from kinac.rt.comm.launch import free_port

    monkeypatch.setenv("WORLD_SIZE", "1")
    monkeypatch.setenv("RANK", "0")
    monkeypatch.setenv("MASTER_PORT", str(free_port()))
    try:
        assert main(["run", str(ws), "mlp", "--distributed", "--repeat", "1"]) == 0
    finally:
        tcp.close_process_client()
        distributed._WORLDS.clear()
    out = capsys.readouterr().out
    assert (
        "ran on 1 process, mesh `tp` (tp=1): 1 collectives per device (1 all-reduce over tp)" in out
    )
