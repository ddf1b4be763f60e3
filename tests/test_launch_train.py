"""``kinac launch -n 2 -- kinac train ...``: two CPU ranks over the TCP process group, data
parallel (each its half of the batch, the loss and gradients averaged over the launch, each
updating its own weights). Every step's loss on both ranks equals ``--simulate 2``'s exactly
(the same reductions in rank order), no runtime buffer is allocated after the first step, and
a batch that does not split over the ranks is a usage error naming the launch."""

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


def _events(out: str) -> list[dict[str, object]]:
    return [json.loads(x) for x in out.splitlines() if x.startswith("{")]


def test_two_launched_cpu_ranks_train_like_the_simulator(
    capsys: pytest.CaptureFixture[str],
) -> None:
    argv = ["train", str(DECODER), "decoder_1m", "--steps", "2", "--json", "--cache-dir", CACHE]
    assert main([*argv, "--simulate", "2"]) == 0  # also warms the cache the ranks read
    want = [e["loss"] for e in _events(capsys.readouterr().out) if e["event"] == "step"]
    env = {k: v for k, v in os.environ.items() if k not in ("WORLD_SIZE", "RANK")}
    cmd = [sys.executable, "-m", "kinac", "launch", "-n", "2", "--timeout", "120", "--", "kinac"]
    p = subprocess.run(
        [*cmd, *argv, "--all-ranks"], capture_output=True, text=True, timeout=300, cwd=ROOT, env=env
    )
    assert p.returncode == 0, p.stderr
    events = _events(p.stdout)
    starts = [e for e in events if e["event"] == "start"]
    assert len(starts) == 2 and all(e["simulate"] is None for e in starts)
    assert sorted(e["rank"] for e in starts) == [0, 1]  # type: ignore[type-var]  # --all-ranks: each rank says who it is
    steps = [e for e in events if e["event"] == "step"]
    for k, loss in enumerate(want, start=1):  # both ranks, every step, bit for bit
        assert [e["loss"] for e in steps if e["step"] == k] == [loss, loss]
    done = [e for e in events if e["event"] == "done"]
    assert len(done) == 2 and all(e["allocations_after_first"] == 0 for e in done)
    assert "Traceback" not in p.stderr


def test_a_batch_that_does_not_split_over_the_launch(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    for k, v in {"RANK": "0", "WORLD_SIZE": "3", "LOCAL_RANK": "0"}.items():
        monkeypatch.setenv(k, v)
    monkeypatch.setenv("MASTER_ADDR", "127.0.0.1")
    monkeypatch.setenv("MASTER_PORT", "1")  # never reached: refused before the rendezvous
    argv = ["train", str(DECODER), "decoder_1m", "--steps", "1", "--cache-dir", CACHE]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "kinac launch -n 3: the batch B = 8 of `decoder_1m` must split evenly over 3" in err
    assert "Traceback" not in err
