"""Random-edit fuzz: after any sequence of edits, the incremental result equals a clean build.

"Equal" is byte-identical: the canonical encoding of the whole build report (diagnostics and
artifact fingerprints) and the rendered diagnostics text. Edits cover comments, whitespace,
body changes, signature breaks, syntax errors, renames, and files appearing and disappearing;
rebuilds alternate between one long-lived session (watch) and fresh sessions (new processes)
over the same cache.
"""

from __future__ import annotations

import random
import sys
from pathlib import Path

import pytest
from incremental_support import after_edit

from kinac.session import Session

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benches"))
import wsgen  # noqa: E402

FILES, DEFNS = 5, 4


def _edit(rng: random.Random, ws: Path) -> list[Path]:
    files = sorted(ws.glob("*.kina"))
    if not files:
        p = ws / "m000.kina"
        p.write_text(wsgen.file_text(0, DEFNS))
        return [p]
    p = rng.choice(files)
    text = p.read_text()
    lines = text.splitlines(keepends=True)
    op = rng.randrange(9)
    if op == 0:  # a comment
        i = rng.randrange(len(lines) + 1)
        lines.insert(i, f"; note {rng.random()}\n")
        text = "".join(lines)
    elif op == 1:  # whitespace
        text = text.replace(" ", "  ", rng.randrange(1, 4))
    elif op == 2:  # a body change
        f = int(p.stem[1:])
        d = rng.randrange(DEFNS)
        text = text.replace(wsgen.defn_text(f, d), wsgen.defn_text(f, d, rng.randrange(1, 5)))
    elif op == 3:  # a signature change that breaks the body and callers
        text = text.replace("-> (tensor T [..b N])", "-> (tensor T [..b M])", 1)
    elif op == 4:  # a syntax error
        i = text.rfind(")")
        text = text[:i] + text[i + 1 :] if i >= 0 else text + "("
    elif op == 5:  # back to the generated text
        text = wsgen.file_text(int(p.stem[1:]), DEFNS)
    elif op == 6:  # a rename that breaks callers
        text = text.replace("_d1 [", "_d1x [", 1)
    elif op == 7:  # a file disappears
        p.unlink()
        return [p]
    else:  # a new file
        n = max(int(f.stem[1:]) for f in files) + 1
        p = ws / f"m{n:03d}.kina"
        p.write_text(wsgen.file_text(n, DEFNS))
        return [p]
    p.write_text(text)
    return [p]


@pytest.mark.parametrize("seed", [1, 2, 3, 4, 5, 6])
def test_random_edits_match_clean_builds(tmp_path: Path, seed: int) -> None:
    rng = random.Random(seed)
    ws = tmp_path / "ws"
    wsgen.generate(ws, FILES, DEFNS)
    cache = str(tmp_path / "cache")
    live = Session(ws, cache_dir=cache)
    live.build()
    for step in range(20):
        changed = _edit(rng, ws)
        got, want = after_edit(ws, cache, live, changed, use_live=rng.random() < 0.5)
        assert got[1] == want[1], f"seed {seed} step {step}: diagnostics differ"
        assert got[0] == want[0], f"seed {seed} step {step}: reports differ"
    live.close()
