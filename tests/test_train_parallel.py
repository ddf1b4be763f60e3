"""Data-parallel training on the mesh simulator (``--simulate N``): each step's loss equals the
single-device run's within 1e-4 relative, every gradient is all-reduced once per step, no
runtime buffer is allocated after the first step, and a batch that does not split is refused."""

from __future__ import annotations

import json

import pytest
from train_support import CACHE, DECODER

from kinac.cli import main
from kinac.train import Trainer


def test_four_simulated_devices_match_one() -> None:
    one = Trainer(DECODER, "decoder_1m", seed=1, cache_dir=CACHE)
    four = Trainer(DECODER, "decoder_1m", seed=1, simulate=4, cache_dir=CACHE)
    ref = [r.loss for r in one.run(6)]
    got = [r.loss for r in four.run(6)]
    for a, b in zip(ref, got, strict=True):
        assert b == pytest.approx(a, rel=1e-4)
    assert got[-1] < 0.8 * got[0]
    assert four.allocations_per_step[1:] == [0] * 5
    log = four.parallel.log  # the last step's collectives: loss and 39 gradients, each once
    counts = log.counts()
    assert counts == {("all-reduce", "dp"): 1 + len(four.names)}, counts
    assert all(log.counts(rank) == counts for rank in range(4))


def test_cli_simulate_json(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["train", str(DECODER), "decoder_1m", "--steps", "2", "--simulate", "2", "--json"]
    assert main([*argv, "--cache-dir", CACHE]) == 0
    events = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    assert events[0]["simulate"] == 2 and events[-1]["steps"] == 2


@pytest.mark.parametrize(
    "argv,message",
    [
        (["--simulate", "3"], "the batch B = 8 of `decoder_1m` must split evenly over 3 devices"),
        (["--simulate", "2", "--target", "cuda"], "drop --target cuda"),
    ],
)
def test_bad_simulate_requests(
    capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    rc = main(["train", str(DECODER), "decoder_1m", "--steps", "1", *argv, "--cache-dir", CACHE])
    err = capsys.readouterr().err
    assert rc == 2 and message in err and "Traceback" not in err


def test_simulate_zero_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as e:
        main(["train", str(DECODER), "decoder_1m", "--simulate", "0"])
    assert e.value.code == 2 and "must be at least 1" in capsys.readouterr().err


@pytest.mark.parametrize("layout", ["tp", "2d"])
def test_cli_tensor_parallel_layouts(layout: str, capsys: pytest.CaptureFixture[str]) -> None:
    """``--layout tp|2d`` trains through the sharded gradient programs (MeshParallel): the
    CLI's losses equal the single-device trainer's within 1e-4 relative."""
    argv = ["train", str(DECODER), "decoder_1m", "--steps", "2", "--simulate", "4"]
    assert main([*argv, "--layout", layout, "--json", "--cache-dir", CACHE]) == 0
    events = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    assert events[0]["layout"] == layout
    got = [e["loss"] for e in events if e["event"] == "step"]
    ref = [r.loss for r in Trainer(DECODER, "decoder_1m", cache_dir=CACHE).run(2)]
    assert got == pytest.approx(ref, rel=1e-4)


def test_unknown_layout_is_a_usage_error() -> None:
    from kinac.errors import KinaUsageError

    with pytest.raises(KinaUsageError, match="unknown layout 'pp'"):
        Trainer(DECODER, "decoder_1m", simulate=4, layout="pp", cache_dir=CACHE)
