"""Property tests: the reader never raises, its results round-trip through the codec, and its
tables are consistent, on 6,700 inputs: 600 valid programs from a grammar (each read twice,
the second time with its layout changed), 4,000 mutants of such programs (deletions, inserted delimiters and
fragments, truncations, arbitrary unicode, duplications, swapped brackets), 1,000 arbitrary
strings (surrogates and control characters included) and 500 arbitrary byte strings.

Deterministic (``derandomize=True``, no example database), so CI sees the same inputs as here.
"""

from __future__ import annotations

import dataclasses
import random
import re

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kinac.diag.model import Span
from kinac.reader.ast import ParsedFile
from kinac.reader.errors import CODES
from kinac.reader.lexer import tokenize
from kinac.reader.parse import parse_file
from kinac.reader.source import Source
from kinac.rules import codec


def fuzz_settings(n: int) -> settings:
    return settings(
        max_examples=n,
        deadline=None,
        derandomize=True,
        database=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )


# ---------------------------------------------------------------- a grammar of valid programs

VARS = ("x", "y", "w_q", "h2", "α", "ψ", "...", "..b")
DIMS = ("B", "S", "D", "Dh", "H", "KV", "Länge")
DTYPES = ("f32", "f64", "bf16", "f16", "i32", "i64", "bool", "T")
HEADS = ("add", "matmul", "rms-norm", "softmax", "reshape", "to-device", "where", "f", "+")
KEYS = ("axis", "perm", "keepdims", "to", "repeats")
RELS = ("=", "<", "<=", ">", ">=", "divides")
ANNOTS = ("@cpu", "@cuda(0)", "@replicated", "@sharded(axis=0,mesh=tp)",
          "@sharded(axis=1,mesh=grid,over=dp)", "@partial(sum,mesh=tp)")  # fmt: skip
NUMS = ("0", "1", "-1", "42", "1.0", "-0.5", "1e-6", "2.5E+3", "9223372036854775807")
STRS = ('"std/nn.kina"', '""', '"a\\"b"', '"\\u{2603}\\n"', '"é"')
WS = (" ", " ", " ", "\n  ", "\t", " ; comment\n ", "\r\n")


def dim(r: random.Random, depth: int) -> str:
    roll = r.random()
    if depth > 2 or roll < 0.45:
        return r.choice(DIMS)
    if roll < 0.7:
        return str(r.randint(1, 4096))
    op = r.choice(("+", "*", "/"))
    n = 2 if op == "/" else r.randint(2, 3)
    return f"({op} {' '.join(dim(r, depth + 1) for _ in range(n))})"


def ttype(r: random.Random) -> str:
    if r.random() < 0.2:
        return r.choice(DTYPES)
    lead = [r.choice(("...", "..b"))] if r.random() < 0.3 else []
    dims = lead + [dim(r, 0) for _ in range(r.randint(0, 4))]
    annots = r.sample(ANNOTS, r.randint(0, 2))
    return f"(tensor {r.choice(DTYPES)} [{' '.join(dims)}]{''.join(' ' + a for a in annots)})"


def expr(r: random.Random, depth: int) -> str:
    roll = r.random()
    if depth > 4 or roll < 0.3:
        return r.choice(VARS + NUMS + STRS)
    if roll < 0.4:
        return "[" + " ".join(expr(r, depth + 1) for _ in range(r.randint(0, 3))) + "]"
    if roll < 0.5:
        binds = " ".join(
            f"({r.choice(VARS[:6])} {expr(r, depth + 1)})" for _ in range(r.randint(0, 3))
        )
        return f"(let [{binds}] {expr(r, depth + 1)})"
    if roll < 0.55:
        return f"(the {ttype(r)} {expr(r, depth + 1)})"
    if roll < 0.6:
        return r.choice(ANNOTS)
    args = [expr(r, depth + 1) for _ in range(r.randint(0, 3))]
    keys = r.sample(KEYS, r.randint(0, 2))
    args += [f":{k} {expr(r, depth + 1)}" for k in keys]
    return f"({r.choice(HEADS)}{''.join(' ' + a for a in args)})"


def defn(r: random.Random, i: int) -> str:
    params = []
    for j in range(r.randint(0, 4)):
        name = f"p{j}" if r.random() < 0.7 else r.choice(("H", "KV", "x-y"))
        params.append(f"({name}{j} : {'dim' if r.random() < 0.2 else ttype(r)})")
    where = ""
    if r.random() < 0.4:
        cons = [f"({r.choice(RELS)} {dim(r, 0)} {dim(r, 0)})" for _ in range(r.randint(0, 3))]
        where = f" (where {' '.join(cons)})"
    return f"(defn f{i} [{' '.join(params)}] -> {ttype(r)}{where} {expr(r, 0)})"


def program(r: random.Random) -> str:
    forms = []
    if r.random() < 0.3:
        forms.append("(module m)")
    meshes = ["(mesh tp [4])", "(mesh grid [2 4] :axes [dp tp])"]
    for i in range(r.randint(0, 5)):
        roll = r.random()
        if roll < 0.15:
            forms.append(f'(import "lib/f{i}.kina")')
        elif roll < 0.25 and meshes:  # each name once: a second `(mesh tp …)` is K0128
            forms.append(meshes.pop(r.randrange(len(meshes))))
        else:
            forms.append(defn(r, i))
    text = "\n".join(forms)
    return "".join(c + r.choice(WS) if c == " " and r.random() < 0.2 else c for c in text)


# ---------------------------------------------------------------- mutations

FRAGMENTS = ("(", ")", "[", "]", '"', ";", ":", "@", "..", "...", "->", "(defn", "\n(defn ",
             "\x00", "\u00a0", "\ud800", "é", "1.2.3", "@cuda(", ":k", "\\", "\n", "((((((")  # fmt: skip


