"""``kinac profile`` / ``kinac run`` check their output paths before the build and the run (helper
I's list): a ``--trace`` or ``--manifest`` in a missing folder failed only after the whole
profile or run, ``--trace ""`` and ``--manifest ""`` were silently ignored, a directory given as
``--manifest`` read as a bad manifest; and ``kinac profile`` on a defn whose dim parameter is
called ``repeat`` was an internal error."""

from __future__ import annotations

from pathlib import Path

import pytest

from kinac.cli import main

ROOT = Path(__file__).resolve().parent.parent
MLP = str(ROOT / "workspaces" / "mlp")


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["profile", MLP, "mlp", "--trace", "/nonexistent-kinac/t.json"], "--trace: the directory /nonexistent-kinac does not exist"),
        (["profile", MLP, "mlp", "--trace", ""], "--trace: an empty file name"),
        (["run", MLP, "mlp", "--manifest", ""], "--manifest: an empty file name"),
        (["run", MLP, "mlp", "--manifest", "/nonexistent-kinac/m.json"], "--manifest: the directory /nonexistent-kinac does not exist"),
    ],
)  # fmt: skip
def test_a_bad_output_path_is_refused_before_anything_runs(
    argv: list[str], says: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cache = tmp_path / ".c"
    assert main([*argv, "--cache-dir", str(cache)]) == 2
    got = capsys.readouterr()
    assert says in got.err
    assert "time:" not in got.out and "per call" not in got.out  # nothing ran
    assert not cache.exists()  # nothing was built either


def test_a_directory_as_manifest(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", MLP, "mlp", "--manifest", str(tmp_path), "--no-cache"]) == 2
    assert f"--manifest: {tmp_path} is a directory; give a file name" in capsys.readouterr().err


def test_profile_a_dim_parameter_called_repeat(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "kina.toml").write_text(
        '[workspace]\nname = "w"\n\n[[entry]]\nname = "rep"\ndefn = "rep"\n'
        "dims = { repeat = 3, B = 4 }\n"
    )
    (tmp_path / "m.kina").write_text(
        "(defn rep [(repeat : dim) (x : (tensor f32 [B]))] -> (tensor f32 [B]) (mul x repeat))\n"
    )
    assert main(["profile", str(tmp_path), "rep", "--repeat", "2", "--no-cache"]) == 0
    assert "rep on cpu" in capsys.readouterr().out
