"""Span invariance: the reader's values must not depend on layout.

- Inserting whitespace or a comment between any two tokens leaves every Defn, Import, Mesh and
  the module name equal (so every fingerprint downstream is unchanged), while the span tables
  move with the text.
- Editing one defn's body changes that Defn's fingerprint only, and not its Signature's; the
  other defns keep theirs even though their text moved.
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from kinac.diag.model import Span
from kinac.reader.ast import ParsedFile
from kinac.reader.lexer import tokenize
from kinac.reader.parse import parse_file
from kinac.reader.source import Source
from kinac.rules.codec import fingerprint

GOOD = Path(__file__).resolve().parent / "golden" / "reader" / "good"
FILES = [GOOD / n for n in ("spec-example.kina", "prelude-signatures.kina", "forms.kina",
                            "expressions.kina", "unicode.kina")]  # fmt: skip
FILLERS = (" ", "\n", "\t", "  \r\n  ", ' ; a comment ( [ " ;; ]\n', ";\n", "\n\n ; ∑ é\n")


def values(pf: ParsedFile) -> tuple[object, ...]:
    """Everything in a parse that must be layout-independent."""
    return (pf.module, pf.imports, pf.meshes, pf.defns)


def fingerprints(pf: ParsedFile) -> list[str]:
    return [fingerprint(d) for d in pf.defns]


def gaps(text: str) -> list[int]:
    """Character offsets between tokens (and before the first / after the last)."""
    toks, diags = tokenize(Source("t.kina", text))
    assert not diags
    out = {0, len(text)}
    out.update(t.start for t in toks)
    out.update(t.end for t in toks)
    return sorted(out)


def shifted(span: Span, at: int, by: int) -> tuple[int, int]:
    """Byte offsets of ``span`` after inserting ``by`` bytes at byte offset ``at``."""
    return (span.start + by if span.start >= at else span.start,
            span.end + by if span.end > at else span.end)  # fmt: skip


def all_spans(pf: ParsedFile) -> list[Span]:
    return [s for t in (pf.top_spans, *pf.defn_spans) for s in t.spans]


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.stem)
def test_every_gap_alone(path: Path) -> None:
    """Filler at each gap in turn: values equal, spans shifted exactly by the filler's bytes."""
    text = path.read_text(encoding="utf-8")
    base = parse_file(path.name, text)
    assert not base.diagnostics
    want, prints, spans = values(base), fingerprints(base), all_spans(base)
    rng = random.Random(path.stem)
    for i, at in enumerate(gaps(text)):
        filler = FILLERS[i % len(FILLERS)] if i % 3 else rng.choice(FILLERS)
        edited = text[:at] + filler + text[at:]
        pf = parse_file(path.name, edited)
        assert not pf.diagnostics, (at, filler, pf.diagnostics)
        assert values(pf) == want, (at, filler)
        assert fingerprints(pf) == prints
        at_b, by = len(text[:at].encode()), len(filler.encode())
        assert [shifted(s, at_b, by) for s in spans] == [(s.start, s.end) for s in all_spans(pf)]


@pytest.mark.parametrize("seed", range(20))
def test_all_gaps_at_once(seed: int) -> None:
    rng = random.Random(seed)
    path = FILES[seed % len(FILES)]
    text = path.read_text(encoding="utf-8")
    base = parse_file(path.name, text)
    pieces, last = [], 0
    for at in gaps(text):
        pieces.append(text[last:at])
        pieces.append(rng.choice(FILLERS) if rng.random() < 0.7 else "")
        last = at
    pieces.append(text[last:])
    pf = parse_file(path.name, "".join(pieces))
    assert not pf.diagnostics
    assert values(pf) == values(base) and fingerprints(pf) == fingerprints(base)
    assert [len(t.spans) for t in pf.defn_spans] == [len(t.spans) for t in base.defn_spans]


def test_collapsed_whitespace() -> None:
    """The other direction: all layout squeezed to single spaces."""
    text = (GOOD / "spec-example.kina").read_text(encoding="utf-8")
    squeezed = " ".join(line.split(";")[0] for line in text.splitlines())
    squeezed = " ".join(squeezed.split())
    a, b = parse_file("a.kina", text), parse_file("a.kina", squeezed)
    assert values(a) == values(b) and fingerprints(a) == fingerprints(b)
    assert all(s.line == 1 for s in all_spans(b))


BODY_EDITS = [
    ("(rsqrt Dh)", "(rsqrt (cast Dh :to f32))"),  # attention: deeper body
    ("(o (matmul (softmax s :axis -1) v))]", "(o (matmul (softmax s :axis -1) v)) (z o)]"),
    ("b2))", "(neg b2)))"),  # mlp
]


@pytest.mark.parametrize(("old", "new"), BODY_EDITS)
def test_body_edit_changes_only_that_defn(old: str, new: str) -> None:
    text = (GOOD / "spec-example.kina").read_text(encoding="utf-8")
    assert text.count(old) == 1
    a = parse_file("s.kina", text)
    b = parse_file("s.kina", text.replace(old, new))
    assert not b.diagnostics and [d.name for d in a.defns] == [d.name for d in b.defns]
    changed = [i for i, (x, y) in enumerate(zip(a.defns, b.defns, strict=True)) if x != y]
    assert len(changed) == 1
    for i, (x, y) in enumerate(zip(a.defns, b.defns, strict=True)):
        assert fingerprint(x.signature) == fingerprint(y.signature)
        assert (fingerprint(x) == fingerprint(y)) == (i not in changed)
    # the edited defn's signature spans did not move either (only nid 0, the form, grew)
    i = changed[0]
    n_sig = 1 + max(_sig_nids(a.defns[i].signature))
    assert a.defn_spans[i].spans[1:n_sig] == b.defn_spans[i].spans[1:n_sig]


def _sig_nids(sig: object) -> list[int]:
    import dataclasses

    out: list[int] = [0]
    stack = [sig]
    while stack:
        v = stack.pop()
        if isinstance(v, tuple):
            stack.extend(v)
        elif dataclasses.is_dataclass(v):
            for f in dataclasses.fields(v):
                x = getattr(v, f.name)
                if f.name == "nid":
                    out.append(x)
                else:
                    stack.append(x)
    return out


def test_signature_edit_changes_signature() -> None:
    text = (GOOD / "spec-example.kina").read_text(encoding="utf-8")
    a = parse_file("s.kina", text)
    b = parse_file("s.kina", text.replace("(b2 : (tensor f32 [D]))", "(b2 : (tensor bf16 [D]))"))
    assert fingerprint(a.defns[0].signature) != fingerprint(b.defns[0].signature)
    assert fingerprint(a.defns[1]) == fingerprint(b.defns[1])
