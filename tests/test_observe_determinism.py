"""``kinac run --deterministic [--manifest F]`` (host): the graph hash, every kernel's identity
and output checksum recorded; a second run compared, naming the first kernel that differs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from observe_support import mlp_workspace

from kinac.cli import main
from kinac.observe.determinism import first_difference


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    return mlp_workspace(tmp_path, b=64, d=64, f=256)


def _run(ws: Path, capsys: pytest.CaptureFixture[str], *extra: str) -> tuple[int, str]:
    rc = main(["run", str(ws), "mlp", "--repeat", "1", "--cache-dir", str(ws / ".c"), *extra])
    cap = capsys.readouterr()
    return rc, cap.out + cap.err


def test_two_runs_agree(ws: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc, out = _run(ws, capsys, "--deterministic")
    assert rc == 0, out
    assert "deterministic: 3 kernels and outputs bit-identical to a second run" in out


def test_manifest_recorded_then_matched(ws: Path, capsys: pytest.CaptureFixture[str]) -> None:
    man = ws / "m.json"
    rc, out = _run(ws, capsys, "--manifest", str(man))
    assert rc == 0 and "recorded 3 kernels" in out, out
    doc = json.loads(man.read_text())
    assert [k["kind"] for k in doc["kernels"]] == ["matmul", "map", "matmul"]
    assert all(k["checksum"] and k["cache_key"]["arch"] for k in doc["kernels"])
    assert len(doc["graph_hash"]) >= 16 and len(doc["outputs"]) == 1
    rc, out = _run(ws, capsys, "--deterministic", "--manifest", str(man))
    assert rc == 0 and "bit-identical to" in out, out


def test_planted_divergence_names_the_first_kernel(
    ws: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A run whose kernel 1 (the GELU) came out differently, and everything after it."""
    man = ws / "m.json"
    assert _run(ws, capsys, "--manifest", str(man))[0] == 0
    doc = json.loads(man.read_text())
    for k in doc["kernels"][1:]:
        k["checksum"] = "0" * 32
    doc["outputs"] = ["0" * 32]
    man.write_text(json.dumps(doc))
    rc, out = _run(ws, capsys, "--manifest", str(man))
    assert rc == 1, out
    name = doc["kernels"][1]["sym"]
    assert f"kinac: error: not deterministic against {man}: kernel 1 ({name}, map f32" in out


def test_other_inputs_or_graph_are_named_as_such(
    ws: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    man = ws / "m.json"
    assert _run(ws, capsys, "--manifest", str(man))[0] == 0
    rc, out = _run(ws, capsys, "--manifest", str(man), "--seed", "5")
    assert rc == 1 and "input 0 (x) differs" in out, out
    doc = json.loads(man.read_text())
    doc["graph_hash"] = "x"
    man.write_text(json.dumps(doc))
    rc, out = _run(ws, capsys, "--manifest", str(man))
    assert rc == 1 and "the graph changed" in out, out


def test_bad_manifest_and_target_are_usage_errors(
    ws: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (ws / "bad.json").write_text("{not json")
    rc, out = _run(ws, capsys, "--manifest", str(ws / "bad.json"))
    assert rc == 2 and "kinac: error: --manifest: cannot read" in out and "Traceback" not in out
    # --target cuda is gated too (tests/test_determinism_planted.py, on a GPU)


def test_first_difference_prefers_identity_over_checksum() -> None:
    k = {"sym": "a", "kind": "map", "impl": "loops", "dtype": "f32", "shape": [2],
         "cache_key": {"arch": "x", "layout": "row-major", "tile": "inline"}, "checksum": "1"}  # fmt: skip
    old = {"version": 1, "graph_hash": "g", "inputs": [], "kernels": [k], "outputs": ["o"]}
    new = {**old, "kernels": [{**k, "cache_key": {**k["cache_key"], "tile": "pool x4"}}]}  # type: ignore[dict-item]
    assert "kernel 0 (a, map) is not the recorded one: cache_key differ" == first_difference(
        old, new
    )
    assert first_difference(old, old) is None
