"""``reshard`` and the collective primitives written by hand: pinned layouts and their checks.

Why apart from propagation: a written ``(reshard x ANNOT …)`` or ``(all-reduce x ANNOT …)`` is
a graph op ``reshard`` (``kind`` = the primitive, ``layout`` = its annotations as written)
whose result layout the user fixed. Its factor rule is a barrier (``opaque``): propagation
never carries a layout across it, so the operand keeps the layout its own producers and
consumers give it, and the result is pinned like an annotated parameter (user annotations
win). Planning then reads the operand as it is and redistributes it into the pinned layout
with the one rule every seam uses (:func:`kinac.shard.redistribute.moves`).

The annotations give the result's whole layout, as a parameter's do: over the mesh axes they
name, what they say (``@replicated``: every axis it names, all of them without ``over=``);
over every other axis, replicated. A collective must also *be* its change, per mesh axis
whose layout changes: ``all-reduce`` P(sum) -> R, ``all-gather`` S(d) -> R, ``reduce-scatter``
P(sum) -> S(d), ``all-to-all`` S(d) -> S(e) with d != e; a collective that changes nothing
(the tensor is not partial / not split over its axis) or changes an axis another way is
K0707, as is a ``reshard`` to a partial sum the operand is not (no collective makes one).
Annotations naming a mesh, an axis or a dim the entry does not have are K0706.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from kinac.diag.model import Diagnostic, Label, NodeRef
from kinac.dtypes import ITEMSIZE
from kinac.reader import ast
from kinac.shard.annotations import Pinned
from kinac.shard.codes import shard_diagnostic
from kinac.shard.model import Collective, Use
from kinac.shard.redistribute import moves
from kinac.tir.graph import Graph, Node

Annot = tuple[str, tuple[tuple[str | None, Any], ...]]

DEFAULTS = {"all-reduce": "R", "all-gather": "R"}
"""What a collective written without annotations means: replicated over the whole mesh."""

CHANGES = {
    "all-reduce": {("P", "R")},
    "all-gather": {("S", "R")},
    "reduce-scatter": {("P", "S")},
    "all-to-all": {("S", "S")},
}
"""Per mesh axis whose layout changes: (before, after) kinds each collective performs."""


def site_label(node: Node, text: str = "") -> Label:
    """Where the ``reshard`` node was written."""
    file, defn, nid = node.attr("site", ("", "", 0))
    return Label(NodeRef(str(file), str(defn), int(nid)), text)


def _arg(args: Sequence[tuple[str | None, Any]], key: str, pos: int) -> Any:
    for k, v in args:
        if k == key:
            return v
    positional = [v for k, v in args if k is None]
    return positional[pos] if pos < len(positional) else None


def mesh_named(graph: Graph) -> str | None:
    """The mesh the first annotation of a written ``reshard``/collective names (for an entry
    whose signature names none)."""
    for n in graph.nodes:
        if n.op != "reshard":
            continue
        for name, args in n.attr("layout", ()):
            mesh = _arg(args, "mesh", 0 if name == "replicated" else 1)
            if isinstance(mesh, str):
                return mesh
    return None


def unknown_mesh(graph: Graph, known: set[str]) -> list[Diagnostic]:
    """K0706 for a written ``reshard``/collective naming a mesh no declaration gives (an
    entry with no other mesh: nothing else would report it)."""
    name = mesh_named(graph)
    if name is None or name in known:
        return []
    node = next(
        n
        for n in graph.nodes
        if n.op == "reshard"
        and any(
            _arg(args, "mesh", 0 if k == "replicated" else 1) == name
            for k, args in n.attr("layout", ())
        )
    )
    have = ", ".join(f"`{m}`" for m in sorted(known)) or "none"
    return [
        _bad(
            node,
            f"{_what(node)} names mesh `{name}`, which is not declared (meshes: {have})",
            help="declare it with `(mesh NAME [N])` or in kina.toml's [[mesh]]",
        )
    ]


def _what(node: Node) -> str:
    return f"`{node.attr('kind', 'reshard')}`"


def read_explicit(graph: Graph, mesh: ast.Mesh) -> tuple[dict[int, Pinned], list[Diagnostic]]:
    """The layout each ``reshard`` node pins over ``mesh``, and K0703/K0706 diagnostics."""
    pins: dict[int, Pinned] = {}
    diags: list[Diagnostic] = []
    for i, node in enumerate(graph.nodes):
        if node.op != "reshard" or node.attr("cotangent"):
            continue  # a reverse reshard (a gradient's) is pinned by kinac.shard.grad
        pin, ds = _read_one(node, mesh)
        diags += ds
        if pin is not None:
            pins[i] = pin
    return pins, diags


def without_cascades(
    diagnostics: Sequence[Diagnostic], explicit: Sequence[Diagnostic]
) -> tuple[Diagnostic, ...]:
    """``diagnostics`` without the K0707s a refused written layout causes: when a ``reshard``
    or collective is K0706 (its layout not pinned), a collective after it sees the wrong
    operand layout and would report that it changes nothing; the K0706 says why."""
    if not any(d.code == "K0706" and d.is_error for d in explicit):
        return tuple(diagnostics)
    return tuple(d for d in diagnostics if d.code != "K0707")


def _read_one(node: Node, mesh: ast.Mesh) -> tuple[Pinned | None, list[Diagnostic]]:
    rank = len(node.type.shape)
    label = site_label(node)
    kind = str(node.attr("kind", "reshard"))
    annots: list[Annot] = list(node.attr("layout", ()))
    if not annots:
        if kind not in DEFAULTS:
            return None, [
                _bad(
                    node,
                    f"{_what(node)} names no layout: it needs the layout it produces",
                    help=f"write it, e.g. `({kind} x @sharded(axis=0, mesh={mesh.name}))`",
                )
            ]
        annots = [("replicated", ())]
    dims: list[tuple[str, ...]] = [() for _ in range(rank)]
    partial: list[str] = []
    where: dict[str, Label] = {}
    what: dict[str, str] = {}
    diags: list[Diagnostic] = []
    for name, args in annots:
        m = _arg(args, "mesh", 0 if name == "replicated" else 1)
        if m is not None and m != mesh.name:
            diags.append(
                _bad(
                    node,
                    f"{_what(node)} names mesh `{m}`, but this entry is sharded over "
                    f"`{mesh.name}` (axes {', '.join(mesh.axes)})",
                    help=f"one mesh per entry: use `mesh={mesh.name}`",
                )
            )
            continue
        over = [str(v) for k, v in args if k == "over"] or list(mesh.axes)
        bad = [a for a in over if a not in mesh.axes]
        if bad:
            diags.append(
                _bad(
                    node,
                    f"{_what(node)} names mesh axis `{bad[0]}`, which mesh `{mesh.name}` does "
                    f"not have (its axes: {', '.join(mesh.axes)})",
                    help="name one of the mesh's axes in `over=`",
                )
            )
            continue
        axis = _arg(args, "axis", 0)
        if name == "sharded" and (not isinstance(axis, int) or not -rank <= axis < rank):
            diags.append(
                _bad(
                    node,
                    f"{_what(node)} splits dim {axis} of a rank-{rank} tensor",
                    help=f"`axis=` is a dim of the tensor: 0 to {rank - 1}"
                    if rank
                    else "a rank-0 tensor has no dim to split: it is replicated or partial",
                )
            )
            continue
        desc = {"sharded": f"`@sharded(axis={axis})`", "partial": "`@partial(sum)`"}.get(
            name, "`@replicated`"
        )
        for ax in over:
            if ax in where:
                diags.append(
                    shard_diagnostic(
                        "K0703",
                        "error",
                        f"mesh axis `{ax}` is given two layouts by one {_what(node)} "
                        f"({what[ax]} and {desc})",
                        Label(label.loc, f"{desc} over `{ax}`"),
                        help="a tensor has one layout per mesh axis: keep one annotation",
                    )
                )
                continue
            where[ax] = label
            what[ax] = desc
            if name == "sharded":
                dims[axis % rank] = dims[axis % rank] + (ax,)
            elif name == "partial":
                partial.append(ax)
    if diags:
        return None, diags
    for d, axes in enumerate(dims):
        n = 1
        for a in axes:
            n *= mesh.shape[mesh.axes.index(a)]
        if node.type.shape[d] % n:
            diags.append(
                _bad(
                    node,
                    f"{_what(node)} splits dim {d} (size {node.type.shape[d]}) over "
                    f"{' x '.join(f'`{a}`' for a in axes)} ({n} devices), which does not divide it",
                    help="split a dim the mesh axes divide, or another mesh",
                )
            )
    if diags:
        return None, diags
    for ax in mesh.axes:  # every axis is pinned: named or replicated
        where.setdefault(ax, label)
    return Pinned(dims, tuple(partial), where), []


def _bad(node: Node, msg: str, help: str) -> Diagnostic:
    return shard_diagnostic("K0706", "error", msg, site_label(node, "written here"), help=help)


def spec_kind(dims: Sequence[tuple[str, ...]], partial: Sequence[str], axis: str) -> str:
    """``P``, ``S<d>`` or ``R`` over one mesh axis."""
    if axis in partial:
        return "P"
    for d, axes in enumerate(dims):
        if axis in axes:
            return f"S{d}"
    return "R"


_SPEC = {"P": "P(sum)", "R": "R"}


def _spec_text(s: str) -> str:
    return _SPEC.get(s, f"S({s[1:]})")


def plan_explicit(
    graph: Graph,
    i: int,
    src: Use,
    dst: Use,
    axes: Sequence[tuple[str, int]],
    tensor: str,
) -> tuple[list[Collective], list[Diagnostic]]:
    """The collectives that bring operand layout ``src`` to the pinned ``dst`` at ``reshard``
    node ``i``, and K0707 when they are not what a written collective says it does."""
    node = graph.nodes[i]
    kind = str(node.attr("kind", "reshard"))
    label = site_label(node, f"{_what(node)} written here")
    steps = moves((tuple(src.dims), tuple(src.partial)), (tuple(dst.dims), tuple(dst.partial)))
    if steps is None:
        new = [p for p in dst.partial if p not in src.partial]
        return [], [
            shard_diagnostic(
                "K0707",
                "error",
                f"{_what(node)} asks for a partial sum over `{new[0]}`, but {tensor} is not "
                f"one over `{new[0]}`: no collective makes a value partial",
                label,
                help="drop the `@partial(sum)` (a partial sum comes from contracting a split dim)",
            )
        ]
    diags: list[Diagnostic] = []
    if kind in CHANGES:
        changed = []
        for ax, _ in axes:
            a = spec_kind(src.dims, src.partial, ax)
            b = spec_kind(dst.dims, dst.partial, ax)
            if a != b:
                changed.append((ax, a, b))
        wrong = [(ax, a, b) for ax, a, b in changed if (a[0], b[0]) not in CHANGES[kind]]
        if not changed:
            want = {"all-reduce": "a partial sum", "reduce-scatter": "a partial sum"}.get(
                kind, "split"
            )
            now = ", ".join(
                f"{_spec_text(spec_kind(src.dims, src.partial, ax))} over `{ax}`" for ax, _ in axes
            )
            diags.append(
                shard_diagnostic(
                    "K0707",
                    "error",
                    f"{_what(node)} changes nothing: {tensor} is not {want} over any mesh axis "
                    f"it names ({now})",
                    label,
                    help=f"{_article(kind)} takes a tensor that is {want} over its axis; drop it, or "
                    "use `reshard` to state a layout",
                )
            )
        for ax, a, b in wrong:
            would = _would(a, b)
            diags.append(
                shard_diagnostic(
                    "K0707",
                    "error",
                    f"{_what(node)} cannot turn {tensor} from {_spec_text(a)} into "
                    f"{_spec_text(b)} over `{ax}`" + (f": that is {would}" if would else ""),
                    label,
                    help="name the collective that makes this change, or write `reshard` "
                    f"(annotations not naming `{ax}` make it replicated over `{ax}`)",
                )
            )
    if diags:
        return [], diags
    t = graph.nodes[node.args[0]].type
    label = site_label(node, f"{_what(node)} written here")
    reason = f"{_what(node)} to its written layout"
    if node.attr("cotangent"):  # a gradient's reverse reshard (kinac.shard.grad)
        reason = f"the cotangent of {_what(node)}, back to its operand's layout"
    return move_collectives(t, node.args[0], i, src, steps, axes, label, reason), []


def move_collectives(
    t: Any,
    tensor: int,
    consumer: int,
    src: Use,
    steps: Sequence[Any],
    axes: Sequence[tuple[str, int]],
    cause: Label | None,
    reason: str,
) -> list[Collective]:
    """The planned ``Collective`` of each redistribution step (``redistribute.moves``) of
    ``tensor`` (type ``t``) from layout ``src``, with the cost model's bytes: all-reduce and
    reduce-scatter move the local partial before the step, the others the local tensor after
    it, a slice nothing. Shared by written reshards and declared result layouts."""
    sizes = dict(axes)
    out = []
    for m in steps:
        before_split = 1
        for axs in (tuple(d) for d in src.dims):
            for a in axs:
                before_split *= sizes[a]
        n = 1
        for axs in m.dims:
            for a in axs:
                n *= sizes[a]
        nbytes = 0 if m.kind == "slice" else t.numel * ITEMSIZE[t.dtype] // n
        if m.kind in ("all-reduce", "reduce-scatter"):
            nbytes = t.numel * ITEMSIZE[t.dtype] // before_split
        out.append(Collective(m.kind, m.axis, tensor, consumer, nbytes, cause, reason))
        src = Use(m.dims, m.partial)
    return out


def _would(a: str, b: str) -> str:
    """The collective that does change ``a`` -> ``b`` (spec kinds), if any."""
    for kind, pairs in CHANGES.items():
        if (a[0], b[0]) in pairs:
            return _article(kind)
    return ""


def _article(kind: str) -> str:
    return f"an {kind}" if kind[0] == "a" else f"a {kind}"
