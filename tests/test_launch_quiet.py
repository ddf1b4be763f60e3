"""Under ``kinac launch -n N -- kinac train ...`` only rank 0 prints progress, the summary and
``--json`` lines (the others print errors only; ``--all-ranks`` makes every rank speak, its
JSON lines tagged with ``"rank"``), and ``--layout tp|2d`` without ``--simulate`` is a usage
error instead of being silently ignored."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from train_support import CACHE, DECODER

from kinac.cli import main

ROOT = Path(__file__).resolve().parents[1]


def test_only_rank_zero_prints_under_a_launch() -> None:
    argv = ["train", str(DECODER), "decoder_1m", "--steps", "2", "--json", "--cache-dir", CACHE]
    env = {k: v for k, v in os.environ.items() if k not in ("WORLD_SIZE", "RANK")}
    cmd = [sys.executable, "-m", "kinac", "launch", "-n", "2", "--timeout", "120", "--", "kinac"]
    p = subprocess.run(
        [*cmd, *argv], capture_output=True, text=True, timeout=300, cwd=ROOT, env=env
    )
    assert p.returncode == 0, p.stderr
    events = [json.loads(x) for x in p.stdout.splitlines() if x.strip()]  # nothing but JSON
    assert [e["event"] for e in events] == ["start", "step", "step", "done"]
    assert all("rank" not in e for e in events)
    assert "warning" not in p.stderr and "Traceback" not in p.stderr, p.stderr


def test_a_non_zero_rank_prints_nothing_but_with_all_ranks_says_who_it_is(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import kinac.train.launched as launched

    monkeypatch.setattr(launched, "launch_rank", lambda: 1)  # rank 1's printing, one process
    argv = ["train", str(DECODER), "decoder_1m", "--steps", "1", "--cache-dir", CACHE]
    assert main(argv) == 0
    assert capsys.readouterr().out == ""
    assert main([*argv, "--json"]) == 0
    assert capsys.readouterr().out == ""
    assert main([*argv, "--all-ranks"]) == 0
    assert capsys.readouterr().out.startswith("rank 1: trained decoder_1m")
    assert main([*argv, "--json", "--all-ranks"]) == 0
    events = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    assert [(e["event"], e["rank"]) for e in events] == [("start", 1), ("step", 1), ("done", 1)]


@pytest.mark.parametrize("layout", ["tp", "2d"])
def test_a_tensor_parallel_layout_needs_simulate(
    layout: str, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["train", str(DECODER), "decoder_1m", "--steps", "1", "--layout", layout]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert f"kinac: error: --layout {layout} needs --simulate N" in err
    assert "Traceback" not in err
