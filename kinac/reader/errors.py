"""The reader's diagnostic codes (K01xx) and a small helper that builds them.

Every code here has a long explanation in ``kinac/diag/explain/<CODE>.md`` whose first line is
``# <CODE>: <title>`` with the title below; a test keeps the two in step. The reader's labels use
absolute :class:`Span` values: it re-runs on every edit, so its diagnostics are never stale.
"""

from __future__ import annotations

from kinac.diag.model import Diagnostic, Label, Span

CODES: dict[str, str] = {
    "K0101": "unclosed delimiter",
    "K0102": "mismatched closing delimiter",
    "K0103": "unexpected closing delimiter",
    "K0104": "unterminated string",
    "K0105": "invalid escape in string",
    "K0106": "malformed number",
    "K0107": "number out of range",
    "K0108": "invalid character",
    "K0109": "invalid token",
    "K0110": "malformed annotation",
    "K0111": "nesting too deep",
    "K0112": "unknown top-level form",
    "K0113": "malformed module form",
    "K0114": "malformed import",
    "K0115": "malformed mesh",
    "K0116": "malformed defn",
    "K0117": "malformed parameter",
    "K0118": "malformed type",
    "K0119": "malformed dimension",
    "K0120": "malformed where constraint",
    "K0121": "malformed let",
    "K0122": "malformed ascription",
    "K0123": "malformed call",
    "K0124": "keyword without a value",
    "K0125": "misplaced keyword",
    "K0126": "definition inside an expression",
    "K0127": "too many errors",
    "K0128": "mesh declared twice in one file",
}

MAX_DIAGNOSTICS = 100
"""At most this many reader diagnostics per file; the rest are summarised by one K0127."""


def make(
    code: str,
    message: str,
    primary: Span,
    label: str = "",
    *,
    help: str | None = None,
    secondary: tuple[tuple[Span, str], ...] = (),
    notes: tuple[str, ...] = (),
) -> Diagnostic:
    """An error diagnostic with code ``code`` whose primary label is ``primary``."""
    assert code in CODES, code
    return Diagnostic(
        code=code,
        severity="error",
        message=message,
        primary=Label(primary, label),
        secondary=tuple(Label(s, m) for s, m in secondary),
        notes=notes,
        help=help,
    )


def cap(diags: list[Diagnostic], file: str) -> tuple[Diagnostic, ...]:
    """Keep the first :data:`MAX_DIAGNOSTICS` diagnostics and summarise the rest."""
    if len(diags) <= MAX_DIAGNOSTICS:
        return tuple(diags)
    rest = len(diags) - MAX_DIAGNOSTICS
    first_dropped = diags[MAX_DIAGNOSTICS].primary.loc
    assert isinstance(first_dropped, Span)
    extra = make(
        "K0127",
        f"too many errors: {rest} more reader error(s) not shown",
        first_dropped,
        "the first error not shown",
        help="fix the errors above and re-run; is this file Kina source at all?",
    )
    return (*diags[:MAX_DIAGNOSTICS], extra)


def show(text: str, limit: int = 24) -> str:
    """``text`` shortened for a message, with control characters escaped."""
    out = text if len(text) <= limit else text[: limit - 1] + "…"
    import unicodedata

    # a combining mark with nothing before it to combine with is shown as its code, else the
    # message reads "`́` cannot appear in a name" (an accent over the backquote)
    return "".join(
        c
        if c.isprintable() and (i > 0 or unicodedata.category(c) not in ("Mn", "Me"))
        else f"\\u{{{ord(c):x}}}"
        for i, c in enumerate(out)
    )


def suggest(word: str, options: tuple[str, ...]) -> str | None:
    """The closest of ``options`` to ``word``, if one is close enough to be a likely typo."""
    import difflib

    found = difflib.get_close_matches(word, options, n=1, cutoff=0.6)
    return found[0] if found else None
