"""Issue 15: an entry whose defn lives in a file that does not read.

After the file's diagnostics, ``kinac run``, ``kinac build`` and ``kinac.compile`` say that the
defn may be in the broken file (or say nothing more), never "no entry named X (did you mean
X?)" about the entry that exists.
"""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

import pytest

import kinac
from kinac.cli import main
from kinac.errors import KinaError

TOML = '[[entry]]\nname = "tiny"\ndefn = "tiny"\n'
GOOD = "(defn good [(x : (tensor f32 [N]))] -> (tensor f32 [N]) x)\n"
SELF_SUGGESTION = re.compile(r"named `([^`]+)`[^\n]*did you mean `\1`")


def cli(*argv: str) -> tuple[int, str]:
    """``kinac ARGV`` in this process: exit code, stdout and stderr together."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
        code = main(list(argv))
    return code, out.getvalue()


@pytest.fixture
def broken_ws(tmp_path: Path) -> Path:
    """The issue's case: ``t.kina`` is ``(defn tiny`` and kina.toml's entry ``tiny`` runs it."""
    (tmp_path / "t.kina").write_text("(defn tiny")
    (tmp_path / "kina.toml").write_text(TOML)
    return tmp_path


def test_run_entry_in_unreadable_file(broken_ws: Path) -> None:
    code, text = cli("run", str(broken_ws), "tiny", "--cache-dir", str(broken_ws / "c"))
    assert code == 1
    assert "error[K0101]" in text
    assert not SELF_SUGGESTION.search(text), text
    assert "no entry or defn named `tiny`" not in text
    assert "entry `tiny` runs defn `tiny`" in text and "t.kina has errors" in text


def test_compile_entry_in_unreadable_file(broken_ws: Path) -> None:
    with pytest.raises(KinaError) as info:
        kinac.compile(broken_ws, "tiny", no_cache=True)
    text = str(info.value)
    assert "error[K0101]" in text
    assert not SELF_SUGGESTION.search(text), text
    assert "t.kina has errors" in text


def test_build_entry_in_unreadable_file(broken_ws: Path) -> None:
    code, text = cli("build", str(broken_ws), "--cache-dir", str(broken_ws / "c"))
    assert code == 1
    assert "error[K0101]" in text
    assert not SELF_SUGGESTION.search(text), text
    assert "no entry" not in text and "no defn" not in text


def test_unknown_name_beside_unreadable_file(broken_ws: Path) -> None:
    """A typo still gets its suggestion (another entry), and the broken file is named."""
    (broken_ws / "g.kina").write_text(GOOD)
    code, text = cli("run", str(broken_ws), "tyny", "--cache-dir", str(broken_ws / "c"))
    assert code == 1
    assert "no entry or defn named `tyny` in" in text and "(did you mean `tiny`?)" in text
    assert "defns (run one with --dims): good" in text
    assert "t.kina has errors (above) and may define it" in text
    # an entry in a readable file still runs beside the broken one
    (broken_ws / "kina.toml").write_text(
        TOML + '[[entry]]\nname = "g"\ndefn = "good"\ndims = { N = 2 }\n'
    )
    code, text = cli(
        "run", str(broken_ws), "g", "--repeat", "1", "--cache-dir", str(broken_ws / "c")
    )
    assert code == 0, text
