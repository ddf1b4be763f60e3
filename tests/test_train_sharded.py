"""The decoder (``workspaces/decoder``, ``decoder_1m``) trained on 4 simulated devices in the
three layouts, each step's loss equal to the single-device run's within 1e-4 relative, the
loss falling, and the collectives every rank ran in a step counted:

- ``dp`` (the batch split 4 ways): one all-reduce per weight gradient and the loss, except the
  embedding's (computed whole from gathered cotangents: gather and scatter-add read their
  indices whole), and 5 all-gathers for the index ops (embedding and cross-entropy);
- ``tp`` (Megatron on ``wq wk wv wg wu`` / ``wo wd``): per layer Megatron's 2 forward and 2
  backward activation all-reduces (the backward's after reassociating each norm's partial
  cotangent terms; 4 without) and one small one per norm weight's gradient; with 2 KV heads
  over 4 devices, k and v (and their cotangents) gathered;
- ``2d`` (dp x tp = 2 x 2): both, each over its own axis.
"""

from __future__ import annotations

import json

import pytest
from train_support import CACHE, DECODER

from kinac.api_grad_sharded import sharded_trainer
from kinac.cli import main
from kinac.errors import KinaUsageError
from kinac.train import Trainer

STEPS = 4
LAYERS = 4


@pytest.fixture(scope="module")
def reference() -> list[float]:
    return [r.loss for r in Trainer(DECODER, "decoder_1m", seed=1, cache_dir=CACHE).run(STEPS)]


@pytest.mark.parametrize(
    "layout,counts",
    [
        ("dp", {("all-reduce", "dp"): 39, ("all-gather", "dp"): 5}),
        ("tp", {("all-reduce", "tp"): 6 * LAYERS, ("all-gather", "tp"): 4 * LAYERS}),
        (
            "2d",
            {("all-reduce", "tp"): 6 * LAYERS, ("all-reduce", "dp"): 39, ("all-gather", "dp"): 5},
        ),
    ],
)
def test_four_devices_match_one(
    reference: list[float], layout: str, counts: dict[tuple[str, str], int]
) -> None:
    if layout == "dp":  # the trainer's own dp is rank-local value_and_grad: the program here
        t = sharded_trainer(DECODER, "decoder_1m", 4, layout, seed=1, cache_dir=CACHE)  # type: ignore[arg-type]
    else:  # the trainer's --layout tp/2d construct the same MeshParallel
        t = Trainer(DECODER, "decoder_1m", seed=1, simulate=4, layout=layout, cache_dir=CACHE)
    assert type(t.parallel).__name__ == "MeshParallel"
    got = [r.loss for r in t.run(STEPS)]
    for a, b in zip(reference, got, strict=True):
        assert b == pytest.approx(a, rel=1e-4)
    assert got[-1] < got[0]
    log = t.parallel.log  # the last step's
    assert log.counts() == counts
    assert all(log.counts(rank) == counts for rank in range(4))
    n_tp = t.parallel.mesh.shape[-1] if layout != "dp" else 1
    big = [e for e in log.ranks[0] if e.kind == "all-reduce" and e.axis == "tp"]
    if n_tp > 1:  # Megatron's activation all-reduces: 4 per layer, the whole [B S D] f32
        b_local = 8 // (2 if layout == "2d" else 1)
        assert sum(e.nbytes == b_local * 32 * 128 * 4 for e in big) == 4 * LAYERS
        assert sum(e.nbytes == 128 * 4 for e in big) == 2 * LAYERS  # the norm weights


def test_bad_layouts_are_usage_errors() -> None:
    with pytest.raises(KinaUsageError, match="unknown layout 'pp'"):
        sharded_trainer(DECODER, "decoder_1m", 4, "pp", cache_dir=CACHE)  # type: ignore[arg-type]
    with pytest.raises(KinaUsageError, match="even N >= 4"):
        sharded_trainer(DECODER, "decoder_1m", 3, "2d", cache_dir=CACHE)  # type: ignore[arg-type]
    t = sharded_trainer(DECODER, "decoder_1m", 3, "dp", cache_dir=CACHE)  # type: ignore[arg-type]
    with pytest.raises(KinaUsageError, match="3 devices of mesh axis dp do not divide"):
        t.step()


def test_mixed_precision_on_the_mesh() -> None:
    """bf16 compute over f32 master weights (the ``scale`` argument is a rank-0 f32): the
    partial sums are rounded to bf16 per device before they are reduced, so a step's loss
    agrees with one device's to bf16's resolution (2e-3 relative), not to f32's."""
    one = Trainer(DECODER, "decoder_1m_bf16", seed=1, cache_dir=CACHE)
    ref = [r.loss for r in one.run(3)]
    t = sharded_trainer(DECODER, "decoder_1m_bf16", 4, "tp", seed=1, cache_dir=CACHE)  # type: ignore[arg-type]
    got = [r.loss for r in t.run(3)]
    for a, b in zip(ref, got, strict=True):
        assert b == pytest.approx(a, rel=2e-3)
    assert got[-1] < got[0]
    assert t.parallel.log.counts() == {("all-reduce", "tp"): 24, ("all-gather", "tp"): 16}


def test_cli_layout(reference: list[float], capsys: pytest.CaptureFixture[str]) -> None:
    """``kinac train ... --simulate 4 --layout 2d --json``: the trainer's flag reaches the
    sharded gradient program; the losses are one device's."""
    argv = ["train", str(DECODER), "decoder_1m", "--steps", "2", "--seed", "1", "--json"]
    assert main([*argv, "--simulate", "4", "--layout", "2d", "--cache-dir", CACHE]) == 0
    events = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    assert events[0]["layout"] == "2d" and events[0]["simulate"] == 4
    losses = [e["loss"] for e in events if e["event"] == "step"]
    assert losses == pytest.approx(reference[:2], rel=1e-4)


def test_data_parallel_with_buckets(reference: list[float]) -> None:
    """DDP-style buckets: the 39 trailing all-reduces (3.2 MB) travel as one."""
    t = sharded_trainer(DECODER, "decoder_1m", 4, "dp", bucket_mb=25, seed=1, cache_dir=CACHE)  # type: ignore[arg-type]
    got = [r.loss for r in t.run(2)]
    assert got == pytest.approx(reference[:2], rel=1e-4)
    assert t.parallel.log.counts() == {("all-reduce", "dp"): 1, ("all-gather", "dp"): 5}
