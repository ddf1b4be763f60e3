"""Ill-sharded programs (tests/golden/shard): ``kinac build``'s rendered diagnostics.

A case is one ``.kina`` file whose first line is ``; entry DEFN K=V …``: the driver writes a
kina.toml with that entry, builds the workspace in-process and compares what the CLI prints
(diagnostics, then the summary line without its timing) with the ``.out`` golden.
"""

from __future__ import annotations

import re
from pathlib import Path

import goldens
import pytest

from kinac.cli import main

GOLDEN = Path(__file__).resolve().parent / "golden" / "shard"
CASES = sorted(GOLDEN.glob("*.kina"))


def _toml(header: str) -> str:
    """kina.toml for ``; entry DEFN K=V …``."""
    _, _, defn, *binds = header.split()
    dims = ", ".join(f"{k} = {v}" for k, v in (b.split("=") for b in binds))
    return (
        '[workspace]\nname = "case"\nsources = ["*.kina"]\n\n'
        f'[[entry]]\nname = "e"\ndefn = "{defn}"\ndims = {{ {dims} }}\n'
    )


@pytest.mark.parametrize("case", CASES, ids=[c.stem for c in CASES])
def test_shard_golden(case: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    text = case.read_text()
    (tmp_path / "kina.toml").write_text(_toml(text.splitlines()[0]))
    (tmp_path / case.name).write_text(text)
    rc = main(["build", str(tmp_path), "--no-cache", "--color", "never"])
    out = capsys.readouterr()
    got = re.sub(r"\(\d+ queries run.*\)", "(…)", out.out + out.err)
    goldens.compare(case.with_suffix(".out"), f"exit {rc}\n{got}")


def test_at_least_ten_cases() -> None:
    assert len(CASES) >= 10


def test_every_shard_code_has_a_page_and_a_golden() -> None:
    from kinac.diag.explain import explanation
    from kinac.shard.codes import SHARD_CODES

    outs = "".join(c.with_suffix(".out").read_text() for c in CASES)
    for code, title in SHARD_CODES.items():
        page = explanation(code)
        assert page is not None and page.startswith(f"# {code}: {title}"), code
        assert f"[{code}]" in outs, code
