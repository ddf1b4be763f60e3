"""Issue 15: ``kinac run --inputs x.npz`` of a plain defn (not a ``kina.toml`` entry) takes
its dims and dtype variables from the arrays, as ``kinac.compile`` does from its arguments;
``--dims`` is needed only for what the arrays do not determine (dim parameters)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from kinac.cli import main

SRC = """(defn lin [(x : (tensor T [..b K])) (w : (tensor T [K N]))] -> (tensor T [..b N])
  (matmul x w))
(defn rep [(x : (tensor f32 [N])) (M : dim)] -> (tensor f32 [M N])
  (broadcast-to x [M N]))
"""


def _run(root: Path, capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
    rc = main(
        ["run", str(root / "m.kina"), *args, "--cache-dir", str(root / ".c"), "--repeat", "1"]
    )
    cap = capsys.readouterr()
    return rc, cap.out + cap.err


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    (tmp_path / "m.kina").write_text(SRC)
    np.savez(tmp_path / "in.npz", x=np.ones((2, 3, 4), np.float64), w=np.ones((4, 5), np.float64))
    np.savez(tmp_path / "bad.npz", x=np.ones((2, 4), np.float32), w=np.ones((6, 5), np.float32))
    np.savez(tmp_path / "r.npz", x=np.ones(3, np.float32))
    return tmp_path


def test_dims_and_dtypes_come_from_the_arrays(ws: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc, out = _run(ws, capsys, "lin", "--inputs", str(ws / "in.npz"))
    assert rc == 0, out
    assert "in  x      f64[2, 3, 4]" in out and "out 0      f64[2, 3, 5]" in out
    assert "mean +4" in out  # ones of K = 4 summed


def test_arrays_that_disagree_are_named(ws: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc, out = _run(ws, capsys, "lin", "--inputs", str(ws / "bad.npz"))
    assert rc == 1 and "Traceback" not in out
    assert "argument `w` has shape [6, 5]: axis 0 (K) is 6, but `x` says K = 4" in out


def test_dims_given_still_win_and_name_the_arrays(
    ws: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rc, out = _run(ws, capsys, "lin", "--inputs", str(ws / "in.npz"), "--dims", "K=5")
    assert rc == 1
    assert "argument `w` has shape [4, 5], but `lin` at --dims expects [5, 5]" in out


def test_a_dim_parameter_still_needs_dims(ws: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc, out = _run(ws, capsys, "rep", "--inputs", str(ws / "r.npz"))
    assert rc == 2
    assert "`M` has no value: pass --dims M=..." in out  # N comes from x, so is not asked for
    rc, out = _run(ws, capsys, "rep", "--inputs", str(ws / "r.npz"), "--dims", "M=2")
    assert rc == 0, out
    assert "out 0      f32[2, 3]" in out
