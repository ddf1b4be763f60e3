"""``kinac run`` of a plain defn (not a kina.toml entry) without a value for a dim or a dtype
variable says which flag to pass (``--dims N=...``); it repeated the checker's hint "give `N`
in the entry's dims", which names a kina.toml entry the user does not have. An entry that lacks
a dim is told to give it in kina.toml's entry dims."""

from __future__ import annotations

from pathlib import Path

import pytest

from kinac.cli import main

SRC = """(defn f [(x : (tensor T [..b N])) (y : (tensor T [M]))] -> (tensor T [..b N])
  (where (= N (* 2 M)))
  x)
(defn g [(x : (tensor f32 [N]))] -> (tensor f32 [N]) (neg x))
"""


def _run(root: Path, capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
    rc = main(["run", str(root), *args, "--cache-dir", str(root / ".c"), "--repeat", "1"])
    cap = capsys.readouterr()
    return rc, cap.out + cap.err


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    (tmp_path / "kina.toml").write_text(
        '[workspace]\nname = "w"\n[[entry]]\nname = "e"\ndefn = "g"\ndims = {}\n'
    )
    (tmp_path / "m.kina").write_text(SRC)
    return tmp_path


def test_a_plain_defn_without_dims_asks_for_the_flags(
    ws: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rc, out = _run(ws, capsys, "f")
    assert rc == 2 and "Traceback" not in out
    assert "pass --dims N=...,..b=... (a variadic group as ..b=4x128)" in out
    assert "pass --dtypes T=..." in out and "entry's dims" not in out
    assert "`N`, `..b`, `T` have no value" in out  # M follows from N = 2*M
    rc, out = _run(ws, capsys, "f", "--dims", "M=2,..b=3", "--dtypes", "T=f32")
    assert rc == 0, out  # N = 2*M is derived, not asked for
    assert "in  x      f32[3, 4]" in out


def test_an_entry_without_a_dim_is_told_to_give_it_in_kina_toml(
    ws: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rc, out = _run(ws, capsys, "e")
    assert rc == 1 and "K0802" in out
    assert "give `N` in kina.toml's entry dims" in out and "--dims" not in out
