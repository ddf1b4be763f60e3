"""Sharding annotations as shape rules: what each ``@sharded`` asks of the dim it splits.

Spec section 7: ``@sharded(axis=i, mesh=m)`` splits dim ``i`` evenly over the mesh, so the
mesh's size must divide that dim ("refuted -> counterexample, as for shapes"). The size is
that of the mesh axes named by ``over=`` (repeatable; their product), or of the whole mesh
when ``over`` is absent. Here each annotation of a type becomes a divisibility relation
``size divides dim``, which the signature treats as a ``/`` in a type is treated: an
assumption inside the defn and an obligation at every call (K0413), checked at concrete dims
for an entry (K0802). A malformed annotation (an axis out of range, an ``over`` the mesh does
not have, one mesh axis splitting two dims) is K0702.

Not here: propagation of shardings through primitives, partial results and collectives.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from kinac.check import dims as D
from kinac.check.codes import error
from kinac.check.formula import Rel
from kinac.check.types import SType
from kinac.diag.model import Diagnostic, Label, NodeRef
from kinac.reader import ast


def _arg(args: Sequence[tuple[str | None, int | str]], key: str, pos: int) -> int | str | None:
    """The argument named ``key``, else the ``pos``-th positional one."""
    for k, v in args:
        if k == key:
            return v
    positional = [v for k, v in args if k is None]
    return positional[pos] if pos < len(positional) else None


def shard_divs(
    ty: SType, meshes: Sequence[ast.Mesh], group_axes: list[tuple[int, int, str]] | None = None
) -> tuple[list[tuple[Rel, int, str]], list[str]]:
    """``(relations, problems)`` for the ``@sharded`` annotations of ``ty``.

    Each relation is ``size divides dim``, with the axis and the mesh it is split over ("mesh
    `tp` (4 devices)"); problems are K0702 messages. Annotations naming an unknown mesh are
    skipped (reported elsewhere). An axis counted from the left in a type with a variadic group
    (``[..b D]``, ``axis=0``) has no dim expression here: it goes to ``group_axes`` as
    ``(axis, size, mesh)``, to be checked where the group is bound (calls, entries)."""
    by_name = {m.name: m for m in meshes}
    rels: list[tuple[Rel, int, str]] = []
    problems: list[str] = []
    used: dict[tuple[str, str], int] = {}
    dims, group = ty.shape.dims, ty.shape.group
    for sh in ty.shards:
        if sh.name != "sharded":
            continue
        mesh = _arg(sh.args, "mesh", 1)
        axis = _arg(sh.args, "axis", 0)
        if not isinstance(mesh, str) or mesh not in by_name:
            continue
        m = by_name[mesh]
        if not isinstance(axis, int):
            problems.append(f"`@sharded` on mesh `{mesh}` needs an integer `axis=`")
            continue
        over = [v for k, v in sh.args if k == "over"]
        names = [str(v) for v in over] or list(m.axes)
        bad = [a for a in names if a not in m.axes]
        if bad:
            problems.append(f"mesh `{mesh}` has no axis `{bad[0]}` (its axes: {', '.join(m.axes)})")
            continue
        for a in names:
            if (mesh, a) in used and used[(mesh, a)] != axis:
                problems.append(
                    f"mesh axis `{a}` of `{mesh}` splits two dims of one tensor "
                    f"({used[(mesh, a)]} and {axis}): a tensor carries at most one sharding "
                    "per mesh axis"
                )
            used[(mesh, a)] = axis
        if group is None:
            if not -len(dims) <= axis < len(dims):
                problems.append(
                    f"`@sharded(axis={axis})` of a rank-{len(dims)} tensor: axis out of range"
                )
                continue
            dim = dims[axis]
        elif axis < 0 and -axis <= len(dims):
            dim = dims[axis]
        else:
            dim = None  # counted from the left across a variadic group
        size = 1
        for a in names:
            size *= m.shape[m.axes.index(a)]
        if size == 1:
            continue
        axes = f" axes `{'`, `'.join(names)}`" if over else ""
        if dim is None:
            if group_axes is not None and axis >= 0:
                group_axes.append((axis, size, f"mesh `{mesh}`{axes} ({size} devices)"))
            continue
        rels.append((Rel("dvd", D.const(size), dim), axis, f"mesh `{mesh}`{axes} ({size} devices)"))
    return rels, problems


def mesh_clash(
    name: str, visible: Sequence[ast.Mesh], defn: str, primary: Label
) -> Diagnostic | None:
    """K0702 when ``name`` is declared more than once among the meshes a file sees (its own,
    its imports', kina.toml's): which one an annotation means would be an accident of order."""
    decls = list(dict.fromkeys(m for m in visible if m.name == name))
    if len(decls) < 2:
        return None
    sec = tuple(
        Label(NodeRef(m.file, "", m.nid), f"`{name}` declared here") for m in decls if m.file
    )
    notes = tuple(
        f"kina.toml's [[mesh]] declares `{name}` with shape {list(m.shape)}"
        for m in decls
        if not m.file
    )
    return error(
        "K0702",
        f"mesh `{name}` is declared {len(decls)} times where `{defn}` is checked",
        primary,
        sec,
        notes=notes,
        help="a mesh name must be declared once among this file, the files it imports and "
        "kina.toml: rename or delete one declaration",
    )


def mesh_names(
    typed: Sequence[tuple[SType | None, int]],
    visible: Sequence[ast.Mesh],
    defn: str,
    label: Callable[[int, str], Label],
) -> list[Diagnostic]:
    """Every mesh an annotation names (``typed``: a signature's types and their nodes) is
    declared (K0702), and declared once among what this file sees (K0702 naming each)."""
    names = {m.name for m in visible}
    reported: set[str] = set()
    out: list[Diagnostic] = []
    for ty, nid in typed:
        if ty is None:
            continue
        for sh in ty.shards:
            v = mesh_of(sh.name, sh.args)
            if v is not None:
                if v not in names:
                    out.append(
                        error(
                            "K0702",
                            f"unknown mesh `{v}` in `@{sh.name}`",
                            label(nid, ""),
                            help="declare it at top level: (mesh NAME [SIZE …]), or in "
                            "kina.toml's [[mesh]]",
                        )
                    )
                elif v not in reported:
                    reported.add(str(v))
                    clash = mesh_clash(str(v), visible, defn, label(nid, "which one?"))
                    if clash is not None:
                        out.append(clash)
    return out


def file_mesh_clashes(
    file: str,
    visible: Sequence[ast.Mesh],
    signatures: Sequence[ast.Signature],
) -> list[Diagnostic]:
    """K0702 once for each mesh name that ``file`` sees declared more than once (its own
    forms, its direct imports', kina.toml's), although none of its ``signatures``' annotations
    names it: those are reported at the annotation, per defn (:func:`mesh_names`); two
    declarations in the file itself are the reader's K0128. The label is on the file's own
    declaration, else on the first one in a source file; the others are secondary labels (or
    notes, for kina.toml). Span-free inputs only, so a comment edit re-runs nothing here."""
    used = _signature_mesh_names(signatures)
    out: list[Diagnostic] = []
    for name in dict.fromkeys(m.name for m in visible):
        decls = list(dict.fromkeys(m for m in visible if m.name == name))
        if len(decls) < 2 or name in used:
            continue
        if all(m.file == file for m in decls):
            continue  # K0128
        first = next((m for m in decls if m.file == file), None) or next(
            (m for m in decls if m.file), decls[0]
        )
        primary = Label(NodeRef(first.file, "", first.nid), f"`{name}` declared here")
        sec = tuple(
            Label(NodeRef(m.file, "", m.nid), f"`{name}` declared here")
            for m in decls
            if m.file and m is not first
        )
        notes = tuple(
            f"kina.toml's [[mesh]] declares `{name}` with shape {list(m.shape)}"
            for m in decls
            if not m.file
        )
        out.append(
            error(
                "K0702",
                f"mesh `{name}` is declared {len(decls)} times among what `{file}` sees "
                "(its own meshes, its imports', kina.toml's)",
                primary,
                sec,
                notes=notes,
                help="a mesh name must be declared once among a file, the files it imports and "
                "kina.toml: rename or delete one declaration",
            )
        )
    return out


def _signature_mesh_names(signatures: Sequence[ast.Signature]) -> set[str]:
    """Mesh names that the annotations of ``signatures`` name."""
    out: set[str] = set()
    for sig in signatures:
        types = [p.type for p in sig.params if p.type is not None] + [sig.ret]
        for t in types:
            for an in t.annotations:
                v = mesh_of(an.name, tuple((a.key, a.value) for a in an.args))
                if v is not None:
                    out.add(v)
    return out


_KEYS = {
    "sharded": ("axis", "mesh", "over"),
    "partial": ("mesh", "over"),
    "replicated": ("mesh", "over"),
}


def annotation_problems(
    name: str, args: Sequence[tuple[str | None, int | str]]
) -> list[tuple[str, str]]:
    """``(message, help)`` for each way a sharding annotation is malformed beyond what
    :func:`shard_divs` judges: an argument it does not take (``foo=3``), no mesh (``@sharded
    (axis=0)`` was silently no split at all), a ``@partial`` reduction other than ``sum`` (the
    planner read ``@partial(max, …)`` as a sum). Spec section 7 has ``@sharded(axis=I,
    mesh=M)``, ``@partial(sum, mesh=M)`` and ``@replicated``."""
    if name not in _KEYS:
        return []
    out: list[tuple[str, str]] = []
    usage = {
        "sharded": "`@sharded(axis=I, mesh=M)`, `over=A` repeatable on an N-D mesh",
        "partial": "`@partial(sum, mesh=M)`, `over=A` repeatable on an N-D mesh",
        "replicated": "`@replicated`, or `@replicated(mesh=M, over=A)`",
    }[name]
    for k, _v in args:
        if k is not None and k not in _KEYS[name]:
            out.append((f"`@{name}` has no argument `{k}=`", f"write {usage}"))
    positional = [v for k, v in args if k is None]
    if len(positional) > (2 if name != "replicated" else 1):
        out.append((f"`@{name}` has too many positional arguments", f"write {usage}"))
    if name == "partial":
        op = positional[0] if positional else None
        if op != "sum":
            out.append(
                (
                    f"`@partial` sums over the devices; `{op}` is no partial reduction"
                    if op is not None
                    else "`@partial` needs its reduction, `sum`",
                    f"write {usage}; a max or min over devices has no partial form (the planner "
                    "gathers such a dim instead)",
                )
            )
    if name in ("sharded", "partial") and mesh_of(name, args) is None:
        out.append((f"`@{name}` names no mesh", f"write {usage}"))
    return out


def mesh_of(name: str, args: Sequence[tuple[str | None, int | str]]) -> str | None:
    """The mesh a sharding annotation names: ``mesh=M``, or its second positional argument
    (``@sharded(0, tp)``, ``@partial(sum, tp)``; the first of ``@replicated(tp)``), as
    :func:`shard_divs` reads it."""
    if name not in ("sharded", "partial", "replicated"):
        return None
    v = _arg(args, "mesh", 0 if name == "replicated" else 1)  # `@replicated(tp)` too
    return v if isinstance(v, str) else None
