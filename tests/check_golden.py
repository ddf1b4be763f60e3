"""The snapshot driver for ``tests/golden/check``: check a case file, render what it produces.

A case is one ``.kina`` file; leading comment directives ask for more than the check of every
defn: ``; budget MS`` (solver budget), ``; entry NAME K=V … [T=dtype] [device=D]``
(specialise), ``; bind NAME f32[2,3] … [dims H=4 …]`` (concrete binding). The rendering is
the lead's plain-text renderer, with node refs resolved through the reader's span tables.
"""

from __future__ import annotations

import re
from pathlib import Path

import goldens
from check_support import Workspace

from kinac.check import (
    DefnRef,
    SolveResult,
    bind_call_types,
    find_recursion,
    format_types,
    primitive_shadow,
    specialise,
)
from kinac.diag.model import Diagnostic
from kinac.tir.graph import TType

GOLDEN = Path(__file__).resolve().parent / "golden" / "check"


def _ttype(s: str) -> TType:
    m = re.fullmatch(r"(\w+)\[([\d,]*)\](?:@(\S+))?", s)
    assert m, s
    shape = tuple(int(x) for x in m.group(2).split(",") if x)
    return TType(m.group(1), shape, m.group(3) or "cpu")


def run_case(
    path: Path, solve_cache: dict | None = None
) -> tuple[str, list[Diagnostic], Workspace]:
    """Check the case; return the rendered text, the diagnostics and the workspace."""
    rel = path.name
    text = path.read_text()
    budget = 2000
    for line in text.splitlines():
        if line.startswith("; budget "):
            budget = int(line.split()[2])
    ws = Workspace({rel: text}, solve_cache=solve_cache)
    ws.env.budget_ms = budget
    if "\n; on-unknown runtime-check" in "\n" + text:
        ws.env.on_unknown = "runtime-check"
    if "\n; solver-says unknown" in "\n" + text:  # stands for a budget the solver runs out of
        ws.env.solve = lambda formula: SolveResult("unknown", reason="the solver ran out of budget")  # type: ignore[method-assign]
    pf = ws.env.file(rel)
    assert pf is not None
    diags: list[Diagnostic] = []
    types: list[str] = []
    seen: set[str] = set()
    for d in pf.defns:
        if d.name in seen:
            continue
        seen.add(d.name)
        ref = DefnRef(rel, d.name)
        sh = primitive_shadow(rel, d)
        if sh is not None:
            diags.append(sh)
        rec = find_recursion(ref, ws.env)
        if rec is not None:
            diags.append(rec)
        c = ws.env.checked(ref)
        diags.extend(c.diagnostics)
        types.append(format_types(c))
    extra: list[str] = []
    for line in text.splitlines():
        if line.startswith("; entry "):
            extra.append(_entry(ws, rel, line, diags))
        elif line.startswith("; bind "):
            extra.append(_bind(ws, rel, pf, line, diags))
    out = ws.render(diags)
    if not diags:
        out = "".join(types) + "".join(extra)
    return out, diags, ws


def _entry(ws: Workspace, rel: str, line: str, diags: list[Diagnostic]) -> str:
    parts = line.split()[2:]
    name, kv = parts[0], dict(p.split("=") for p in parts[1:])
    device = kv.pop("device", "cpu")
    dims = {k: int(v) for k, v in kv.items() if v.isdigit()}
    dtypes = {k: v for k, v in kv.items() if not v.isdigit()}
    sp = specialise(DefnRef(rel, name), dims, dtypes, ws.env, default_device=device)
    diags.extend(sp.diagnostics)
    if sp.graph is None:
        return ""
    ops = " ".join(n.op for n in sp.graph.nodes)
    return f"entry {name} at {dict(sp.dims)}: {ops}\n"


def _bind(ws: Workspace, rel: str, pf, line: str, diags: list[Diagnostic]) -> str:
    parts = line.split()[2:]
    name = parts[0]
    rest = parts[1:]
    dims: dict[str, int] = {}
    if "dims" in rest:
        i = rest.index("dims")
        dims = {k: int(v) for k, v in (p.split("=") for p in rest[i + 1 :])}
        rest = rest[:i]
    sig = next(d.signature for d in pf.defns if d.name == name)
    r = bind_call_types(rel, sig, tuple(_ttype(t) for t in rest), dims)
    if isinstance(r, tuple):
        diags.extend(r)
        return ""
    return f"bind {name}: {dict(r.dims)} {dict(r.dtypes)}\n"


def golden_compare(path: Path, got: str) -> None:
    """``got`` against the case's ``.out`` (missing fails; ``--update-goldens`` writes it)."""
    goldens.compare(path.with_suffix(".out"), got, path.name)