def mutate(r: random.Random, text: str, extra: str) -> str:
    for _ in range(r.randint(1, 4)):
        n = len(text)
        i = r.randint(0, n)
        j = min(n, i + r.randint(0, 12))
        op = r.randrange(6)
        if op == 0:
            text = text[:i] + text[j:]  # delete
        elif op == 1:
            text = text[:i] + r.choice(FRAGMENTS) + text[i:]  # insert a delimiter or such
        elif op == 2:
            text = text[:i]  # truncate
        elif op == 3:
            text = text[:i] + extra + text[i:]  # arbitrary unicode from hypothesis
        elif op == 4:
            text = text[:i] + text[i:j] * r.randint(2, 4) + text[j:]  # duplicate
        else:
            swap = {"(": "[", "[": "(", ")": "]", "]": ")"}
            text = text[:i] + "".join(swap.get(c, c) for c in text[i:j]) + text[j:]
    return text


# ---------------------------------------------------------------- invariants


def check(pf: ParsedFile, file: str, text: str) -> None:
    """What must hold of any parse, good or bad."""
    assert isinstance(pf, ParsedFile) and pf.file == file
    assert codec.decode(codec.encode(pf)) == pf
    assert len(pf.defns) == len(pf.defn_spans)
    for d, table in zip(pf.defns, pf.defn_spans, strict=True):
        assert sorted(nids(d)) == list(range(len(table.spans))), d.name
    assert sorted(x.nid for x in (*pf.imports, *pf.meshes)) == list(range(len(pf.top_spans.spans)))  # type: ignore[attr-defined]
    src = Source(file, text)
    size = len(src.text.encode("utf-8"))
    covered(src)
    spans = [s for t in (pf.top_spans, *pf.defn_spans) for s in t.spans]
    for d in pf.diagnostics:  # type: ignore[assignment]
        assert d.code in CODES and d.severity == "error" and d.help  # type: ignore[attr-defined]
        spans.append(d.primary.loc)  # type: ignore[arg-type,attr-defined]
        spans.extend(lab.loc for lab in d.secondary)  # type: ignore[attr-defined,misc]
    for s in spans:
        assert isinstance(s, Span) and s.file == file
        assert 0 <= s.start <= s.end <= size and s.line >= 1 and s.col >= 1
        assert (s.line, s.col) <= (s.end_line, s.end_col)


LAYOUT = re.compile(r"\ufeff?(?:[ \t\n\r\f\v]+|;[^\n]*)*\Z")


def covered(src: Source) -> None:
    """The tokens tile the text: between two of them lie only whitespace and comments."""
    toks, _ = tokenize(src)
    last = 0
    for t in toks:
        assert last <= t.start < t.end, (last, t)
        assert LAYOUT.match(src.text, last, t.start), src.text[last : t.start]
        last = t.end
    assert LAYOUT.match(src.text, last), src.text[last:]


def nids(v: object) -> list[int]:
    out: list[int] = [0]  # nid 0 is the defn form itself
    stack = [v]
    while stack:
        x = stack.pop()
        if isinstance(x, tuple):
            stack.extend(x)
        elif dataclasses.is_dataclass(x):
            for f in dataclasses.fields(x):
                y = getattr(x, f.name)
                if f.name in ("nid", "head_nid"):
                    out.append(y)
                else:
                    stack.append(y)
    return out


# ---------------------------------------------------------------- properties


SEEDS = st.integers(0, 2**32 - 1)
"""Programs come from a seeded generator: hypothesis-driven ``randoms()`` make every choice a
hypothesis draw, which is 50x slower for programs of hundreds of choices."""


@fuzz_settings(600)
@given(SEEDS)
def test_generated_programs_read_cleanly_whatever_the_layout(seed: int) -> None:
    r = random.Random(seed)
    text = program(r)
    pf = parse_file("gen/p.kina", text)
    assert not pf.diagnostics, (text, pf.diagnostics)
    check(pf, "gen/p.kina", text)
    toks, _ = tokenize(Source("gen/p.kina", text))
    cuts = sorted({t.end for t in r.sample(toks, min(len(toks), 6))})
    relaid = text
    for at in reversed(cuts):
        relaid = relaid[:at] + r.choice(WS) + " ;x(\n" + relaid[at:]
    again = parse_file("gen/p.kina", relaid)
    assert not again.diagnostics
    assert (again.module, again.imports, again.meshes, again.defns) == (
        pf.module, pf.imports, pf.meshes, pf.defns,
    )  # fmt: skip


@fuzz_settings(1000)
@given(SEEDS, st.text(max_size=6))
def test_mutated_programs_never_raise(seed: int, extra: str) -> None:
    r = random.Random(seed)
    good = program(r)
    for _ in range(4):  # four mutants per program: 4,000 inputs, a quarter of the overhead
        text = mutate(r, good, extra)
        check(parse_file("gen/m.kina", text), "gen/m.kina", text)


@fuzz_settings(1000)
@given(st.text(alphabet=st.characters(codec=None, exclude_categories=()), max_size=200))
def test_arbitrary_text_never_raises(text: str) -> None:
    check(parse_file("t.kina", text), "t.kina", text)


@fuzz_settings(500)
@given(st.binary(max_size=300), st.sampled_from(("surrogateescape", "latin-1", "replace")))
def test_arbitrary_bytes_never_raise(data: bytes, how: str) -> None:
    text = data.decode("latin-1") if how == "latin-1" else data.decode("utf-8", how)
    check(parse_file("b.kina", text), "b.kina", text)
