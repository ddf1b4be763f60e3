"""The lexer's in-process reuse (``kinac.reader.lexer._LAST``: the tokens of the lines before
an edit kept, the rest lexed again) gives exactly what a fresh tokenization gives: tokens,
diagnostics and the whole parse, over random edit sequences of the reader's golden inputs
(comments, strings, annotations, unbalanced delimiters, non-ASCII, a BOM, CRLF), including
edits that shift every later offset and edits on the first line."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from kinac.reader import lexer
from kinac.reader.lexer import tokenize
from kinac.reader.parse import parse_file
from kinac.reader.source import Source

GOLDEN = Path(__file__).parent / "golden" / "reader"
FRAGMENTS = (
    "(", ")", "[", "]", '"', '"s"', "\\", ";", "; note\n", "\n", "\r\n", " ", "x", "é", "α",
    "1.2.3", "-0.5", "42", ":k", "...", "@ann(a b", "@ann(t=1)", "(defn f [] -> (tensor f32 []) 1)",
    "\x01", "\u2028", "\ufeff", "(import \"a.kina\")", "(let [(a 1)] a)",
)  # fmt: skip


def _fresh(file: str, text: str) -> tuple[object, object]:
    saved = dict(lexer._LAST)
    lexer._LAST.clear()
    try:
        return tokenize(Source(file, text)), parse_file(file, text)
    finally:
        lexer._LAST.clear()
        lexer._LAST.update(saved)


def _edit(rng: random.Random, text: str) -> str:
    i = rng.randrange(len(text) + 1)
    r = rng.random()
    if r < 0.35 and text:  # delete a run
        return text[:i] + text[i + rng.randrange(1, 12) :]
    if r < 0.45:  # an edit near the end (the common case: one layer, last line)
        i = max(0, len(text) - rng.randrange(1, 40))
    if r < 0.5:  # on the first line
        i = rng.randrange(min(len(text), 20) + 1)
    return text[:i] + rng.choice(FRAGMENTS) + text[i:]


@pytest.mark.parametrize("kind", ["good", "bad"])
def test_random_edit_sequences_tokenize_and_parse_as_fresh(kind: str) -> None:
    rng = random.Random(19 if kind == "good" else 20)
    files = sorted((GOLDEN / kind).glob("*.kina"))
    for n, path in enumerate(files):
        text = path.read_bytes().decode("utf-8", "surrogateescape")
        file = f"inc/{kind}{n}.kina"
        for _ in range(12):
            text = _edit(rng, text)
            got = tokenize(Source(file, text)), parse_file(file, text)
            assert got == _fresh(file, text), (path.name, text)


def test_an_edit_to_the_last_line_relexes_only_that_line() -> None:
    """The reuse happens (not only gives the same answer): the earlier lines' tokens are the
    previous run's very objects; a changed first line reuses nothing."""
    file = "inc/reuse.kina"
    head = "(module m)\n(defn f [(x : (tensor f32 [N]))] -> (tensor f32 [N])\n"
    a, _ = tokenize(Source(file, head + "  (add x x))\n"))
    b, _ = tokenize(Source(file, head + "  (mul x x))\n"))
    assert b == _fresh(file, head + "  (mul x x))\n")[0][0]  # type: ignore[index]
    n = sum(1 for t in a if t.start < len(head))
    assert all(x is y for x, y in zip(a[:n], b[:n], strict=True)) and b[n + 1].value == "mul"
    c, _ = tokenize(Source(file, "(module n)\n" + head[11:] + "  (mul x x))\n"))
    assert not any(x is y for x, y in zip(b, c, strict=False))
