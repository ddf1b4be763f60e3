"""An entry's fixed dtypes are honoured like its fixed dims: an argument of another dtype is a
clear error naming the parameter (``kinac run --inputs``, the API, the sharded API), and
``kinac run``'s random inputs have the entry's dtype (bf16 as its bit patterns), never f32.

Before the fix: f32 arrays for a ``T = "bf16"`` entry ran the defn at f32, and the random
inputs of a bf16 entry were f32 (so the bf16 entry never ran)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from kinac.cli import main
from kinac.errors import KinaCallError
from kinac.tir.interp import bf16_to_f32, f32_to_bf16

SRC = """(mesh tp [2])
(defn f [(x : (tensor T [N D])) (w : (tensor T [D]))] -> (tensor T [N D])
  (mul (exp x) w))
(defn g [(x : (tensor T [N D] @sharded(axis=0, mesh=tp)))] -> (tensor T [N D])
  (exp x))
"""

TOML = """[workspace]
name = "w"
sources = ["*.kina"]
[[entry]]
name = "e"
defn = "f"
dims = { N = 4, D = 8 }
dtypes = { T = "bf16" }
[[entry]]
name = "s"
defn = "g"
dims = { N = 4, D = 8 }
dtypes = { T = "bf16" }
"""


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    (tmp_path / "a.kina").write_text(SRC)
    (tmp_path / "kina.toml").write_text(TOML)
    return tmp_path


def _run(ws: Path, capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
    rc = main(["run", str(ws), *args, "--cache-dir", str(ws / ".c"), "--repeat", "1"])
    cap = capsys.readouterr()
    return rc, cap.out + cap.err


def test_f32_inputs_for_a_bf16_entry_are_an_error(
    ws: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    np.savez(ws / "in.npz", x=np.ones((4, 8), np.float32), w=np.ones(8, np.float32))
    rc, out = _run(ws, capsys, "e", "--inputs", str(ws / "in.npz"))
    assert rc != 0, out
    assert "argument `x` has dtype f32, but entry `e` expects bf16" in out
    assert "argument `w` has dtype f32" in out and "T = bf16" in out
    assert "Traceback" not in out


def test_random_inputs_have_the_entry_dtype(ws: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc, out = _run(ws, capsys, "e", "--save", str(ws / "out.npz"))
    assert rc == 0, out
    assert "out 0      bf16[4, 8]" in out
    got = np.load(ws / "out.npz")["arr_0"]
    assert got.dtype == np.float32
    # computed in bf16: every value is a bf16 value (f32 would have low mantissa bits set)
    np.testing.assert_array_equal(bf16_to_f32(f32_to_bf16(got)), got)


def test_bf16_bit_patterns_run_as_bf16(ws: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rng = np.random.default_rng(0)
    x = f32_to_bf16(rng.standard_normal((4, 8)).astype(np.float32))
    w = f32_to_bf16(rng.standard_normal(8).astype(np.float32))
    np.savez(ws / "in.npz", x=x, w=w)
    rc, out = _run(ws, capsys, "e", "--inputs", str(ws / "in.npz"), "--save", str(ws / "o.npz"))
    assert rc == 0, out
    want = bf16_to_f32(
        f32_to_bf16(bf16_to_f32(f32_to_bf16(np.exp(bf16_to_f32(x)))) * bf16_to_f32(w))
    )
    np.testing.assert_allclose(np.load(ws / "o.npz")["arr_0"], want, rtol=1e-2)


def test_api_refuses_another_dtype_and_takes_torch_bf16(ws: Path) -> None:
    import torch

    import kinac

    f = kinac.compile(ws, "e")
    with pytest.raises(
        KinaCallError, match=r"argument `x` has dtype f32, but entry `e` expects bf16"
    ):
        f(np.ones((4, 8), np.float32), np.ones(8, np.float32))
    x, w = torch.ones(4, 8, dtype=torch.bfloat16), torch.full((8,), 2.0, dtype=torch.bfloat16)
    out = torch.from_dlpack(f(x, w)).view(torch.bfloat16).float()
    assert torch.allclose(out, torch.full((4, 8), 5.4375))


def test_sharded_api_refuses_another_dtype(ws: Path) -> None:
    import kinac

    f = kinac.compile(ws, "s", mesh="")
    with pytest.raises(
        KinaCallError, match=r"argument `x` has dtype f32, but entry `s` expects bf16"
    ):
        f(np.ones((4, 8), np.float32))


def test_simulate_runs_a_bf16_entry(ws: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc, out = _run(ws, capsys, "s", "--simulate")
    assert rc == 0, out
    assert "out 0      bf16[4, 8]" in out and "simulated on mesh `tp`" in out
