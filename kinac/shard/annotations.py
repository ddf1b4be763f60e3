"""Reading a parameter's sharding annotations into a layout, with the diagnostics of
annotations that contradict each other on one tensor (K0703).

The checker has already refused malformed annotations (K0702: unknown mesh, axis out of
range, ``over=`` naming a missing axis, one mesh axis splitting two dims); what is left
here is what only makes sense per mesh axis: an axis both split and partial, or given twice.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from kinac.diag.model import Diagnostic, Label, NodeRef
from kinac.reader import ast
from kinac.shard.codes import shard_diagnostic


@dataclass
class Pinned:
    """A user's layout for one tensor: axes per dim, partial axes, and where each mesh axis
    was given (the annotation's label, for diagnostics)."""

    dims: list[tuple[str, ...]]
    partial: tuple[str, ...]
    where: dict[str, Label]


def arg_of(args: Sequence[ast.AnnotArg], key: str, pos: int) -> int | str | None:
    """The argument named ``key``, else the ``pos``-th positional one (as the checker reads it)."""
    for a in args:
        if a.key == key:
            return a.value
    positional = [a.value for a in args if a.key is None]
    return positional[pos] if pos < len(positional) else None


def read_pinned(
    ty: ast.TensorType,
    rank: int,
    mesh: ast.Mesh,
    file: str,
    defn: str,
    name: str,
    replicated: bool = False,
) -> tuple[Pinned | None, list[Diagnostic]]:
    """The layout ``ty``'s annotations pin over ``mesh`` (None when none names it); ``name``
    is the parameter's (empty: the defn's result).
    ``replicated``: ``@replicated`` (naming ``mesh``, or no mesh: the entry's) pins the axes
    it names (all without ``over=``) whole, as a ``reshard``'s does (a declared result)."""
    dims: list[tuple[str, ...]] = [() for _ in range(rank)]
    partial: list[str] = []
    where: dict[str, Label] = {}
    what: dict[str, str] = {}
    diags: list[Diagnostic] = []
    any_named = False
    for an in ty.annotations:
        if an.name == "replicated" and replicated:
            if arg_of(an.args, "mesh", 0) not in (None, mesh.name):
                continue
        elif an.name not in ("sharded", "partial") or arg_of(an.args, "mesh", 1) != mesh.name:
            continue
        any_named = True
        over = [str(a.value) for a in an.args if a.key == "over"] or list(mesh.axes)
        label = Label(NodeRef(file, defn, an.nid), "")
        if an.name == "replicated":
            desc = "`@replicated`"
        elif an.name == "sharded":
            axis = arg_of(an.args, "axis", 0)
            if not isinstance(axis, int) or not -rank <= axis < rank:
                continue  # K0702, reported by the checker
            desc = f"`@sharded(axis={axis})`"
        else:
            desc = "`@partial(sum)`"
        for ax in over:
            if ax in where:
                first = where[ax]
                diags.append(
                    shard_diagnostic(
                        "K0703",
                        "error",
                        f"{_axis_name(mesh, ax)} is given two shardings on "
                        f"{f'`{name}`' if name else 'the result'} "
                        f"({what[ax]} and {desc})",
                        Label(label.loc, f"{desc} over `{ax}`"),
                        (Label(first.loc, f"{what[ax]} over `{ax}`"),),
                        help="a tensor has one layout per mesh axis: split on one dim, "
                        "replicated, or partial; keep one annotation",
                    )
                )
                continue
            where[ax] = label
            what[ax] = desc
            if an.name == "sharded":
                assert isinstance(axis, int)
                dims[axis % rank] = dims[axis % rank] + (ax,)
            elif an.name == "partial":
                partial.append(ax)
    if not any_named:
        return None, diags
    return Pinned(dims, tuple(partial), where), diags


def _axis_name(mesh: ast.Mesh, axis: str) -> str:
    """``mesh `tp` `` for a 1-D mesh (its axis is named after it), else ``mesh axis `dp` of
    `grid` ``."""
    if mesh.axes == (mesh.name,):
        return f"mesh `{mesh.name}`"
    return f"mesh axis `{axis}` of `{mesh.name}`"
