"""Rendering diagnostics: rustc-style text (coloured with rich in a terminal) and JSON.

Labels that point at a :class:`NodeRef` are resolved to spans here, at render time, through a
``resolve`` callback backed by the latest parse: that is what lets cached type errors survive
comment and whitespace edits and still point at the right columns.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from kinac.diag.model import Diagnostic, Label, NodeRef, Span
from kinac.diag.snippet import display, printable, source_lines

Resolver = Callable[[Span | NodeRef], Span | None]
SourceOf = Callable[[str], str | None]

_SEVERITY_STYLE = {"error": "bold red", "warning": "bold yellow", "note": "bold cyan"}


def resolve_label(label: Label, resolve: Resolver) -> Span | None:
    loc = label.loc
    return loc if isinstance(loc, Span) else resolve(loc)


def to_json(d: Diagnostic, resolve: Resolver) -> dict[str, Any]:
    """The JSON form (``kinac check --format json``)."""

    def span_json(label: Label) -> dict[str, Any]:
        s = resolve_label(label, resolve)
        out: dict[str, Any] = {"message": label.message}
        if s is not None:
            out.update(
                file=s.file,
                line=s.line,
                column=s.col,
                end_line=s.end_line,
                end_column=s.end_col,
                start=s.start,
                end=s.end,
            )
        elif isinstance(label.loc, NodeRef):
            out.update(file=label.loc.file, defn=label.loc.defn)
        return out

    return {
        "code": d.code,
        "severity": d.severity,
        "message": d.message,
        "primary": span_json(d.primary),
        "secondary": [span_json(s) for s in d.secondary],
        "notes": list(d.notes),
        "help": d.help,
        "counterexample": dict(d.counterexample) if d.counterexample is not None else None,
    }


def _excerpt(
    lines: list[tuple[int, str, list[tuple[int, int, str, str]]]],
) -> list[tuple[str, str]]:
    """Gutter-numbered source lines with underline rows: ``(text, style)`` fragments per row."""
    width = max((len(str(n)) for n, _, _ in lines), default=1)
    rows: list[tuple[str, str]] = []
    prev = None
    for n, text, marks in lines:
        if prev is not None and n > prev + 1:
            rows.append((" " * width + " ...", "dim"))
        prev = n
        ordered = sorted(marks, key=lambda m: m[0])
        shown, cols = display(text, [(m[0], m[1]) for m in ordered])
        rows.append((f"{n:>{width}} | {shown}", ""))
        for (col, span), (_, _, ch_msg, style) in zip(cols, ordered, strict=True):
            ch, msg = ch_msg[0], ch_msg[1:]
            under = " " * (col - 1) + ch * span
            rows.append((f"{'':>{width}} | {under} {msg}".rstrip(), style))
    return rows


def render_text(d: Diagnostic, resolve: Resolver, source_of: SourceOf) -> list[tuple[str, str]]:
    """Rows of ``(text, rich style)`` for one diagnostic."""
    out: list[tuple[str, str]] = [
        (f"{d.severity}[{d.code}]: {d.message}", _SEVERITY_STYLE.get(d.severity, "bold"))
    ]
    primary = resolve_label(d.primary, resolve)
    if primary is not None:
        out.append((f"  --> {printable(primary.file)}:{primary.line}:{primary.col}", "blue"))
    by_file: dict[str, dict[int, list[tuple[int, int, str, str]]]] = {}
    for label, ch, style in [
        (d.primary, "^", "bold red"),
        *((s, "-", "bold blue") for s in d.secondary),
    ]:
        s = resolve_label(label, resolve)
        if s is None:
            continue
        end_col = s.end_col if s.end_line == s.line else s.col + 1
        by_file.setdefault(s.file, {}).setdefault(s.line, []).append(
            (s.col, end_col, ch + label.message, style)
        )
    for file, marks in by_file.items():
        text = source_of(file)
        if text is None:
            continue
        src = source_lines(text)
        if primary is None or file != primary.file:
            first = min(marks)
            out.append((f"  ::: {printable(file)}:{first}", "blue"))
        lines = [(n, src[n - 1] if 0 < n <= len(src) else "", marks[n]) for n in sorted(marks)]
        out.extend(_excerpt(lines))
    if d.counterexample:
        dims = ", ".join(f"{k} = {v}" for k, v in d.counterexample)
        out.append((f"  = counterexample: {dims}", "bold magenta"))
    for note in d.notes:
        out.append((f"  = note: {note}", ""))
    if d.help:
        out.append((f"  = help: {d.help}", "green"))
    return out


def use_color(choice: str = "auto") -> bool | None:
    """``--color`` resolved against the environment: True/False when decided, None for "colour
    if writing to a terminal".

    ``--color always|never`` wins; otherwise a non-empty ``NO_COLOR`` turns colour off
    (https://no-color.org) and a non-empty ``FORCE_COLOR`` turns it on, NO_COLOR first.
    """
    import os

    if choice in ("always", "never"):
        return choice == "always"
    if os.environ.get("NO_COLOR"):
        return False
    if os.environ.get("FORCE_COLOR"):
        return True
    return None


def print_diagnostics(
    diags: Iterable[Diagnostic],
    resolve: Resolver,
    source_of: SourceOf,
    file: Any = None,
    color: bool | None = None,
) -> None:
    """Print diagnostics; colour when ``color`` is True, never when False, and when None only
    when writing to a terminal and the environment allows it (:func:`use_color`)."""
    from rich.console import Console
    from rich.text import Text

    if color is None:
        color = use_color("auto")
    # force_terminal=False (not rich's no_color, which keeps bold) writes no escape codes at all
    console = Console(
        file=file, highlight=False, soft_wrap=True, force_terminal=color, no_color=color is False
    )
    for d in diags:
        for text, style in render_text(d, resolve, source_of):
            console.print(Text(text, style=style))
        console.print()


def plain_text(diags: Iterable[Diagnostic], resolve: Resolver, source_of: SourceOf) -> str:
    """Uncoloured rendering, used by snapshot tests."""
    chunks = []
    for d in diags:
        chunks.append("\n".join(t for t, _ in render_text(d, resolve, source_of)))
    return "\n\n".join(chunks) + ("\n" if chunks else "")
