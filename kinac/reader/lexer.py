"""Tokens of Kina source (spec section 1), made by one compiled regular expression.

A single ``re`` is run with ``finditer``: each match is the whitespace and comments before one
token, then the token, in one named group per token class. Every character of the input falls
into exactly one group (the last two take whatever no other accepts), so the token stream
covers the whole text and any string at all tokenizes without an exception. A token class
matches only a whole atom (a run of characters up to a delimiter or whitespace); anything else
is taken whole by the ``atom`` group and classified in Python, which is what gives ``1.2.3``
or ``x:`` one clear diagnostic instead of a shower of fragments. The common kinds (names,
delimiters, small integers, keywords) are built inline in the loop; the rest go to ``rare``.

A token that is wrong is still a token: its kind is ``"error"`` and the diagnostic that
explains it is returned next to the stream, so the S-expression layer keeps its structure.
"""

from __future__ import annotations

import re
from bisect import bisect_left, bisect_right
from typing import NamedTuple

from kinac.diag.model import Diagnostic, Span
from kinac.reader.ast import AnnotArg
from kinac.reader.errors import make, show
from kinac.reader.source import Source

_NAME = r"[^\W\d][\w-]*"
_SYMCHARS = r"[\w+\-*/<>=!?%&|^~$.]"
_SYMBOL = rf"(?![+-]?\.?[0-9])(?:[^\W\d]|[+\-*/<>=!?%&|^~$]){_SYMCHARS}*"
_END = r"(?![^\s()\[\]\";\x00-\x1f\x7f])"  # the atom ends here
_ANNOT_INNER = r"(?:[^()\";\n\r]|\([^()\";\n\r]*\))*+"  # one level of parens: one clear error
_STR_BODY = r'(?:[^"\\\n\r]|\\[^\n\r])*'
_TOKEN = re.compile(
    r"(?:[ \t\n\r\f\v]+|;[^\n\r]*)*+(?:"  # whitespace and comments, then one token or the end
    + "|".join(
        (
            r"(?P<delim>[()\[\]])",
            rf"(?P<sym>{_SYMBOL}|:){_END}",
            rf"(?P<int>[+-]?[0-9]+){_END}",
            rf"(?P<kw>:{_SYMBOL}){_END}",
            rf"(?P<float>[+-]?(?:[0-9]+\.[0-9]+(?:[eE][+-]?[0-9]+)?|[0-9]+[eE][+-]?[0-9]+)){_END}",
            rf"(?P<var>\.\.(?:\.|[^\W\d]\w*)){_END}",
            rf'(?P<str>"{_STR_BODY}")',
            rf'(?P<badstr>"{_STR_BODY}\\?)',
            rf"(?P<annot>@{_NAME}(?:\({_ANNOT_INNER}\)|{_END}(?!\()))",
            rf"(?P<annotopen>@{_NAME}\({_ANNOT_INNER})(?!\))",
            r"(?P<atom>[^\s()\[\]\";\x00-\x1f\x7f]+)",
            r"(?P<bad>(?:[\x00-\x08\x0e-\x1f\x7f]|[^\S \t\n\r\f\v])+)",
            r"\Z",
        )
    )
    + ")"
)
_KINDS = ("", *sorted(_TOKEN.groupindex, key=_TOKEN.groupindex.__getitem__))
_INT = re.compile(r"[+-]?[0-9]+\Z")
_FLOAT = re.compile(r"[+-]?(?:[0-9]+\.[0-9]+(?:[eE][+-]?[0-9]+)?|[0-9]+[eE][+-]?[0-9]+)\Z")
_NUMLIKE = re.compile(r"[+-]?\.?[0-9]")
_SYM = re.compile(rf"{_SYMBOL}\Z")
_SYMCHAR = re.compile(_SYMCHARS)
_ANNOT_ARG = re.compile(rf"\s*(?:(?P<key>{_NAME})\s*=\s*)?(?P<val>-?[0-9]+|{_NAME})\s*\Z")
_ESCAPE = re.compile(r"\\(u\{[0-9a-fA-F]{1,6}\}|.)")
_SIMPLE_ESCAPES = {"\\": "\\", '"': '"', "n": "\n", "t": "\t", "r": "\r", "0": "\0"}
_SYMBOL_CHARS = "letters, digits, `_` `.` and `+ - * / < > = ! ? % & | ^ ~ $`"
SWALLOWS = "swallows"
"""Value of an error token that ran to the end of its line (an unterminated string or
annotation), hiding any closing delimiters there: unclosed lists around it are not reported."""
I64_MIN, I64_MAX = -(2**63), 2**63 - 1


