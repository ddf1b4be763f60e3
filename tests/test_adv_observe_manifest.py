"""Adversarial checks of the determinism gate's manifest (``kinac run --manifest F``): damaged,
hand-edited, other-target and other-defn manifests each get one clear message (exit 2 for a
file that is not a manifest, exit 1 for a real difference), never an internal error; lists
cut short are named, not passed as bit-identical."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from observe_support import MLP_SRC, mlp_workspace

from kinac.cli import main


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    ws = mlp_workspace(tmp_path_factory.mktemp("ws"), b=4, d=8, f=16)
    man = ws / "m.json"
    assert main(["run", str(ws), "mlp", "--repeat", "1", "--cache-dir", str(ws / ".c"),
                 "--manifest", str(man)]) == 0  # fmt: skip
    return ws, json.loads(man.read_text())


def _run(ws: Path, capsys: pytest.CaptureFixture[str], *extra: str) -> tuple[int, str]:
    capsys.readouterr()
    rc = main(["run", str(ws), "mlp", "--repeat", "1", "--cache-dir", str(ws / ".c"), *extra])
    cap = capsys.readouterr()
    return rc, cap.out + cap.err


def _against(
    ws: Path, capsys: pytest.CaptureFixture[str], doc: Any, name: str, *extra: str
) -> tuple[int, str]:
    path = ws / name
    path.write_text(json.dumps(doc))
    return _run(ws, capsys, "--manifest", str(path), *extra)


@pytest.mark.parametrize(
    ("field", "value", "says"),
    [
        ("inputs", None, "its inputs is null, not a list of checksums"),
        ("outputs", "abc", 'its outputs is "abc", not a list of checksums'),
        ("kernels", [1, 2, 3], "its kernel 0 is 1, not an object"),
        ("kernels", {"a": 1}, "its kernels is"),
        ("version", "1", "its version is '1', not a whole number"),
        ("version", None, "its version is None, not a whole number"),
        ("graph_hash", 7, "its graph_hash is 7, not text"),
    ],
)
def test_hand_edited_fields_are_named(
    recorded: tuple[Path, dict[str, Any]],
    capsys: pytest.CaptureFixture[str],
    field: str,
    value: Any,
    says: str,
) -> None:
    ws, doc = recorded
    rc, out = _against(ws, capsys, {**doc, field: value}, "edited.json")
    assert rc == 2, out
    assert "internal error" not in out and "Traceback" not in out
    assert (
        "kinac: error: --manifest: " in out and "is not a determinism manifest kinac wrote" in out
    )
    assert says in out, out


def test_a_kernel_field_of_the_wrong_type(
    recorded: tuple[Path, dict[str, Any]], capsys: pytest.CaptureFixture[str]
) -> None:
    ws, doc = recorded
    kernels = [dict(k) for k in doc["kernels"]]
    kernels[1]["shape"] = "4x16"
    rc, out = _against(ws, capsys, {**doc, "kernels": kernels}, "k.json")
    assert rc == 2 and 'its kernel 1 has shape "4x16", not a list' in out, out


@pytest.mark.parametrize("field", ["inputs", "outputs"])
def test_lists_cut_short_are_not_bit_identical(
    recorded: tuple[Path, dict[str, Any]], capsys: pytest.CaptureFixture[str], field: str
) -> None:
    """A manifest whose checksums were cut (or never written) compared nothing: a difference."""
    ws, doc = recorded
    rc, out = _against(ws, capsys, {**doc, field: doc[field][:-1]}, "short.json")
    n = len(doc[field])
    assert rc == 1, out
    assert f"{n - 1} {field} recorded, {n} now" in out and "bit-identical" not in out


def test_other_target_is_named(
    recorded: tuple[Path, dict[str, Any]], capsys: pytest.CaptureFixture[str]
) -> None:
    ws, doc = recorded
    rc, out = _against(ws, capsys, {**doc, "target": "cuda:0"}, "gpu.json")
    assert rc == 1 and "recorded on target cuda:0, this run is on cpu" in out, out


def test_other_defn_is_named_not_a_changed_graph(
    recorded: tuple[Path, dict[str, Any]], capsys: pytest.CaptureFixture[str]
) -> None:
    """The manifest of `mlp` against a renamed defn (another workspace's entry)."""
    ws, doc = recorded
    other = ws / "renamed"
    other.mkdir(exist_ok=True)
    mlp_workspace(other, b=4, d=8, f=16)
    (other / "m.kina").write_text(MLP_SRC.replace("(defn mlp ", "(defn mlp2 "))
    toml = (other / "kina.toml").read_text().replace('defn = "mlp"', 'defn = "mlp2"')
    (other / "kina.toml").write_text(toml)
    (other / "m.json").write_text(json.dumps(doc))
    rc, out = _run(other, capsys, "--manifest", str(other / "m.json"))
    assert rc == 1, out
    assert "recorded for `mlp`, this run is `mlp2`" in out, out


def test_changed_input_file_names_the_input(
    recorded: tuple[Path, dict[str, Any]], capsys: pytest.CaptureFixture[str]
) -> None:
    ws, _ = recorded
    rng = np.random.default_rng(0)
    arrays = {n: rng.standard_normal(s).astype(np.float32)
              for n, s in (("x", (4, 8)), ("w1", (8, 16)), ("w2", (16, 8)))}  # fmt: skip
    npz = ws / "in.npz"
    np.savez(npz, x=arrays["x"], w1=arrays["w1"], w2=arrays["w2"])
    man = ws / "inputs.json"
    assert _run(ws, capsys, "--inputs", str(npz), "--manifest", str(man))[0] == 0
    arrays["w2"][3, 3] += 1.0
    np.savez(npz, x=arrays["x"], w1=arrays["w1"], w2=arrays["w2"])
    rc, out = _run(ws, capsys, "--inputs", str(npz), "--manifest", str(man))
    assert rc == 1 and "input 2 (w2) differs from the recorded run's" in out, out


@pytest.mark.parametrize("cut", [0, 1, 200])
def test_empty_or_truncated_manifest(
    recorded: tuple[Path, dict[str, Any]], capsys: pytest.CaptureFixture[str], cut: int
) -> None:
    ws, doc = recorded
    path = ws / f"cut{cut}.json"
    path.write_text(json.dumps(doc, indent=1)[:cut])
    rc, out = _run(ws, capsys, "--manifest", str(path))
    assert rc == 2 and "internal error" not in out, out
    if cut == 0:
        assert f"--manifest: {path} is empty (a run stopped while writing it?)" in out, out
    else:
        assert "not whole JSON" in out and "delete it to record a new one" in out, out


def test_a_failed_manifest_write_leaves_no_partial_file(tmp_path: Path) -> None:
    """A manifest written past a file-size limit (as a full disk would stop it) was left cut
    short, and the next run then failed on it; now nothing is left."""
    path = tmp_path / "m.json"
    script = f"""
import resource, signal
from pathlib import Path
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
resource.setrlimit(resource.RLIMIT_FSIZE, (1024, 1024))
from kinac.observe.determinism import write_manifest
try:
    write_manifest(Path({str(path)!r}), {{"kernels": ["x" * 100] * 100}})
except OSError as e:
    print("refused", e.errno)
"""
    root = Path(__file__).resolve().parents[1]
    run = subprocess.run([sys.executable, "-c", script], cwd=root, capture_output=True, text=True)
    assert "refused" in run.stdout, run.stdout + run.stderr
    assert list(tmp_path.iterdir()) == []


def test_a_field_only_the_recorded_kernel_has_is_named(
    recorded: tuple[Path, dict[str, Any]], capsys: pytest.CaptureFixture[str]
) -> None:
    """A kernel field this kinac does not write (another version's, or added by hand) was
    reported as 'is not the recorded one:  differ', naming nothing."""
    ws, doc = recorded
    kernels = [dict(k) for k in doc["kernels"]]
    kernels[0]["vector_width"] = 8
    rc, out = _against(ws, capsys, {**doc, "kernels": kernels}, "extra.json")
    assert rc == 1 and "kernel 0 (" in out and "is not the recorded one: vector_width differ" in out
