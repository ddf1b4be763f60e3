"""The Python API reports bad input as ``kinac.KinaError`` subclasses, naming what is wrong."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

import kinac

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def small_mlp(tmp_path_factory: pytest.TempPathFactory) -> Path:
    ws = tmp_path_factory.mktemp("api") / "mlp"
    shutil.copytree(ROOT / "workspaces" / "mlp", ws, ignore=shutil.ignore_patterns(".kinac-cache"))
    cfg = ws / "kina.toml"
    cfg.write_text(
        cfg.read_text().replace("B = 4, S = 128, D = 256, F = 1024", "B = 2, S = 3, D = 8, F = 16")
    )
    return ws


def test_a_shape_against_an_entry_names_the_argument_and_the_dim(small_mlp: Path) -> None:
    fn = kinac.compile(small_mlp, "mlp", no_cache=True)
    z = np.zeros
    args = [
        z((2, 3, 8), np.float32),
        z((8, 16), np.float32),
        z(16, np.float32),
        z((16, 8), np.float32),
        z(8, np.float32),
    ]
    assert fn(*args).shape == (2, 3, 8)
    args[0] = z((2, 3, 9), np.float32)
    with pytest.raises(kinac.KinaCallError) as e:
        fn(*args)
    msg = str(e.value)
    assert (
        "argument `x` has shape [2, 3, 9], but entry `mlp` expects [2, 3, 8]: axis 2 (D) is 9, "
        "the entry fixes D = 8" in msg
    )
    assert "`w1`" not in msg and "`b2`" not in msg
    args[0], args[4] = z((2, 3, 8), np.float32), z(7, np.float32)
    with pytest.raises(
        kinac.KinaCallError, match=r"argument `b2` has shape \[7\].*axis 0 \(D\) is 7"
    ):
        fn(*args)
    args[4] = z((1, 8), np.float32)
    with pytest.raises(
        kinac.KinaCallError,
        match="argument `b2` has shape \\[1, 8\\].*rank 2, the entry gives rank 1",
    ):
        fn(*args)


def test_unknown_name_bad_target_and_bad_config_are_usage_errors(
    small_mlp: Path, tmp_path: Path
) -> None:
    with pytest.raises(
        kinac.KinaUsageError, match=r"no entry or defn named `mpl`.*did you mean `mlp`"
    ) as e:
        kinac.compile(small_mlp, "mpl", no_cache=True)
    assert "entries (kina.toml): mlp" in str(e.value) and "dense" in str(e.value)
    with pytest.raises(kinac.KinaUsageError, match="unknown target 'tpu'"):
        kinac.compile(small_mlp, "mlp", target="tpu", no_cache=True)
    bad = tmp_path / "bad"
    shutil.copytree(small_mlp, bad)
    (bad / "kina.toml").write_text('[workspace]\nname = "x"\n[target]\nkind = "tpu"\n')
    with pytest.raises(
        kinac.KinaConfigError, match=r"target.kind: expected one of 'cpu' or 'cuda'; got \"tpu\""
    ):
        kinac.compile(bad, "mlp", no_cache=True)


def test_a_file_that_is_not_utf8_is_a_compile_error_not_a_missing_defn(tmp_path: Path) -> None:
    (tmp_path / "lib.kina").write_bytes(
        b"; caf\xe9\n(defn f [(x : (tensor f32 [N]))] -> (tensor f32 [N]) x)\n"
    )
    with pytest.raises(
        kinac.KinaCompileError, match=r"K0153.*not valid UTF-8: byte 0xe9 at line 1, column 6"
    ):
        kinac.compile(tmp_path / "lib.kina", "f", no_cache=True)


def test_without_an_entry_the_majority_of_arguments_decides_who_is_blamed(tmp_path: Path) -> None:
    shutil.copy(ROOT / "workspaces" / "mlp" / "mlp.kina", tmp_path / "mlp.kina")
    fn = kinac.compile(tmp_path / "mlp.kina", "mlp", no_cache=True)
    z = np.zeros
    with pytest.raises(kinac.KinaCallError) as e:
        fn(
            z((2, 3, 9), np.float32),
            z((8, 16), np.float32),
            z(16, np.float32),
            z((16, 8), np.float32),
            z(8, np.float32),
        )
    assert (
        str(e.value)
        == "argument `x` has shape [2, 3, 9]: axis 2 (D) is 9, but `w1`, `w2`, `b2` say D = 8"
    )
    with pytest.raises(
        kinac.KinaCallError,
        match=r"argument `b2` has shape \[7\]: axis 0 \(D\) is 7, but `x`, `w1`, `w2` say D = 8",
    ):
        fn(
            z((2, 3, 8), np.float32),
            z((8, 16), np.float32),
            z(16, np.float32),
            z((16, 8), np.float32),
            z(7, np.float32),
        )


def test_an_entry_whose_file_does_not_read_reports_that_file(tmp_path: Path) -> None:
    (tmp_path / "kina.toml").write_text(
        '[workspace]\nname = "w"\n[[entry]]\nname = "f"\ndims = { N = 2 }\n'
    )
    (tmp_path / "f.kina").write_text(
        "(defn f [(x : (tensor f32 [N]))] -> (tensor f32 [N])\n  (add x x)\n"
    )
    with pytest.raises(kinac.KinaCompileError, match=r"error\[K01\d\d\]") as e:
        kinac.compile(tmp_path, "f", no_cache=True)
    assert "entry `f` runs defn `f`, which no file that reads defines; f.kina has errors" in str(
        e.value
    )