class Token(NamedTuple):
    """One token, which is also an atom of the S-expression tree.

    ``kind`` is ``(`` ``[`` ``)`` ``]`` ``int`` ``float`` ``str`` ``sym`` ``kw`` (``:axis``, value
    ``"axis"``) ``var`` (variadic group: ``...`` -> ``""``, ``..b`` -> ``"b"``) ``annot`` (value:
    name and :class:`AnnotArg` tuple) or ``error`` (already reported). ``start``/``end`` are
    character offsets; ``line``/``col``/``eline``/``ecol`` 1-based, end exclusive.
    """

    kind: str
    value: object
    start: int
    end: int
    line: int
    col: int
    eline: int
    ecol: int


new_token = tuple.__new__  # Token(...) through NamedTuple.__new__ costs 3x more


def parse_int(text: str) -> int | None:
    """The value of an integer literal if it fits in a signed 64-bit integer, else None."""
    digits = text.lstrip("+-").lstrip("0")
    if len(digits) > 19:
        return None
    v = int(text)
    return v if I64_MIN <= v <= I64_MAX else None


class _Lexer:
    """State of one tokenization: the source, the tokens so far and the diagnostics."""

    def __init__(self, src: Source) -> None:
        self.src = src
        self.tokens: list[Token] = []
        self.diags: list[Diagnostic] = []
        self.line = 1
        self.line_start = 0

    def push(self, kind: str, value: object, s: int, e: int) -> None:
        line, col = self.line, s - self.line_start + 1
        self.tokens.append(new_token(Token, (kind, value, s, e, line, col, line, col + e - s)))

    def error(
        self, start: int, end: int, code: str, msg: str, label: str, help: str, tag: str = ""
    ) -> None:
        """Report a bad token; it stays in the stream as an ``error`` token (value: the code,
        or ``tag``), except invalid characters, which become ``junk`` (no item of any list)."""
        self.diags.append(make(code, msg, self.src.span(start, end), label, help=help))
        self.push("junk" if code == "K0108" else "error", tag or code, start, end)

    def run(self, pos: int = 0) -> None:
        """Tokens from character offset ``pos`` (0, or the start of a line) to the end."""
        text = self.src.text
        append = self.tokens.append
        new = new_token
        starts = self.src.line_starts  # offsets where lines begin
        nlines = len(starts)
        line, ls, nxt = 1, 0, starts[1] if nlines > 1 else len(text) + 1
        if pos == 0 and text.startswith("\ufeff"):
            pos = 1
        kinds = _KINDS
        for m in _TOKEN.finditer(text, pos):
            idx = m.lastindex
            if idx is None:  # only whitespace and comments were left
                break
            s, e = m.span(idx)
            if s >= nxt:  # the token is on a later line (tokens never span lines)
                line = bisect_right(starts, s)
                ls = starts[line - 1]
                nxt = starts[line] if line < nlines else len(text) + 1
            kind = kinds[idx]
            col = s - ls + 1
            if kind == "sym":
                append(new(Token, ("sym", text[s:e], s, e, line, col, line, col + e - s)))
            elif kind == "delim":
                append(new(Token, (text[s], None, s, e, line, col, line, col + 1)))
            elif kind == "int" and e - s < 19:
                append(new(Token, ("int", int(text[s:e]), s, e, line, col, line, col + e - s)))
            elif kind == "kw":
                append(new(Token, ("kw", text[s + 1 : e], s, e, line, col, line, col + e - s)))
            else:
                self.line, self.line_start = line, ls
                self.rare(kind, s, e)

    def rare(self, kind: str, s: int, e: int) -> None:
        text = self.src.text
        if kind == "var":
            self.push("var", "" if text[s + 2] == "." else text[s + 2 : e], s, e)
        elif kind == "int" or kind == "float" or kind == "atom":
            self.atom(text[s:e], s, e)
        elif kind == "str":
            self.string(text[s + 1 : e - 1], s, e)
        elif kind == "annot":
            self.annotation(text[s:e], s, e)
        elif kind == "badstr":
            self.error(
                s,
                e,
                "K0104",
                "unterminated string",
                "this string is not closed",
                'close it with `"` on the same line; strings cannot span lines '
                '(write `\\n` for a newline) and a `"` inside is written `\\"`',
                SWALLOWS,
            )
        elif kind == "annotopen":
            self.error(
                s,
                e,
                "K0110",
                "annotation arguments are not closed",
                "no `)` before the end of the line",
                "close the argument list with `)`, as in `@sharded(axis=0, mesh=tp)`; "
                "arguments are integers or names",
                SWALLOWS,
            )
        else:
            c = text[s]
            what = "whitespace" if c.isspace() else "control character"
            many = f"{e - s} invalid characters, the first" if e - s > 1 else "invalid character"
            self.error(
                s,
                e,
                "K0108",
                f"{many} U+{ord(c):04X} ({what})",
                "not allowed in Kina source",
                "replace it with a plain space"
                if c.isspace()
                else "delete it (Kina source is plain text: use spaces, newlines and tabs)",
            )

    def atom(self, t: str, s: int, e: int) -> None:
        c = t[0]
        if c == "@":
            self.error(
                s,
                e,
                "K0110",
                f"malformed annotation `{show(t)}`",
                "not an annotation",
                "an annotation is `@name` or `@name(arg, key=value)`, with a name that starts "
                "with a letter and no space before `(`: e.g. `@cpu`, `@cuda(0)`",
            )
            return
        if _INT.match(t):
            v = parse_int(t)
            if v is None:
                self.error(
                    s,
                    e,
                    "K0107",
                    f"integer literal `{show(t)}` is out of range",
                    "does not fit in 64 bits",
                    f"integers must lie between {I64_MIN} and {I64_MAX}",
                )
            else:
                self.push("int", v, s, e)
            return
        if _FLOAT.match(t):
            f = float(t)
            if f in (float("inf"), float("-inf")):
                self.error(
                    s,
                    e,
                    "K0107",
                    f"float literal `{show(t)}` is out of range",
                    "too large for a 64-bit float",
                    "use a smaller exponent (the largest finite f64 is about 1.8e308)",
                )
            else:
                self.push("float", f, s, e)
            return
        if _NUMLIKE.match(t):
            self.error(
                s,
                e,
                "K0106",
                f"malformed number `{show(t)}`",
                "not a number",
                _number_help(t),
            )
            return
        if c == ":":
            self.error(
                s,
                e,
                "K0109",
                f"invalid keyword `{show(t)}`",
                "not a keyword",
                "a keyword is `:` followed by a name, e.g. `:axis`; a lone `:` "
                "separates a parameter from its type: `(x : T)`",
            )
            return
        if c == ".":
            self.error(
                s,
                e,
                "K0109",
                f"invalid token `{show(t)}`",
                "not a variadic group",
                "a variadic dimension group is written `...` or `..name` (e.g. `..b`)",
            )
            return
        if t.endswith(":") and _SYM.match(t[:-1]):
            help = f"put spaces around `:`: `({t[:-1]} : TYPE)`"
        else:
            bad = next((ch for ch in t if not _SYMCHAR.match(ch)), t[0])
            help = f"`{show(bad)}` cannot appear in a name; names use {_SYMBOL_CHARS}"
        self.error(s, e, "K0109", f"invalid token `{show(t)}`", "not a valid name", help)

    def string(self, body: str, s: int, e: int) -> None:
        if "\\" not in body:
            self.push("str", body, s, e)
            return
        out: list[str] = []
        last = 0
        ok = True
        for m in _ESCAPE.finditer(body):
            out.append(body[last : m.start()])
            last = m.end()
            esc = m.group(1)
            if esc in _SIMPLE_ESCAPES:
                out.append(_SIMPLE_ESCAPES[esc])
                continue
            if esc.startswith("u{"):
                cp = int(esc[2:-1], 16)
                if cp <= 0x10FFFF and not 0xD800 <= cp <= 0xDFFF:
                    out.append(chr(cp))
                    continue
            ok = False
            a, b = s + 1 + m.start(), s + 1 + m.end()
            self.diags.append(
                make(
                    "K0105",
                    f"invalid escape `{show(m.group(0))}` in string",
                    self.src.span(a, b),
                    "unknown escape",
                    help='valid escapes are `\\"` `\\\\` `\\n` `\\t` `\\r` `\\0` and '
                    "`\\u{HEX}` (a Unicode scalar value); write `\\\\` for a backslash",
                )
            )
        out.append(body[last:])
        self.push("str" if ok else "error", "".join(out) if ok else "K0105", s, e)

    def annotation(self, text: str, s: int, e: int) -> None:
        paren = text.find("(")
        if paren < 0:
            self.push("annot", (text[1:], ()), s, e)
            return
        name = text[1:paren]
        inner = text[paren + 1 : -1]
        args: list[AnnotArg] = []
        ok = True
        if inner.strip():
            base = s + paren + 1
            for part in inner.split(","):
                am = _ANNOT_ARG.match(part)
                if am is None:
                    ok = False
                    what = "empty argument" if not part.strip() else f"`{show(part.strip())}`"
                    self.diags.append(
                        make(
                            "K0110",
                            f"malformed argument {what} in annotation `@{name}`",
                            self.src.span(base, base + len(part)),
                            "not an argument",
                            help="annotation arguments are integers or names, optionally as "
                            "`key=value`, separated by commas: `@sharded(axis=0, mesh=tp)`",
                        )
                    )
                else:
                    val: int | str | None = am.group("val")
                    if isinstance(val, str) and _INT.match(val):
                        val = parse_int(val)
                    if val is None:
                        ok = False
                        self.diags.append(
                            make(
                                "K0107",
                                f"integer `{show(am.group('val'))}` is out of range",
                                self.src.span(base, base + len(part)),
                                "does not fit in 64 bits",
                                help=f"integers must lie between {I64_MIN} and {I64_MAX}",
                            )
                        )
                    else:
                        args.append(AnnotArg(am.group("key"), val))
                base += len(part) + 1
        if ok:
            self.push("annot", (name, tuple(args)), s, e)
        else:
            self.push("error", "K0110", s, e)


