"""Golden tests of the reader: every ``.kina`` under ``tests/golden/reader/{good,bad}`` is read
and its dump (AST with node ids and spans, then diagnostics) compared with the ``.out`` beside
it. Regenerate with ``python3 -m pytest --update-goldens tests/test_reader_golden.py`` and
review the diff (a missing ``.out`` fails otherwise).

``good/`` cases must read without a diagnostic; ``bad/`` cases must produce at least one, all
with reader codes, and a case named ``K01NN-…`` must produce that code.
"""

from __future__ import annotations

from pathlib import Path

import goldens
import pytest

from kinac.diag.model import Span
from kinac.reader.dump import dump_parsed
from kinac.reader.errors import CODES
from kinac.reader.parse import parse_file
from kinac.rules import codec

GOLDEN = Path(__file__).resolve().parent / "golden" / "reader"
CASES = sorted(GOLDEN.glob("*/*.kina"))


def _read(path: Path) -> str:
    return path.read_bytes().decode("utf-8")  # no newline translation: CRLF cases stay CRLF


@pytest.mark.parametrize("path", CASES, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_golden(path: Path) -> None:
    rel = path.relative_to(GOLDEN).as_posix()
    pf = parse_file(rel, _read(path))
    text = dump_parsed(pf)
    goldens.compare(path.with_suffix(".out"), text, rel)
    assert codec.decode(codec.encode(pf)) == pf
    codes = {d.code for d in pf.diagnostics}
    if path.parent.name == "good":
        assert not pf.diagnostics, text
    else:
        assert pf.diagnostics and all(c in CODES for c in codes), text
        if path.stem[:5] in CODES:
            assert path.stem[:5] in codes, text


def test_every_code_has_a_bad_case() -> None:
    covered = {p.stem[:5] for p in CASES if p.parent.name == "bad"}
    assert set(CODES) - covered <= {"K0127"}  # K0127 has its own test (needs 100 errors)


def test_spans_point_at_the_source() -> None:
    """Every node's span, as UTF-8 bytes, starts and ends where its line/col say."""
    for path in CASES:
        text = _read(path)
        data = text.encode("utf-8")
        lines = text.split("\n")
        pf = parse_file(path.name, text)
        tables = [pf.top_spans, *pf.defn_spans]
        spans = [s for t in tables for s in t.spans]
        spans += [d.primary.loc for d in pf.diagnostics if isinstance(d.primary.loc, Span)]
        for s in spans:
            pre = "\n".join(lines[: s.line - 1]) + ("\n" if s.line > 1 else "")
            start = len((pre + lines[s.line - 1][: s.col - 1]).encode("utf-8"))
            assert start == s.start, (path.name, s)
            pre = "\n".join(lines[: s.end_line - 1]) + ("\n" if s.end_line > 1 else "")
            end = len((pre + lines[s.end_line - 1][: s.end_col - 1]).encode("utf-8"))
            assert end == s.end and s.start <= s.end <= len(data), (path.name, s)
