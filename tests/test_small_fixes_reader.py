"""A lone CR (old Mac line ends) is a line break, as editors count them; CRLF stays one break.

Before the fix only ``\\n`` ended a line: in a file with lone CRs every diagnostic was on line
1 at a column past the end of the line an editor shows, and a comment ran on to the next
``\\n`` (swallowing the code after it). The golden is the diagnostics of one program written
with each line end (and a mix of them): the same text, line:column and snippet for all."""

from __future__ import annotations

from pathlib import Path

import goldens
import pytest

from kinac.reader.source import Source

GOLDEN = Path(__file__).parent / "golden" / "small_fixes" / "line_ends.txt"

PROGRAM = [
    "; a comment, then code on the next line",
    "(module m)",
    "",
    "(defn f [(x : (tensor f32 [N]))] -> (tensor f32 [N])",
    "  (add x yy))",
    "",
    "(defn g [(x : (tensor f32 [N]))] -> (tensor f32 [N])",
    "  (mul x    (nope x)))",
]
ENDS = {"lf": "\n", "crlf": "\r\n", "cr": "\r"}


def _check(tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str, text: str) -> str:
    from kinac.cli import main

    f = tmp_path / f"{name}.kina"
    f.write_bytes(text.encode())
    capsys.readouterr()
    code = main(["check", str(f), "--no-cache", "--color", "never"])
    out = capsys.readouterr()
    assert code == 1 and "Traceback" not in out.out + out.err
    return (out.out + out.err).replace(f"{name}.kina", "m.kina")


def test_every_line_end_gives_the_same_diagnostics(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    seen = {k: _check(tmp_path, capsys, k, end.join(PROGRAM) + end) for k, end in ENDS.items()}
    mixed = (
        "\r".join(PROGRAM[:3]) + "\r\n" + "\n".join(PROGRAM[3:5]) + "\r" + "\r\n".join(PROGRAM[5:])
    )
    seen["mixed"] = _check(tmp_path, capsys, "mixed", mixed + "\n")
    assert seen["cr"] == seen["lf"] == seen["crlf"] == seen["mixed"], seen
    assert (
        "m.kina:5:10" in seen["lf"] and "m.kina:8:14" in seen["lf"]
    )  # as an editor, as an editor shows it
    goldens.compare(GOLDEN, seen["lf"], "diagnostics of a file with lone CR line ends")


def test_line_starts_count_crlf_once_and_a_lone_cr_as_a_break() -> None:
    src = Source("m.kina", "a\r\nb\rc\n\rd\r\r")
    assert src.line_starts == [0, 3, 5, 7, 8, 10, 11]
    assert src.position(src.text.index("d"))[:2] == (5, 1)
    assert src.position(src.text.index("c"))[:2] == (3, 1)