def _number_help(t: str) -> str:
    body = t.lstrip("+-")
    sign = t[: len(t) - len(body)]
    if body.startswith(".") and _FLOAT.match("0" + body):
        return f"write a digit before the point: `{sign}0{body}`"
    if body.endswith(".") and _INT.match(body[:-1]):
        return f"write a digit after the point: `{t}0`"
    if "_" in body:
        return "digit separators are not allowed: write the digits together"
    if _NUMLIKE.match(t) and _SYM.match(t.lstrip("+-0123456789")):
        return "separate the number from the name with a space, or start the name with a letter"
    return "numbers are written `42`, `-7`, `1.0`, `-0.5` or `1e-6`"


# The last tokenization of each file in this process: (text, tokens, diagnostics).
_LAST: dict[str, tuple[str, tuple[Token, ...], tuple[Diagnostic, ...]]] = {}
_LAST_MAX = 256


def tokenize(src: Source) -> tuple[list[Token], list[Diagnostic]]:
    """All tokens of ``src`` (comments and whitespace dropped) and the lexical diagnostics.

    Incremental per file in a process (an editor's save, ``kinac watch``, the server): the
    tokens of the lines before the first changed character are the previous tokenization's,
    and only the rest of the text is lexed again. That is exact because a token never spans
    a line and no token class looks past the end of its line (strings, comments, annotations
    and the atom end before a line break, ``\n`` or ``\r``), so a line's tokens and
    diagnostics depend only on its text and
    its offset, both unchanged before the first edit (:func:`_reusable`)."""
    lx = _Lexer(src)
    pos = _reusable(src, lx)
    lx.run(pos)
    text = src.text
    if len(_LAST) >= _LAST_MAX and src.file not in _LAST:
        _LAST.clear()
    _LAST[src.file] = (text, tuple(lx.tokens), tuple(lx.diags))
    return lx.tokens, lx.diags


