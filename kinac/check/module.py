"""Whole-program facts about defns that a single defn's check cannot see: recursion.

Why apart: recursion depends on the call graph (other defns' bodies), so it is its own query
(``find_recursion``), which keeps ``check_defn`` dependent on callee signatures only.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

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
    cycle, and the note spells the cycle out. Linear in what ``ref`` reaches; to judge many
    defns at once (a whole file), :func:`recursion_of` shares one walk between them."""
    return recursion_of((ref,), env).get(ref)


def recursion_of(refs: Sequence[DefnRef], env: GraphEnv) -> dict[DefnRef, Diagnostic]:
    """K0204 for each of ``refs`` that is on a call cycle. One iterative walk (Tarjan's strongly
    connected components) over everything ``refs`` reach: linear time, no recursion, so a
    chain of thousands of calls costs thousands of steps, not millions."""
    comp = _components(refs, env)
    out: dict[DefnRef, Diagnostic] = {}
    inner: dict[frozenset[DefnRef], dict[DefnRef, list[DefnRef]]] = {}
    for ref in refs:
        c = comp.get(ref)
        if c is None:
            continue
        members, self_loop = c
        if len(members) > 1 or self_loop:
            if members not in inner:  # the calls inside the component, listed once
                inner[members] = {  # in a defined order: the callees it reads are its trace
                    m: [w for w, _nid in env.callees(m) if w in members]
                    for m in sorted(members, key=lambda r: (r.file, r.name))
                }
            d = _cycle_error(ref, members, env, inner[members])
            if d is not None:
                out[ref] = d
    return out


def _components(
    refs: Sequence[DefnRef], env: GraphEnv
) -> dict[DefnRef, tuple[frozenset[DefnRef], bool]]:
    """Each reached defn's strongly connected component and whether it calls itself."""
    index: dict[DefnRef, int] = {}
    low: dict[DefnRef, int] = {}
    on_stack: set[DefnRef] = set()
    stack: list[DefnRef] = []
    out: dict[DefnRef, tuple[frozenset[DefnRef], bool]] = {}
    self_loops: set[DefnRef] = set()
    work: list[tuple[DefnRef, Iterator[DefnRef]]] = []

    def enter(v: DefnRef) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        succ = [w for w, _nid in env.callees(v)]
        if v in succ:
            self_loops.add(v)
        work.append((v, iter(succ)))

    for root in refs:
        if root in index:
            continue
        enter(root)
        while work:
            v, it = work[-1]
            w = next(it, None)
            if w is not None:
                if w not in index:
                    enter(w)
                elif w in on_stack:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                u = work[-1][0]
                low[u] = min(low[u], low[v])
            if low[v] == index[v]:
                members: list[DefnRef] = []
                while True:
                    w = stack.pop()
                    on_stack.discard(w)
                    members.append(w)
                    if w == v:
                        break
                fm = frozenset(members)
                for m in members:
                    out[m] = (fm, m in self_loops)
    return out


_SHOWN = 8
"""A long cycle's message shows this many of its defns (a 1,500-defn cycle, reported for each
member, would otherwise print millions of names)."""


def _cycle_error(
    ref: DefnRef,
    members: frozenset[DefnRef],
    env: GraphEnv,
    succ: dict[DefnRef, list[DefnRef]],
) -> Diagnostic | None:
    for first, nid in env.callees(ref):
        if first not in members:
            continue
        path = _path(first, ref, succ)
        if path is not None:
            ring = [ref, *path] if path[-1] == ref else [ref, *path, ref]
            if len(ring) > _SHOWN + 2:  # a long cycle: its ends, and how long it is
                ring_text = [p.name for p in ring[: _SHOWN // 2]]
                ring_text += [f"… ({len(ring) - 1} calls) …"]
                ring_text += [p.name for p in ring[-(_SHOWN // 2) :]]
            else:
                ring_text = [p.name for p in ring]
            cyc = " -> ".join(ring_text)
            sec = tuple(
                Label(NodeRef(p.file, p.name, 0), f"`{p.name}` is on the cycle")
                for p in [p for p in path if p != ref][:_SHOWN]
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


def _path(src: DefnRef, dst: DefnRef, succ: dict[DefnRef, list[DefnRef]]) -> list[DefnRef] | None:
    """A call path from ``src`` to ``dst`` inside one component (``succ``: its calls),
    depth-first, last call first; paths are parent links, so a long cycle costs linear time."""
    trail: list[tuple[DefnRef, int]] = [(src, -1)]  # (defn, index of the link before it)
    todo = [0]
    seen: set[DefnRef] = set()
    while todo:
        k = todo.pop()
        cur = trail[k][0]
        if cur == dst:
            path: list[DefnRef] = []
            while k >= 0:
                path.append(trail[k][0])
                k = trail[k][1]
            return path[::-1]
        if cur in seen:
            continue
        seen.add(cur)
        for nxt in succ[cur]:
            trail.append((nxt, k))
            todo.append(len(trail) - 1)
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
