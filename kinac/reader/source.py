"""One source file's text and the mapping from character offsets to :class:`Span` values.

The lexer and the parser work on character offsets into a Python ``str``; diagnostics and span
tables want 1-based line/column pairs and UTF-8 byte offsets. :class:`Source` does that
conversion, lazily per offset, with a line table built once per file.

Conventions (documented for the renderer):

- ``line``/``col`` are 1-based; columns count Unicode code points, not bytes.
- ``end_line``/``end_col`` are the position just *after* the last character (exclusive), so a
  one-character token at column 5 has ``col == 5`` and ``end_col == 6``; an empty span (end of
  file) has equal start and end.
- ``start``/``end`` are byte offsets into the UTF-8 encoding of the text (end exclusive).
- A line ends at ``\\n``, ``\\r\\n`` (one break) or a lone ``\\r`` (old Mac line ends), as
  editors count them (a file with lone CRs had every diagnostic on line 1, at a column past
  the end of the line an editor shows). Form feeds, U+2028 and the like do not end lines.

Lone surrogate code points (which ``str`` can hold but UTF-8 cannot encode, e.g. from
``bytes.decode(errors="surrogateescape")``) are replaced by U+FFFD up front: both take three
bytes, so offsets are unchanged, and every string that reaches a value stays encodable.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from collections.abc import Iterable
from typing import Protocol

from kinac.diag.model import Span
from kinac.rules.codec import fields_of

_SURROGATE = re.compile("[\ud800-\udfff]")
_NEWLINE = re.compile("\r\n|\r|\n")


def sanitize(text: str) -> str:
    """``text`` with lone surrogates replaced by U+FFFD (same length, same byte offsets)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return _SURROGATE.sub("\ufffd", text)
    return text


class Positioned(Protocol):
    """Anything with character offsets and 1-based positions (tokens and lists)."""

    @property
    def start(self) -> int: ...
    @property
    def end(self) -> int: ...
    @property
    def line(self) -> int: ...
    @property
    def col(self) -> int: ...
    @property
    def eline(self) -> int: ...
    @property
    def ecol(self) -> int: ...


_SPAN_SETTERS = tuple(Span.__dict__[f].__set__ for f in fields_of(Span))  # slot descriptors


class Source:
    """A file's path and (sanitised) text, with offset -> :class:`Span` conversion."""

    __slots__ = ("file", "text", "_ascii", "line_starts", "_line_bytes")
    line_starts: list[int]
    """Character offsets at which lines begin (``[0, …]``)."""

    def __init__(self, file: str, text: str) -> None:
        self.file = file
        self.text = sanitize(text)
        self._ascii = self.text.isascii()
        self.line_starts: list[int] = [0]
        self.line_starts.extend(m.end() for m in _NEWLINE.finditer(self.text))
        self._line_bytes: list[int] | None = None

    def _byte_offsets(self) -> list[int]:
        if self._line_bytes is None:
            out = [0]
            text, starts = self.text, self.line_starts
            for i in range(1, len(starts)):
                out.append(out[-1] + len(text[starts[i - 1] : starts[i]].encode("utf-8")))
            self._line_bytes = out
        return self._line_bytes

    def position(self, offset: int) -> tuple[int, int, int]:
        """``(line, col, byte_offset)`` of the character offset ``offset`` (1-based line/col)."""
        idx = bisect_right(self.line_starts, offset) - 1
        ls = self.line_starts[idx]
        if self._ascii:
            return idx + 1, offset - ls + 1, offset
        byte = self._byte_offsets()[idx] + len(self.text[ls:offset].encode("utf-8"))
        return idx + 1, offset - ls + 1, byte

    def span(self, start: int, end: int) -> Span:
        """The :class:`Span` of the characters ``text[start:end]``."""
        line, col, b0 = self.position(start)
        if end == start:
            return Span(self.file, line, col, line, col, b0, b0)
        eline, ecol, b1 = self.position(end)
        return Span(self.file, line, col, eline, ecol, b0, b1)

    def byte(self, offset: int, line: int) -> int:
        """UTF-8 byte offset of character ``offset``, which lies on 1-based line ``line``."""
        if self._ascii:
            return offset
        ls = self.line_starts[line - 1]
        return self._byte_offsets()[line - 1] + len(self.text[ls:offset].encode("utf-8"))

    def node_span(self, first: Positioned, last: Positioned) -> Span:
        """The span from the start of ``first`` to the end of ``last`` (positions known)."""
        return self.spans_of(((first, last),))[0]

    def spans_of(self, places: Iterable[tuple[Positioned, Positioned]]) -> tuple[Span, ...]:
        """:meth:`node_span` of many pairs at once: the reader's hot path, one span per node.

        Spans are built through their slot descriptors, in one loop: the frozen dataclass
        ``__init__`` (an ``object.__setattr__`` lookup and call per field) is 2x slower.
        """
        file, ascii, byte = self.file, self._ascii, self.byte
        f, a, b, c, d, g, h = _SPAN_SETTERS
        new = object.__new__
        out = []
        for first, last in places:
            sp = new(Span)
            f(sp, file)
            a(sp, first.line)
            b(sp, first.col)
            c(sp, last.eline)
            d(sp, last.ecol)
            if ascii:
                g(sp, first.start)
                h(sp, last.end)
            else:
                g(sp, byte(first.start, first.line))
                h(sp, byte(last.end, last.eline))
            out.append(sp)
        return tuple(out)
