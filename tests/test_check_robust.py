"""Robustness: token-level mutations of the corpus and the sample workspaces never make the
checker, the printer, recursion detection or specialisation raise (bad input is data)."""

from __future__ import annotations

import random
import re
from pathlib import Path

import pytest
from check_support import PRELUDE, ROOT

from kinac.check import DefnRef, find_recursion, format_types, specialise
from kinac.check.env import InMemoryEnv, prelude_text
from kinac.reader.parse import parse_file

FILES = sorted((ROOT / "tests" / "golden" / "check").rglob("*.kina")) + sorted(
    (ROOT / "workspaces").rglob("*.kina")
)
TOK = re.compile(r"\s+|[()\[\]]|[^\s()\[\]]+")
WORDS = (
    "add matmul reshape [B S] (* H Dh) ... ..b -1 0 1.0 :axis :perm [0 1] x y T f32 i32 "
    "@cuda(0) @cpu (the f32 x) (let [(a x)] a) D H (/ D H) slice :start :stop concat gather "
    "iota full -inf where sum :keepdims true to-device reshard @replicated rms-norm causal-mask"
).split(" ")


def _mutate(text: str, r: random.Random) -> str:
    toks = TOK.findall(text)
    for _ in range(r.randint(1, 4)):
        i = r.randrange(len(toks))
        op = r.random()
        if op < 0.3:
            toks[i] = r.choice(WORDS)
        elif op < 0.5:
            del toks[i]
        elif op < 0.7:
            toks.insert(i, r.choice(WORDS) + " ")
        else:
            j = r.randrange(len(toks))
            toks[i], toks[j] = toks[j], toks[i]
    return "".join(toks)


@pytest.mark.parametrize("chunk", range(4))
def test_mutated_programs_never_raise(chunk: int) -> None:
    texts = [p.read_text() for p in FILES]
    prelude = parse_file(PRELUDE, prelude_text())
    for it in range(chunk * 60, chunk * 60 + 60):
        r = random.Random(it)
        src = _mutate(r.choice(texts), r)
        pf = parse_file("f.kina", src)
        env = InMemoryEnv({"f.kina": pf, PRELUDE: prelude}, budget_ms=200)
        for d in pf.defns:
            ref = DefnRef("f.kina", d.name)
            c = env.checked(ref)
            assert isinstance(format_types(c), str)
            find_recursion(ref, env)
            if c.ok:
                dims: dict[str, int | tuple[int, ...]] = {
                    v: r.randint(1, 6) for v in c.sig.dim_vars
                }
                for g in c.sig.groups:
                    dims[g] = (2,)
                sp = specialise(ref, dims, {t: "f32" for t in c.sig.dtype_vars}, env)
                assert (sp.graph is None) == bool(sp.diagnostics), src


def test_paths() -> None:
    assert FILES and all(isinstance(p, Path) for p in FILES)
