"""The reader's entry point: source text -> :class:`ParsedFile` (spec sections 1-2)."""

from __future__ import annotations

import gc
import posixpath

from kinac.diag.model import Diagnostic, Span
from kinac.reader.ast import ParsedFile
from kinac.reader.errors import cap
from kinac.reader.sexpr import read_tree
from kinac.reader.source import Source
from kinac.reader.toplevel import TopLevel


def default_module(file: str) -> str:
    """The module name of a file without ``(module …)``: its stem (``std/nn.kina`` -> ``nn``)."""
    return posixpath.splitext(posixpath.basename(file.replace("\\", "/")))[0]


def parse_file(file: str, text: str) -> ParsedFile:
    """Read one Kina file. Never raises on bad input: errors are in ``.diagnostics``.

    ``file`` is the workspace-relative path, recorded in every span.

    The cyclic garbage collector is paused while reading: the reader allocates hundreds of
    thousands of small acyclic objects (tokens, nodes, spans) per megabyte, and generational
    collections triggered by them cost about a third of the reading time for nothing.
    """
    if not gc.isenabled():
        return _parse(file, text)
    gc.disable()
    try:
        return _parse(file, text)
    finally:
        gc.enable()


def _parse(file: str, text: str) -> ParsedFile:
    src = Source(file, text)
    forms, diags = read_tree(src)
    top = TopLevel(src, diags)
    top.run(forms)
    diags.sort(key=_diag_pos)
    return ParsedFile(
        file=file,
        module=top.module if top.module is not None else default_module(file),
        imports=tuple(top.imports),
        meshes=tuple(top.meshes),
        defns=tuple(top.defns),
        defn_spans=tuple(top.defn_spans),
        top_spans=top.top.span_table(),
        diagnostics=cap(diags, file),
        broken_defns=tuple(top.broken_defns),
    )


def _diag_pos(d: Diagnostic) -> int:
    loc = d.primary.loc
    return loc.start if isinstance(loc, Span) else 0
