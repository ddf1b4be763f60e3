"""Where a ``kina.toml`` entry's key is, for diagnostics about that entry (K0151, K0152, K0155).

Why: those diagnostics pointed at ``kina.toml:1:1`` (``[workspace]`` or a comment), not at the
entry. Like a defn's node, an entry's key is named by a :class:`NodeRef` (``file`` is
``kina.toml``, ``defn`` the JSON of ``["entry", NAME, KEY, ...]``) and found in the text only
when the diagnostic is rendered: the diagnostics stay the same values whatever the comments
and layout of ``kina.toml`` (an edit that leaves the configuration equal re-runs no entry, so
a span computed with the diagnostic would go stale).

The search is line-based, for the usual layout: the ``[[entry]]`` table whose ``name`` is the
entry's, then the key's line in it (``defn = ...``, ``dims = {...}`` or ``dims.B = 4``), then a
sub-key in that line (``B`` of ``dims = { B = 4 }``). What it cannot find falls back to the
entry's ``[[entry]]`` line, then to the line naming the entry, then to line 1.
"""

from __future__ import annotations

import json
import re

from kinac.diag.model import NodeRef, Span

CONFIG_FILE = "kina.toml"
_HEADER = re.compile(r"^\s*\[")
_ENTRY = re.compile(r"^\s*\[\[\s*entry\s*\]\]")


def entry_ref(name: str, *keys: str) -> NodeRef:
    """The location of entry ``name``'s key path ``keys`` (the entry itself when empty)."""
    return NodeRef(CONFIG_FILE, json.dumps(["entry", name, *keys]), 0)


def _names(line: str, name: str) -> bool:
    m = re.match(r'^\s*name\s*=\s*(".*?(?<!\\)"|\'[^\']*\')\s*(#.*)?$', line)
    if m is None:
        return False
    quoted = m.group(1)
    try:
        value = json.loads(quoted) if quoted[0] == '"' else quoted[1:-1]
    except ValueError:
        return False
    return bool(value == name)


def _key_at(line: str, key: str) -> re.Match[str] | None:
    return re.search(
        r"(?:^|[\s{,.])(" + re.escape(key) + r')\s*[=.]|"(' + re.escape(key) + r')"\s*=', line
    )


def toml_span(text: str, ref: NodeRef) -> Span | None:
    """The span ``ref`` (from :func:`entry_ref`) names in ``text``, or None if not an entry."""
    try:
        path = json.loads(ref.defn)
    except ValueError:
        return None
    if not (isinstance(path, list) and len(path) >= 2 and path[0] == "entry"):
        return None
    name, keys = str(path[1]), [str(k) for k in path[2:]]
    lines = text.splitlines()
    starts = [0]
    for ln in text.splitlines(keepends=True):
        starts.append(starts[-1] + len(ln))

    def span(i: int, c0: int, c1: int) -> Span:
        b0 = len(text[: starts[i] + c0].encode("utf-8"))
        b1 = b0 + len(lines[i][c0:c1].encode("utf-8"))
        return Span(CONFIG_FILE, i + 1, c0 + 1, i + 1, c1 + 1, b0, b1)

    def whole(i: int) -> Span:
        c0 = len(lines[i]) - len(lines[i].lstrip())
        return span(i, c0, max(len(lines[i].rstrip()), c0 + 1))

    table: tuple[int, int] | None = None  # [header, end) of the entry's [[entry]] table
    for i, line in enumerate(lines):
        if not _ENTRY.match(line):
            continue
        end = next((j for j in range(i + 1, len(lines)) if _HEADER.match(lines[j])), len(lines))
        if any(_names(lines[j], name) for j in range(i + 1, end)):
            table = (i, end)
            break
    if table is None:  # another layout (an inline array of tables): the line naming it
        quoted = (json.dumps(name), f"'{name}'")
        hit = next((i for i, ln in enumerate(lines) if any(q in ln for q in quoted)), None)
        return whole(hit) if hit is not None else (span(0, 0, 1) if lines else None)
    head, end = table
    if not keys:
        return whole(head)
    first: int | None = None  # the key's first line; a sub-key may be on a later one
    key = re.compile(r"^\s*(" + re.escape(keys[0]) + r'|"' + re.escape(keys[0]) + r'")\s*[=.]')
    for i in range(head + 1, end):
        m = key.match(lines[i])
        if m is None:
            continue
        first = i if first is None else first
        sub = _key_at(lines[i][m.end(1) :], keys[1]) if len(keys) > 1 else None
        if sub is not None:
            q = int(sub.group(1) is None)  # a quoted key ("..b"): span its quotes too
            off = m.end(1) + sub.start(2 if q else 1) - q
            return span(i, off, off + len(keys[1]) + 2 * q)
        if len(keys) == 1:
            return whole(i)
    if first is not None:
        return whole(first)
    return whole(head)
    for i in range(head + 1, end):
        m = re.match(
            r"^\s*(" + re.escape(keys[0]) + r"|\"" + re.escape(keys[0]) + r"\")\s*[=.]", lines[i]
        )
        if m is None:
            continue
        if len(keys) > 1:
            sub = _key_at(lines[i][m.end(1) :], keys[1])
            if sub is not None:
                g = 1 if sub.group(1) is not None else 2
                off = m.end(1) + sub.start(g) - (1 if g == 2 else 0)
                width = len(keys[1]) + (2 if g == 2 else 0)
                return span(i, off, off + width)
        return whole(i)
    return whole(head)
