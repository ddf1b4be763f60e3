"""Whole-program facts about defns that a single defn's check cannot see: recursion.

Why apart: recursion depends on the call graph (other defns' bodies), so it is its own query
(``find_recursion``), which keeps ``check_defn`` dependent on callee signatures only.
"""

from __future__ import annotations

from kinac.check.codes import at, error
from kinac.check.prims.base import PRIMS
from kinac.check.protocol import CheckEnv, GraphEnv
from kinac.check.sig import DefnRef
from kinac.diag.model import Diagnostic, Label, NodeRef
from kinac.reader import ast


def calls_of(file: str, defn: ast.Defn, env: CheckEnv) -> tuple[tuple[DefnRef, int], ...]:
    """The defns that ``defn``'s body calls (resolved from ``file``), with each call's nid;
    syntactic, so the engine can cache it per defn body."""
    out: list[tuple[DefnRef, int]] = []
    shadow = {p.name for p in defn.signature.params}

    def walk(e: ast.Expr) -> None:
        if isinstance(e, ast.Call):
            if e.head not in PRIMS and e.head not in ("+", "*", "/") and e.head not in shadow:
                found = env.lookup(file, e.head)
                if found is not None:
                    out.append((found[0], e.nid))
            for a in e.args:
                walk(a)
            for k in e.kwargs:
                walk(k.value)
        elif isinstance(e, ast.Let):
            for b in e.bindings:
                walk(b.value)
            walk(e.body)
        elif isinstance(e, ast.The):
            walk(e.expr)
        elif isinstance(e, ast.ListLit):
            for it in e.items:
                walk(it)

    walk(defn.body)
    return tuple(out)


def find_recursion(ref: DefnRef, env: GraphEnv, limit: int = 10_000) -> Diagnostic | None:
    """K0204 if ``ref`` can reach itself through calls; the label is on the first call of the
    cycle, and the note spells the cycle out."""
    start = env.callees(ref)
    for first, nid in start:
        path = _path(first, ref, env, limit)
        if path is not None:
            names = " -> ".join([ref.name, *[p.name for p in path]])
            cyc = names if path[-1] == ref else names + f" -> {ref.name}"
            sec = tuple(
                Label(NodeRef(p.file, p.name, 0), f"`{p.name}` is on the cycle")
                for p in path
                if p != ref
            )
            return error(
                "K0204",
                f"`{ref.name}` is recursive: {cyc}",
                at(ref.file, ref.name, nid, "this call leads back to `" + ref.name + "`"),
                sec,
                notes=(
                    "Kina has no recursion: every call is inlined when an entry point is "
                    "specialised",
                ),
                help="unroll the recursion by hand, or express it with tensor operations",
            )
    return None


def _path(src: DefnRef, dst: DefnRef, env: GraphEnv, limit: int) -> list[DefnRef] | None:
    stack: list[tuple[DefnRef, list[DefnRef]]] = [(src, [src])]
    seen: set[DefnRef] = set()
    while stack and limit > 0:
        limit -= 1
        cur, path = stack.pop()
        if cur == dst:
            return path
        if cur in seen:
            continue
        seen.add(cur)
        for nxt, _nid in env.callees(cur):
            stack.append((nxt, [*path, nxt]))
    return None


def primitive_shadow(file: str, defn: ast.Defn) -> Diagnostic | None:
    """K0209: a defn named like a primitive could never be called (primitives win)."""
    if defn.name in PRIMS:
        return error(
            "K0209",
            f"the defn `{defn.name}` has the name of a primitive",
            at(file, defn.name, 0, "defined here"),
            help=f"rename it; calls of `{defn.name}` always mean the primitive",
        )
    return None
