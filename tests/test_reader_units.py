"""Unit tests of the reader's layers: tokens, the S-expression tree, spans, limits, explain
pages and speed. Golden files cover the parser's output; these pin the pieces underneath."""

from __future__ import annotations

import gc
import re
import time
from pathlib import Path

import pytest

from kinac.diag.explain import explanation
from kinac.diag.model import Span
from kinac.reader import default_module, parse_file
from kinac.reader.errors import CODES, MAX_DIAGNOSTICS
from kinac.reader.lexer import tokenize
from kinac.reader.sexpr import MAX_DEPTH, SList, read_tree
from kinac.reader.source import Source
from kinac.rules import codec

GOLDEN = Path(__file__).resolve().parent / "golden" / "reader"


def kinds(text: str) -> list[tuple[str, object]]:
    toks, diags = tokenize(Source("t.kina", text))
    assert not diags, diags
    return [(t.kind, t.value) for t in toks]


def test_atoms() -> None:
    text = '42 -7 +3 1.0 1e-6 -0.5 2.5E+3 x w_q rms-norm + -> : :axis ... ..b @cpu @cuda(0) "s"'
    assert kinds(text) == [
        ("int", 42), ("int", -7), ("int", 3), ("float", 1.0), ("float", 1e-6),
        ("float", -0.5), ("float", 2500.0), ("sym", "x"), ("sym", "w_q"),
        ("sym", "rms-norm"), ("sym", "+"), ("sym", "->"), ("sym", ":"), ("kw", "axis"),
        ("var", ""), ("var", "b"), ("annot", ("cpu", ())),
        ("annot", ("cuda", (codec_arg(None, 0),))), ("str", "s"),
    ]  # fmt: skip


def codec_arg(key: str | None, value: int | str) -> object:
    from kinac.reader.ast import AnnotArg

    return AnnotArg(key, value)


def test_annotation_args_and_comments() -> None:
    got = kinds("@sharded(axis=0, mesh=tp, over = dp) ; (not a list\n@partial(sum, mesh=tp)")
    assert got == [
        ("annot", ("sharded", (codec_arg("axis", 0), codec_arg("mesh", "tp"), codec_arg("over", "dp")))),
        ("annot", ("partial", (codec_arg(None, "sum"), codec_arg("mesh", "tp")))),
    ]  # fmt: skip


def test_string_escapes() -> None:
    assert kinds(r'"a\"b\\c\n\t\r\0\u{1F600}"') == [("str", 'a"b\\c\n\t\r\0\U0001f600')]


def test_token_positions() -> None:
    src = Source("t.kina", "(a\n  bc)")
    toks, _ = tokenize(src)
    assert [(t.line, t.col, t.eline, t.ecol) for t in toks] == [
        (1, 1, 1, 2), (1, 2, 1, 3), (2, 3, 2, 5), (2, 5, 2, 6),
    ]  # fmt: skip


def test_tree_remembers_brackets() -> None:
    forms, diags = read_tree(Source("t.kina", "(a [b (c)] [])"))
    assert not diags
    (top,) = forms
    assert isinstance(top, SList) and top.bracket == "("
    inner = top.items[1]
    assert isinstance(inner, SList) and inner.bracket == "[" and len(inner.items) == 2
    empty = top.items[2]
    assert isinstance(empty, SList) and empty.bracket == "[" and not empty.items


def test_spans_are_one_based_exclusive_and_in_bytes() -> None:
    pf = parse_file("u.kina", "(defn é [(ψ : f32)] -> f32\n  ψ)")
    assert not pf.diagnostics
    spans = pf.defn_spans[0].spans
    assert spans[0] == Span(
        "u.kina", 1, 1, 2, 5, 0, len("(defn é [(ψ : f32)] -> f32\n  ψ)".encode())
    )
    body = spans[-1]  # the body `ψ` on line 2, column 3; 2 bytes, 1 column
    assert (body.line, body.col, body.end_line, body.end_col) == (2, 3, 2, 4)
    assert body.end - body.start == 2


@pytest.mark.parametrize(
    ("path", "stem"),
    [("a/b/model.kina", "model"), ("nn.kina", "nn"), ("x", "x"), ("d\\w.kina", "w"), ("", "")],
)
def test_default_module(path: str, stem: str) -> None:
    assert default_module(path) == stem
    assert parse_file(path, "").module == stem


def test_module_form_overrides_stem() -> None:
    assert parse_file("a/b.kina", "(module c)").module == "c"


