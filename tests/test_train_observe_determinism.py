"""``kinac train --deterministic [--manifest F]`` (issue 17 item 4, training half): the step's
graph hash, the first step's kernels (``kinac run``'s recorder), every loss and the final
weights, compared bit for bit with a manifest or a second run. A planted nondeterministic
kernel in the training step, a changed ``--seed`` / ``--lr`` / ``--steps`` and damaged
manifests are each named."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from test_determinism_planted import seeded_matmul
from train_observe_support import tiny_workspace

from kinac.cli import main
from kinac.train import Trainer
from kinac.train.observe import Recorder, train_difference

STEPS = 3


@pytest.fixture(scope="module")
def ws(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tiny_workspace(tmp_path_factory.mktemp("trainobs"))


def _cmd(ws: Path, *extra: str) -> list[str]:
    return ["train", str(ws), "tiny", "--steps", str(STEPS), "--cache-dir", str(ws / ".c"), *extra]


def _record(ws: Path, plant_seed: int | None = None, **kw: Any) -> dict[str, Any]:
    """One training run's manifest; ``plant_seed``: the forward product ``h @ head`` of the
    first step replaced by one summed in an order drawn from that seed (as atomics would)."""
    tr = Trainer(str(ws), "tiny", cache_dir=str(ws / ".c"), **kw)
    head = np.array(tr.weights["head"])  # the first step's weights, before any update
    seen: dict[int, np.ndarray] = {}

    def plant(i: int, out: np.ndarray) -> bool:
        if i == 0:  # the gather: h, the product's left operand
            seen[0] = out.copy()
        if i != 1 or plant_seed is None:
            return False
        out[...] = seeded_matmul(seen[0], head, plant_seed).reshape(out.shape)
        return True

    rec = Recorder({"seed": kw.get("seed", 0), "lr": kw.get("lr", 3e-3)}, plant)
    rec.install(tr)
    list(tr.steps(STEPS))
    return rec.manifest(tr)


def test_default_host_path_is_bit_identical_twice(ws: Path) -> None:
    a, b = _record(ws), _record(ws)
    assert train_difference(a, b) is None
    assert len(a["train"]["losses"]) == STEPS
    assert sorted(a["train"]["weights"]) == ["head", "table"]
    assert a["kernels"][1]["kind"] == "matmul" and a["kernels"][1]["checksum"]
    # the step's hash covers the optimizer: the same loss entry under SGD is another step
    assert _record(ws, optimizer="sgd")["graph_hash"] != a["graph_hash"]


def test_planted_nondeterministic_kernel_is_named(ws: Path) -> None:
    one, again, two = _record(ws, 1), _record(ws, 1), _record(ws, 2)
    assert train_difference(one, again) is None  # the same order: the same bits
    why = train_difference(one, two) or ""
    sym = one["kernels"][1]["sym"]
    assert why.startswith(f"step 1: kernel 1 ({sym}, matmul f32[32, 32]) is the first"), why
    # the plant computes the same product, rounded differently
    a, b = one["kernels"][1]["sketch"]["values"], _record(ws)["kernels"][1]["sketch"]["values"]
    np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)


def test_a_differing_later_step_and_weight_are_named(ws: Path) -> None:
    a = _record(ws)
    b = json.loads(json.dumps(a))
    b["train"]["losses"][2] = float(float.fromhex(a["train"]["losses"][2]) + 1e-3).hex()
    assert (train_difference(a, b) or "").startswith("step 3 is the first whose loss differs")
    c = json.loads(json.dumps(a))
    c["train"]["weights"]["table"] = "0" * 32
    assert (train_difference(a, c) or "").startswith("weight `table` is the first")


def test_cli_manifest_records_then_compares(ws: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(_cmd(ws, "--deterministic")) == 0
    assert "bit-identical to a second run" in capsys.readouterr().out
    man = ws / "m.json"
    assert main(_cmd(ws, "--manifest", str(man))) == 0
    assert f"recorded {STEPS} steps (17 kernels of the first) to {man}" in capsys.readouterr().out
    doc = json.loads(man.read_text())
    assert doc["train"]["config"]["seed"] == 0 and len(doc["train"]["losses"]) == STEPS
    assert main(_cmd(ws, "--manifest", str(man), "--json")) == 0
    out, err = capsys.readouterr()
    assert all(json.loads(line) for line in out.splitlines())  # stdout: JSON lines only
    assert f"bit-identical to {man}" in err


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (("--seed", "1"), "it was recorded with --seed 0, this run has --seed 1"),
        (("--lr", "0.01"), "it was recorded with --lr 0.003, this run has --lr 0.01"),
        (("--steps", "4"), f"{STEPS} steps recorded, 4 now: run the same --steps"),
    ],
)
def test_changed_options_are_named(
    ws: Path, capsys: pytest.CaptureFixture[str], flags: tuple[str, ...], message: str
) -> None:
    man = ws / "opts.json"
    if not man.exists():
        assert main(_cmd(ws, "--manifest", str(man))) == 0
    capsys.readouterr()
    rc = main(_cmd(ws, "--manifest", str(man), *flags))  # argparse: the last --steps wins
    assert rc == 1
    assert f"kinac: error: not deterministic against {man}: {message}" in capsys.readouterr().err


def _run_manifest(ws: Path) -> str:
    """A ``kinac run`` manifest of the same entry."""
    path = ws / "run.json"
    if not path.exists():
        assert (
            main(["run", str(ws), "tiny", "--manifest", str(path), "--cache-dir", str(ws / ".c")])
            == 0
        )
    return path.read_text()


def _damaged(text: str, part: str) -> str:
    doc = json.loads(text)
    if part == "losses":
        doc["train"]["losses"] = [1.5]
    elif part == "weights":
        doc["train"]["weights"] = ["x"]
    elif part == "kernel":
        doc["kernels"][1]["shape"] = "32x32"
    return json.dumps(doc)


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("", "is empty (a run stopped while writing it?)"),
        ('{"version": 1, "graph_hash": "a", "kern', "not whole JSON"),
        ("run", "it records a `kinac run`, not a training run"),
        ("losses", "its train.losses is [1.5], not a list of hex floats"),
        ("weights", 'its train.weights is ["x"], not an object of checksums'),
        ("kernel", 'its kernel 1 has shape "32x32", not a list'),
    ],
)
def test_manifest_problems_are_usage_errors_before_training(
    ws: Path, capsys: pytest.CaptureFixture[str], content: str, message: str
) -> None:
    good = ws / "good.json"
    if not good.exists():
        assert main(_cmd(ws, "--manifest", str(good))) == 0
    text = {"run": _run_manifest(ws)}.get(content, content)
    if content in ("losses", "weights", "kernel"):
        text = _damaged(good.read_text(), content)
    bad = ws / "bad.json"
    bad.write_text(text)
    capsys.readouterr()
    assert main(_cmd(ws, "--manifest", str(bad))) == 2
    out, err = capsys.readouterr()
    assert "kinac: error: --manifest: " in err and message in err, err
    assert "trained" not in out  # refused before training
    assert bad.read_text() == text  # left as it was


def test_simulate_is_refused(ws: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(_cmd(ws, "--simulate", "2", "--deterministic")) == 2
    err = capsys.readouterr().err
    assert "--deterministic/--manifest records a single-device training step" in err
    assert "does not combine with --simulate" in err


def test_a_launched_rank_is_refused(
    ws: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("RANK", "1")
    assert main(_cmd(ws, "--manifest", str(ws / "never.json"))) == 2
    assert "does not combine with kinac launch" in capsys.readouterr().err
    assert not (ws / "never.json").exists()


def test_another_optimizer_is_a_changed_step_graph(ws: Path) -> None:
    a, b = _record(ws), _record(ws, optimizer="sgd")
    b["train"]["config"] = a["train"]["config"]  # as if --optimizer were not recorded
    why = train_difference(a, b) or ""
    assert why.startswith("the graph changed (hash "), why


def test_an_option_left_at_its_default_is_said_so(ws: Path) -> None:
    a = _record(ws)
    b = json.loads(json.dumps(a))
    a["train"]["config"]["loss_scale"], b["train"]["config"]["loss_scale"] = None, "1024"
    assert train_difference(a, b) == (
        "it was recorded with no --loss-scale (its default), this run has --loss-scale 1024"
    )