def _reusable(src: Source, lx: _Lexer) -> int:
    """Fill ``lx`` with the previous tokenization's tokens and diagnostics of the lines that
    precede ``src``'s first changed character; return the offset to lex on from (the start
    of that character's line; 0: nothing reused)."""
    last = _LAST.get(src.file)
    if last is None:
        return 0
    old, tokens, diags = last
    text = src.text
    lo, hi = 0, min(len(old), len(text))  # the common prefix's length, by halving
    if text[:hi] == old[:hi]:
        lo = hi
    else:
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if text[:mid] == old[:mid]:
                lo = mid
            else:
                hi = mid - 1
    if any(not isinstance(d.primary.loc, Span) for d in diags):
        return 0  # a diagnostic without a line: lex it all
    if lo == len(text) == len(old):  # unchanged: every token and diagnostic
        lx.tokens.extend(tokens)
        lx.diags.extend(diags)
        return len(text)
    line = bisect_right(src.line_starts, lo)  # 1-based line of the first changed character
    pos = src.line_starts[line - 1]
    if pos == 0:
        return 0
    kept = [d for d in diags if d.primary.loc.line < line]  # type: ignore[union-attr]
    n = bisect_left(tokens, pos, key=_start)
    lx.tokens.extend(tokens[:n])
    lx.diags.extend(kept)
    return pos


def _start(t: Token) -> int:
    return t.start