def test_duplicates_kept_in_order() -> None:
    pf = parse_file(
        "d.kina", "(defn f [] -> f32 1.0) (defn g [] -> f32 2.0) (defn f [] -> f32 3.0)"
    )
    assert [d.name for d in pf.defns] == ["f", "g", "f"] and not pf.diagnostics
    assert len(pf.defn_spans) == 3


def test_one_d_mesh_axis_defaults_to_mesh_name() -> None:
    (mesh,) = parse_file("m.kina", "(mesh tp [4])").meshes
    assert mesh.shape == (4,) and mesh.axes == ("tp",)


def test_too_many_errors_are_capped() -> None:
    pf = parse_file("e.kina", ")\n" * 150)
    assert len(pf.diagnostics) == MAX_DIAGNOSTICS + 1
    last = pf.diagnostics[-1]
    assert last.code == "K0127" and "50 more" in last.message
    assert isinstance(last.primary.loc, Span) and last.primary.loc.line == 101


@pytest.mark.parametrize("opener", ["(", "[", "(f "])
def test_very_deep_nesting_is_a_diagnostic(opener: str) -> None:
    n = 100_000
    start = time.perf_counter()
    for text in (opener * n, opener * n + "x" + ")" * n, "(defn f [] -> f32 " + "(g " * n):
        pf = parse_file("deep.kina", text)
        codes = {d.code for d in pf.diagnostics}
        assert "K0111" in codes, codes
        assert codec.decode(codec.encode(pf)) == pf
    assert time.perf_counter() - start < 10


def test_nesting_at_the_limit_is_fine() -> None:
    depth = MAX_DEPTH - 1  # the defn form counts as one level
    text = "(defn f [] -> f32 " + "(g " * depth + "1" + ")" * depth + ")"
    pf = parse_file("d.kina", text)
    assert not pf.diagnostics and len(pf.defns) == 1
    assert codec.decode(codec.encode(pf)) == pf
    pf2 = parse_file(
        "d.kina", "(defn f [] -> f32 " + "(g " * (depth + 1) + "1" + ")" * (depth + 1) + ")"
    )
    assert [d.code for d in pf2.diagnostics] == ["K0111"]


def test_gc_is_restored() -> None:
    assert gc.isenabled()
    parse_file("g.kina", "(defn f [] -> f32 1.0)")
    assert gc.isenabled()
    gc.disable()
    try:
        parse_file("g.kina", "(defn f [] -> f32 1.0)")
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_surrogates_and_odd_text_stay_encodable() -> None:
    raw = bytes(range(256)) * 3
    for text in (raw.decode("utf-8", "surrogateescape"), raw.decode("latin-1"), '"\ud800"'):
        pf = parse_file("b.kina", text)
        assert pf.diagnostics
        assert codec.decode(codec.encode(pf)) == pf


# ---------------------------------------------------------------- explain pages

LISP_BLOCK = re.compile(r"```lisp\n(.*?)```", re.S)


@pytest.mark.parametrize("code", sorted(CODES))
def test_explain_page(code: str) -> None:
    page = explanation(code)
    assert page is not None, f"kinac/diag/explain/{code}.md is missing"
    assert page.splitlines()[0] == f"# {code}: {CODES[code]}"
    blocks = LISP_BLOCK.findall(page)
    if code in ("K0111", "K0127"):  # need 64 levels / 100 errors: described, not shown
        return
    assert len(blocks) == 2, "a bad example and its fix"
    bad, good = (parse_file("explain.kina", b) for b in blocks)
    assert code in {d.code for d in bad.diagnostics}, (code, bad.diagnostics)
    assert not good.diagnostics, (code, good.diagnostics)


# ---------------------------------------------------------------- speed


def corpus(files: int, defns: int) -> list[str]:
    """``files`` files of ``defns`` defns each, alternating the spec's mlp and attention."""
    spec = (GOLDEN / "good" / "spec-example.kina").read_text(encoding="utf-8")
    mlp = "(defn mlp" + spec.split("(defn mlp")[1].split("(defn attention")[0]
    attn = "(defn attention" + spec.split("(defn attention")[1]
    out = []
    for f in range(files):
        parts = ['(import "std/nn.kina")']
        for i in range(defns):
            parts.append((attn if i % 2 else mlp).replace("(defn ", f"(defn d{f}-{i}-", 1))
        out.append("\n".join(parts))
    return out


def test_reads_100_files_of_10_defns() -> None:
    """Spec-sized defns (the mlp and attention of spec section 8) at benchmark scale.

    Speed is measured in ``benches/reader.py``, not asserted here: the CI machines are shared.
    """
    texts = corpus(100, 10)
    results = [parse_file(f"f{i}.kina", t) for i, t in enumerate(texts)]
    assert all(len(r.defns) == 10 and not r.diagnostics for r in results)
