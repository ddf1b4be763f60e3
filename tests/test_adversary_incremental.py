"""Incremental builds of random valid programs with entries equal clean builds (the adversary's
extension of ``tests/test_incremental_fuzz.py``, whose generated workspace has no entries and
one body shape: here every defn is a random program of ``tests/adversary_gen.py`` built as a
``kina.toml`` entry, so graphs, lowering and objects are compared too).

Edits: a defn replaced by another random program (new dims, dtypes and ops), a body under
one more op (its earlier kernels reused), a defn with a literal added, a comment or
whitespace; after each, a long-lived session and a fresh one over the same cache must produce
the report (diagnostics and artifact fingerprints, byte for byte) of a build without a cache,
and the entries (``kinac.compile`` over the workspace's own cache) must compute what the
float64 reference says.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import numpy as np
import torch
from adversary_gen import Node, Prog, compare, programs
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from incremental_support import after_edit

import kinac
from kinac.session import Session

# one example in the suite (about 3 s: every step builds objects three times); hunting:
# ADV_EXAMPLES=200 python3 -m pytest tests/test_adversary_incremental.py
TARGET = os.environ.get("ADV_TARGET", "cpu")  # ADV_TARGET=cuda: the GPU's build artifacts
EACH_STEP = (
    "ADV_EXAMPLES" in os.environ and TARGET == "cpu"
)  # hunting: values after every edit, not only the last
EXAMPLES = settings(
    max_examples=int(os.environ.get("ADV_EXAMPLES", "1")),
    deadline=None,
    suppress_health_check=list(HealthCheck),
)


def _extended(p: Prog, step: int) -> Prog:
    """``p`` with its body under one more elementwise op (a new program text and last kernel,
    the same kernels before it)."""
    body = p.body
    assert body is not None
    op = ("tanh", "neg", "sigmoid")[step % 3]
    f = {"tanh": torch.tanh, "neg": torch.neg, "sigmoid": torch.sigmoid}[op]
    q = Prog(p.dtype, p.dtype_var, list(p.params), list(p.wheres), p.uses_prelude)
    q.var_mode, q.nvars, q.ops = p.var_mode, p.nvars, [*p.ops, op]
    q.body = Node(f"({op} {body.src})", body.shape, lambda e: p.rd(f(body.ev(e))))
    return q


def _toml(progs: dict[str, Prog]) -> str:
    text = '[workspace]\nname = "adv"\n'
    if TARGET != "cpu":  # hunting the GPU's artifacts (PTX through llvmlite; no GPU needed)
        text += f'\n[target]\nkind = "{TARGET}"\n'
    for name, p in progs.items():
        dims = {d.expr: d.val for _, s, _ in p.params for d in s if re.fullmatch(r"N\d+", d.expr)}
        text += f'\n[[entry]]\nname = "e_{name}"\ndefn = "{name}"\n'
        text += "dims = { " + ", ".join(f"{k} = {v}" for k, v in dims.items()) + " }\n"
        if p.dtype_var:
            text += f'dtypes = {{ T = "{p.dtype}" }}\n'
    return text


def _write(ws: Path, progs: dict[str, Prog], extra: str = "") -> list[Path]:
    (ws / "kina.toml").write_text(_toml(progs))
    srcs = {n: p.source(n) for n, p in progs.items()}
    imp = '(import "std/nn.kina")\n' if any(p.uses_prelude for p in progs.values()) else ""
    a = imp + "".join(s.replace('(import "std/nn.kina")\n', "") for s in srcs.values()) + extra
    (ws / "a.kina").write_text(a)
    return [ws / "kina.toml", ws / "a.kina"]


def _check_values(ws: Path, progs: dict[str, Prog], seed: int) -> None:
    for name, p in progs.items():
        ins = p.inputs(seed)
        args = [
            torch.from_numpy(a).view(torch.bfloat16) if a.dtype == np.uint16 else a for a in ins
        ]
        out = kinac.compile(ws, f"e_{name}")(*args)
        if isinstance(out, torch.Tensor):
            out = out.view(torch.int16).numpy().view(np.uint16)
        compare(np.asarray(out), p.reference(ins), p.dtype, p.source(name))


@EXAMPLES
@given(
    st.lists(programs(max_depth=3), min_size=1, max_size=2),
    st.lists(
        st.tuples(
            st.sampled_from(["replace", "extend", "literal", "comment", "space"]),
            programs(max_depth=3),
        ),
        min_size=1,
        max_size=2,
    ),
    st.integers(0, 2**31),
)
def test_edits_of_random_entries_rebuild_as_clean_builds(
    tmp_path_factory: object, first: list[Prog], edits: list[tuple[str, Prog]], seed: int
) -> None:
    root = Path(tmp_path_factory.mktemp("adv_inc"))  # type: ignore[attr-defined]
    ws, cache = root / "ws", str(root / "cache")
    ws.mkdir()
    progs = {f"f{i}": p for i, p in enumerate(first)}
    _write(ws, progs)
    live = Session(ws, cache_dir=cache)
    live.build()
    extra = ""
    for step, (kind, new) in enumerate(edits):
        if kind == "replace":
            progs[f"f{step % len(progs)}"] = new
        elif kind == "extend":  # one more op on a body: the kernels before it are reused
            progs[f"f{step % len(progs)}"] = _extended(progs[f"f{step % len(progs)}"], step)
        elif kind == "comment":
            extra += f"; edit {step}\n"
        elif kind == "space":
            extra += "\n\n"
        changed = _write(ws, progs, extra)
        if kind == "literal":  # a literal of a defn no entry builds
            extra += (
                f"(defn lit{step} [(x : (tensor f32 [N]))] -> (tensor f32 [N]) (mul x {step}.5))\n"
            )
            changed = _write(ws, progs, extra)
        got, want = after_edit(ws, cache, live, changed, use_live=bool(step % 2))
        assert got[1] == want[1], f"step {step} ({kind}): diagnostics differ"
        assert got[0] == want[0], f"step {step} ({kind}): reports differ"
        assert "error" not in want[1], want[1]
        if EACH_STEP:  # the entries through kinac.compile over the workspace's own cache
            _check_values(ws, progs, seed)
    live.close()
    if TARGET == "cpu":
        _check_values(ws, progs, seed)
