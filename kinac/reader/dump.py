"""A readable, stable text dump of a :class:`ParsedFile`: for golden tests and debugging.

One line per AST node, indented by depth, with its field name, class, scalar fields, node id
and the span its id maps to (``@line:col-end_line:end_col``); diagnostics follow, one block
each. The format is deterministic, so goldens diff cleanly when the reader changes.
"""

from __future__ import annotations

import dataclasses

from kinac.diag.model import Diagnostic, Label, Span
from kinac.reader.ast import ParsedFile


def _pos(span: Span) -> str:
    return f"@{span.line}:{span.col}-{span.end_line}:{span.end_col}"


def _is_node(v: object) -> bool:
    return dataclasses.is_dataclass(v) and not isinstance(v, type)


def _node(v: object, spans: tuple[Span, ...], depth: int, label: str, out: list[str]) -> None:
    parts = [f"{'  ' * depth}{label}{type(v).__name__}"]
    children: list[tuple[str, object]] = []
    nid = None
    for f in dataclasses.fields(v):  # type: ignore[arg-type]
        x = getattr(v, f.name)
        if f.name == "nid":
            nid = x
        elif _is_node(x):
            children.append((f.name, x))
        elif isinstance(x, tuple) and x and all(_is_node(i) for i in x):
            children.extend((f"{f.name}[{i}]", item) for i, item in enumerate(x))
        elif f.name == "head_nid":
            parts.append(f"head@{_pos(spans[x])[1:]}" if 0 <= x < len(spans) else f"head_nid={x}")
        else:
            parts.append(f"{f.name}={x!r}")
    if nid is not None:
        parts.append(f"#{nid}")
        if 0 <= nid < len(spans):
            parts.append(_pos(spans[nid]))
    out.append(" ".join(parts))
    for name, child in children:
        _node(child, spans, depth + 1, f"{name}: ", out)


def _label(kind: str, label: Label) -> str:
    loc = label.loc
    where = (
        f"{loc.file}{_pos(loc)} [{loc.start}..{loc.end}]"
        if isinstance(loc, Span)
        else f"{loc.file}:{loc.defn}#{loc.nid}"
    )
    return f"  {kind} {where}" + (f": {label.message}" if label.message else "")


def dump_diagnostic(d: Diagnostic) -> str:
    """A diagnostic as a few indented lines: code, message, labels, notes and help."""
    lines = [f"{d.code} {d.severity}: {d.message}", _label("-->", d.primary)]
    lines.extend(_label("...", s) for s in d.secondary)
    lines.extend(f"  note: {n}" for n in d.notes)
    if d.help:
        lines.append(f"  help: {d.help}")
    return "\n".join(lines)


def dump_parsed(pf: ParsedFile) -> str:
    """The whole parse result as text (AST with spans, then diagnostics)."""
    out = [f"file {pf.file!r} module {pf.module!r}"]
    top = pf.top_spans.spans
    for imp in pf.imports:
        _node(imp, top, 0, "", out)
    for mesh in pf.meshes:
        _node(mesh, top, 0, "", out)
    for defn, table in zip(pf.defns, pf.defn_spans, strict=True):
        out.append(f"Defn {defn.name!r} #0 {_pos(table.spans[0])} ({len(table.spans)} nodes)")
        _node(defn.signature, table.spans, 1, "signature: ", out)
        _node(defn.body, table.spans, 1, "body: ", out)
    if pf.broken_defns:
        out.append(f"broken defns: {' '.join(pf.broken_defns)}")
    if pf.diagnostics:
        out.append(f"diagnostics ({len(pf.diagnostics)}):")
        out.extend(dump_diagnostic(d) for d in pf.diagnostics)
    return "\n".join(out) + "\n"
