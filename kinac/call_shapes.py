"""Which argument to blame when call arguments' shapes disagree, and how to say it.

Binding dims from the arguments in parameter order takes the first argument's dims as the
truth, so one wrong first argument blamed every right one. Two better references: an entry's
fixed dims (``kina.toml``, ``kinac run --dims``), and otherwise the majority of the arguments.
Pure functions over the declared parameters and the arguments' concrete types.
"""

from __future__ import annotations

from typing import Any


def axis_names(declared: Any, rank: int) -> list[str | None]:
    """The dim variable named at each axis of a declared parameter type (None for literals,
    expressions, and the axes of a leading variadic group)."""
    from kinac.reader.ast import DimVar, DimVariadic

    dims = tuple(declared.dims) if declared is not None else ()
    named = [d for d in dims if not isinstance(d, DimVariadic)]
    lead = rank - len(named)  # a group takes the leading axes; the named ones are the trailing
    names: list[str | None] = [None] * max(lead, 0)
    names += [d.name if isinstance(d, DimVar) else None for d in named]
    return (names + [None] * rank)[:rank]


def fixed_shape_problems(
    params: list[Any], expected: Any, types: tuple[Any, ...], fixed_by: str, fixed_what: str
) -> list[str]:
    """One sentence per argument whose dtype differs from the one the fixed dtypes give it
    (compared before binding: binding would take the argument's dtype as the truth and run
    the entry at it), and per argument axis that differs from the fixed shape.

    ``params`` are the tensor parameters (AST), ``expected`` the graph's ``(name, TType)``
    parameters at the fixed dims, ``types`` the arguments' concrete types."""
    declared = {p.name: p.type for p in params}
    problems = []
    for (name, want), got in zip(expected, types, strict=False):
        var = getattr(declared.get(name), "dtype", want.dtype)
        if got.dtype != want.dtype and var != want.dtype:
            # a dtype variable the entry fixes (a declared dtype is the binder's K0801): the
            # runtime never casts, and binding would run the entry at the argument's dtype
            hint = (
                ": pass bf16 as torch.bfloat16 (or uint16 bit patterns to `kinac run`)"
                if want.dtype == "bf16"
                else ""
            )
            problems.append(
                f"argument `{name}` has dtype {got.dtype}, but {fixed_by} expects "
                f"{want.dtype} ({fixed_what} fixes {var} = {want.dtype}){hint}"
            )
        if tuple(got.shape) == tuple(want.shape):
            continue
        head = f"argument `{name}` has shape {list(got.shape)}, but {fixed_by} expects {list(want.shape)}"
        if len(got.shape) != len(want.shape):
            problems.append(
                f"{head}: rank {len(got.shape)}, {fixed_what} gives rank {len(want.shape)}"
            )
            continue
        names = axis_names(declared.get(name), len(want.shape))
        for axis, (g, w) in enumerate(zip(got.shape, want.shape, strict=True)):
            if g != w:
                dim = names[axis]
                fixed = f"{fixed_what} fixes {dim} = {w}" if dim else f"{fixed_what} gives {w}"
                problems.append(f"{head}: axis {axis}{f' ({dim})' if dim else ''} is {g}, {fixed}")
    return problems


def majority_blame(
    params: list[Any], types: tuple[Any, ...], dim_args: dict[str, int]
) -> str | None:
    """When arguments disagree on a dim, name the ones that disagree with the majority.

    Each axis named by a dim variable votes for its size; a dim parameter given by the caller
    decides alone; otherwise the most votes win, a tie going to the first argument. None when
    the disagreement is not of this kind (a rank error, or dims that are expressions)."""
    from kinac.reader.ast import DimVariadic

    votes: dict[str, dict[int, list[tuple[str, int]]]] = {}
    shapes: dict[str, tuple[int, ...]] = {}
    for p, t in zip(params, types, strict=True):
        shapes[p.name] = tuple(t.shape)
        declared = tuple(p.type.dims) if p.type is not None else ()
        if len(declared) != len(t.shape) and not any(isinstance(d, DimVariadic) for d in declared):
            return None  # a rank error: the binder's message says it best
        for axis, name in enumerate(axis_names(p.type, len(t.shape))):
            if name is not None:
                votes.setdefault(name, {}).setdefault(int(t.shape[axis]), []).append((p.name, axis))
    lines = []
    for var, by_value in votes.items():
        if len(by_value) < 2:
            continue
        best = dim_args.get(var, max(by_value, key=lambda v: len(by_value[v])))
        agree = list(dict.fromkeys(arg for arg, _ in by_value.get(best, [])))
        verb = "says" if len(agree) == 1 else "say"
        said = (
            f"{', '.join(f'`{a}`' for a in agree)} {verb} {var} = {best}"
            if agree
            else f"the dim parameter gives {var} = {best}"
        )
        for value, where in by_value.items():
            if value == best:
                continue
            for arg, ax in where:
                lines.append(
                    f"argument `{arg}` has shape {list(shapes[arg])}: axis {ax} ({var}) is {value}, but {said}"
                )
    return "\n".join(lines) or None
