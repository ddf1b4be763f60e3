"""Source lines as a terminal shows them, and where a span's columns fall on them.

A span's columns count characters (the reader's); a terminal shows a tab as several columns,
a wide (CJK) character as two, a combining accent as none, and acts on control characters (an
escape sequence clears the screen, a right-to-left override reorders the line: "Trojan
source"). Rendered raw, carets landed beside the code they mark and a hostile file could
rewrite the terminal. Here each character becomes what is shown (a tab four spaces, a control,
format or bidi character its ``\\u{..}`` escape) and each column its display column; a line
too long for a terminal is cut to a window around its marks.

Lines are split as the reader counts them (:mod:`kinac.reader.source`: ``\\n``, ``\\r\\n``, a
lone ``\\r``); ``str.splitlines`` also splits at form feeds, U+2028 ...: the snippet then
showed another line than the one named.
"""

from __future__ import annotations

import re
import unicodedata

TAB = "    "
MAX_WIDTH = 160  # display columns of a shown line; longer ones are cut around their marks
CONTEXT = 60  # columns kept left of the first mark when cutting
_BREAK = re.compile("\r\n|\r|\n")  # kinac.reader.source's line breaks
_BIDI = frozenset("\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")


def source_lines(text: str) -> list[str]:
    """``text`` split as the reader counts lines (``\\n``, ``\\r\\n``, a lone ``\\r``)."""
    return _BREAK.split(text)


def _shown(ch: str) -> tuple[str, int]:
    """What the terminal is given for ``ch``, and how many columns it takes."""
    if ch == "\t":
        return TAB, len(TAB)
    cat = unicodedata.category(ch)
    if ch in _BIDI or cat in ("Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp"):
        esc = f"\\u{{{ord(ch):x}}}"
        return esc, len(esc)
    if cat in ("Mn", "Me"):
        return ch, 0
    return ch, 2 if unicodedata.east_asian_width(ch) in ("W", "F") else 1


def printable(text: str) -> str:
    """``text`` (a file name, say) with its control, format and bidi characters escaped."""
    if text.isascii() and text.isprintable():
        return text
    return "".join(_shown(ch)[0] if ch != "\t" else "\\u{9}" for ch in text)


def display(line: str, spans: list[tuple[int, int]]) -> tuple[str, list[tuple[int, int]]]:
    """``line`` as shown, and each ``(col, end_col)`` (1-based character columns, end
    exclusive) as ``(display col, width)`` on it; cut to about :data:`MAX_WIDTH` columns
    around the spans when longer."""
    if line.isascii() and "\t" not in line and line.isprintable() and len(line) <= MAX_WIDTH:
        return line, [(c, max(1, e - c)) for c, e in spans]  # the common case, unchanged
    pieces: list[str] = []
    starts = [0]  # display column where each character starts (0-based), then the total
    for ch in line:
        text, width = _shown(ch)
        pieces.append(text)
        starts.append(starts[-1] + width)
    total = starts[-1]

    def at(col: int) -> int:
        return starts[min(max(col - 1, 0), len(line))]

    marks = [(at(c), max(1, at(e) - at(c))) for c, e in spans]
    lo, hi = 0, total
    if total > MAX_WIDTH:
        first = min((m for m, _ in marks), default=0)
        lo = max(0, first - CONTEXT)
        hi = min(total, lo + MAX_WIDTH)
    keep = [i for i in range(len(line)) if starts[i] >= lo and starts[i + 1] <= hi]
    left = "…" if lo > 0 else ""
    right = "…" if hi < total else ""
    text = left + "".join(pieces[i] for i in keep) + right
    shift = (starts[keep[0]] if keep else lo) - len(left)
    shown = []
    for m, w in marks:
        col = min(max(m - shift, len(left)), len(text))
        shown.append((col + 1, max(1, min(w, len(text) - col))))
    return text, shown
