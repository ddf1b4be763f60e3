"""One call of an entry's body specialised on its own: a graph fragment keyed by what it depends on.

Why: specialisation inlines every call into the entry's graph, so an edit to one line of a
32-layer model re-inlined all 32 layers. A call whose arguments are all tensors depends only on
its callee, its dims, groups and dtypes, its arguments' types and the default device: that is
its :class:`CallKey`, and :func:`specialise_call` gives the nodes the call adds, numbered
relative to its arguments (:class:`CallFragment`). The pipeline caches it as a query
(``specialise_call``), and :mod:`kinac.check.spec_emit` splices the fragment in place of
inlining: the same nodes, in the same order, as inlining would have added, so the entry's
graph is unchanged, but identical layers are specialised once and an edit to the entry's own
body re-specialises none of its callees.
"""

from __future__ import annotations

from typing import Any

from kinac.check.sig import DefnRef
from kinac.diag.model import Diagnostic
from kinac.rules.codec import record
from kinac.tir.graph import Node, TType, make_node


@record
class CallKey:
    """A call at concrete dims: callee, its dims, groups and dtypes (sorted pairs), the
    arguments' types, and the device the entry defaults to."""

    callee: DefnRef
    dims: tuple[tuple[str, int], ...]
    groups: tuple[tuple[str, tuple[int, ...]], ...]
    dtypes: tuple[tuple[str, str], ...]
    args: tuple[TType, ...]
    device: str


@record
class CallFragment:
    """The nodes a call adds. In ``nodes`` and ``result``, ``j < len(args)`` is argument ``j``
    and ``len(args) + i`` is the fragment's node ``i``. ``diagnostic``: why the call cannot be
    specialised at these dims (the entry fails with it), with no nodes."""

    nodes: tuple[Node, ...]
    result: int
    diagnostic: Diagnostic | None


def specialise_call(key: CallKey, env: object) -> CallFragment | None:
    """The fragment of ``key``'s call, or None when its value is not a tensor node (a weak
    scalar or a weak ``where``: the caller inlines it)."""
    from kinac.check.spec_emit import SpecAbort, SpecEmitter

    em = SpecEmitter(env, key.device)  # type: ignore[arg-type]
    em.cache_calls = False  # its own calls are inlined: one query per call of the entry
    args: list[int | object] = []
    for t in key.args:
        args.append(len(em.nodes))
        em.nodes.append(make_node("param", (), t, index=len(args) - 1))
    groups = {g: tuple(v) for g, v in key.groups}
    try:
        body, ctx = em.enter(key.callee, args, dict(key.dims), groups, dict(key.dtypes), ())  # type: ignore[arg-type]
        out = em.run(body, ctx)
    except SpecAbort as a:
        return CallFragment((), 0, a.diag)
    if not isinstance(out, int):
        return None
    return CallFragment(tuple(em.nodes[len(key.args) :]), out, None)


# The nodes a cached call became, by the fragment's identity, the call's argument nodes and
# the offset of its first node. Why: an edit of one layer re-specialises the whole entry, but
# every other call takes the same fragment (the query's value, kept by the session) at the
# same place, so its nodes are the same records: reused, not rebuilt (L=32: 32 calls of ~60
# nodes each). The memo holds each fragment, so its id is not reused while remembered.
_SPLICED: dict[tuple[int, tuple[int, ...], int], tuple[Any, tuple[Node, ...]]] = {}
SPLICED_LIMIT = 1024  # calls; then the memo starts over (a few entries' worth)


def spliced_nodes(frag: Any, args: list[int], off: int) -> tuple[Node, ...]:
    """``frag``'s nodes with its inputs renumbered to ``args`` and its own nodes moved by
    ``off`` (remembered: see ``_SPLICED``), for :class:`kinac.check.spec_emit.SpecEmitter`."""
    key = (id(frag), tuple(args), off)
    hit = _SPLICED.get(key)
    if hit is not None and hit[0] is frag:
        return hit[1]
    k = len(args)
    out = tuple(
        Node(n.op, tuple(args[x] if x < k else x + off for x in n.args), n.attrs, n.type)
        for n in frag.nodes
    )
    if len(_SPLICED) >= SPLICED_LIMIT:
        _SPLICED.clear()
    _SPLICED[key] = (frag, out)
    return out
