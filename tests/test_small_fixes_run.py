"""``kinac run``'s printout spells every dtype as Kina does (inputs were ``f32[...]``, outputs
``float32[...]``), and a ``--dims`` too large for the host's memory is an out-of-memory error
naming the input, its real dtype and size (it said "... data type float64": the random draw's
dtype, not the entry's)."""

from __future__ import annotations

import os
import resource
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

SOURCE = """(module big)
(defn twice [(x : (tensor f16 [N M]))] -> (tensor f16 [N M])
  (add x x))
(defn both [(x : (tensor f32 [N])) (i : (tensor i32 [N]))] -> (tensor f32 [N])
  (add x x))
(defn idx [(i : (tensor i32 [N]))] -> (tensor i32 [N])
  (add i i))
"""


@pytest.fixture(scope="module")
def ws(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("run_fixes")
    (path / "big.kina").write_text(SOURCE)
    (path / "kina.toml").write_text('[workspace]\nname = "big"\n')
    return path


def _run(capsys: pytest.CaptureFixture[str], *args: str) -> str:
    from kinac.cli import main

    capsys.readouterr()
    code = main(["run", *args, "--no-cache", "--repeat", "1"])
    out = capsys.readouterr()
    assert code == 0, out.err
    return out.out


@pytest.mark.parametrize(
    ("entry", "dims", "want"),
    [
        ("twice", "N=3,M=2", ["in  x      f16[3, 2]", "out 0      f16[3, 2]"]),
        ("both", "N=4", ["in  x      f32[4]", "in  i      i32[4]", "out 0      f32[4]"]),
        ("idx", "N=5", ["in  i      i32[5]", "out 0      i32[5]"]),
    ],
)
def test_inputs_and_outputs_are_spelled_as_kina_does(
    ws: Path, capsys: pytest.CaptureFixture[str], entry: str, dims: str, want: list[str]
) -> None:
    out = _run(capsys, str(ws), entry, "--dims", dims)
    for line in want:
        assert line in out, out
    assert "float" not in out and "int32" not in out, out


def _limit_memory() -> None:  # (in the child, before it starts)
    resource.setrlimit(resource.RLIMIT_AS, (8 << 30, 8 << 30))


def test_too_large_dims_name_the_input_its_dtype_and_size(ws: Path) -> None:
    """A real allocation failure: the child's address space is capped at 8 GiB, the input
    needs 64 GiB (f16 [65536, 524288])."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    r = subprocess.run(
        [sys.executable, "-m", "kinac", "run", str(ws), "twice", "--no-cache"]
        + ["--dims", "N=65536,M=524288"],
        preexec_fn=_limit_memory,
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        timeout=120,
    )
    assert r.returncode == 1, r.stderr
    assert r.stderr.startswith("kinac: error: out of memory: the random input `x` is f16"), r.stderr
    assert "f16[65536, 524288]" in r.stderr and "64.00 GiB" in r.stderr
    assert "2 bytes" in r.stderr and "smaller --dims" in r.stderr
    assert "float64" not in r.stderr and "Traceback" not in r.stderr
