"""Concrete binding: a signature's dims and dtypes from concrete argument types or given dims.

Why: the Python API binds an entry point to the arrays it is called with before anything runs,
and ``kina.toml`` entries give dims by name; both must be validated against the signature
(rank, dtype, placement, every dim equation and ``where`` clause) with a diagnostic that names
the parameter and the equation it breaks, and both must complete the derived dims (``Dh``,
``G``) from the plan.
"""

from __future__ import annotations

from collections.abc import Mapping

from kinac.check import dims as D
from kinac.check.calls import instantiate
from kinac.check.codes import at, error
from kinac.check.dims import DimEvalError
from kinac.check.formula import Rel, holds
from kinac.check.oblig import explain
from kinac.check.sig import SigInfo, analyse
from kinac.check.types import SShape, SType
from kinac.diag.model import Diagnostic
from kinac.reader import ast
from kinac.rules.codec import record
from kinac.tir.graph import FLOAT_DTYPES, TType

DimValue = int | tuple[int, ...]


@record
class CallBinding:
    """Every dimension variable (groups as ``..b`` -> tuple) and dtype variable of a defn."""

    dims: tuple[tuple[str, int | tuple[int, ...]], ...]
    dtypes: tuple[tuple[str, str], ...]


def _stype(t: TType) -> SType:
    return SType(t.dtype, SShape(None, tuple(D.const(d) for d in t.shape)), t.device)


def bind_call_types(
    file: str,
    signature: ast.Signature,
    arg_types: tuple[TType, ...],
    dim_args: Mapping[str, int] | None = None,
    meshes: tuple[ast.Mesh, ...] = (),
) -> CallBinding | tuple[Diagnostic, ...]:
    """Bind ``signature`` to concrete tensor argument types (tensor parameters in order) and
    values of its ``dim`` parameters. Returns the binding or the diagnostics (K0801/K0802).
    ``meshes`` (those visible in ``file``) make ``@sharded`` parameters check their dims."""
    sig = analyse(file, signature, meshes)
    if not sig.ok:
        return sig.diagnostics
    name = sig.ref.name
    dim_args = dict(dim_args or {})
    tensors = [p for p in sig.params if not p.is_dim]
    if len(arg_types) != len(tensors):
        return (
            error(
                "K0801",
                f"`{name}` takes {len(tensors)} tensor arguments, got {len(arg_types)}",
                at(file, name, 0),
            ),
        )
    args: list[SType | D.Poly] = []
    it = iter(arg_types)
    for p in sig.params:
        if p.is_dim:
            if p.name not in dim_args:
                return (
                    error(
                        "K0802",
                        f"the dim parameter `{p.name}` of `{name}` needs a value",
                        at(file, name, p.nid),
                    ),
                )
            args.append(D.const(int(dim_args[p.name])))
        else:
            args.append(_stype(next(it)))
    b = instantiate(sig, args, name)
    if b.issues:
        return tuple(
            error(
                "K0801",
                i.message,
                at(file, name, sig.params[i.param].nid if i.param is not None else 0),
                help=i.help,
            )
            for i in b.issues
        )
    env: dict[str, int] = {}
    for v, poly in b.dims.items():
        try:
            env[v] = D.evaluate(poly, {})
        except DimEvalError:
            pass
    diags: list[Diagnostic] = []
    for n in b.needs:
        try:
            ok = holds(n.rel, {})
        except DimEvalError:
            ok = False
        if ok:
            continue
        nid = (
            sig.params[n.param].nid
            if n.param is not None
            else (sig.where[n.where][0] if n.where is not None else 0)
        )
        if n.shown:
            d = n.shown[0]
            detail = f"the argument has {D.evaluate(n.rel.lhs, {})} but {_show(d, env)}"
        elif n.where is not None and n.whole_clause:
            detail = explain(sig.where[n.where][1], env)
        else:
            detail = explain(n.rel, env)
        diags.append(
            error(
                "K0801",
                f"argument does not match `{name}`: {n.what}; {detail}",
                at(file, name, nid, "declared here"),
            )
        )
    if diags:
        return tuple(diags)
    out: dict[str, DimValue] = dict(env)
    for g, s in b.groups.items():
        out[g] = tuple(D.evaluate(x, {}) for x in s.dims)
    return CallBinding(tuple(sorted(out.items())), tuple(sorted(b.dtypes.items())))


def _show(d: D.Poly, env: dict[str, int]) -> str:
    text = D.fmt_infix(d)
    try:
        val = D.evaluate(d, env)
    except DimEvalError:
        return text
    vs = sorted(D.variables(d))
    if not vs:
        return text
    return f"{text} = {val} with " + ", ".join(f"{v} = {env.get(v, '?')}" for v in vs)


def complete_dims(
    sig: SigInfo, given: Mapping[str, DimValue]
) -> tuple[dict[str, int], dict[str, tuple[int, ...]], list[Diagnostic]]:
    """Dims of every variable of ``sig`` from the given ones (free dims, ``dim`` parameters,
    groups as ``..b``), deriving the others through ``where`` equalities; checks every
    assumption concretely (K0802)."""
    file, name = sig.ref.file, sig.ref.name
    env: dict[str, int] = {k: v for k, v in given.items() if isinstance(v, int)}
    groups = {k: tuple(v) for k, v in given.items() if isinstance(v, tuple | list)}
    failed, diags = _derive(sig, env)
    for v in sig.dim_vars:
        if v not in env and v not in failed:
            diags.append(
                error(
                    "K0802",
                    f"dimension `{v}` of `{name}` has no value",
                    at(file, name, sig.nid_of(v)),
                    help=f"give `{v}` in kina.toml's entry dims",
                )
            )
    for g in sig.groups:
        if g not in groups:
            diags.append(
                error(
                    "K0802",
                    f"variadic group `{g}` of `{name}` has no value",
                    at(file, name, sig.nid_of(g)),
                    help=f'give `"{g}" = [ … ]` in kina.toml\'s entry dims',
                )
            )
    for v in list(env):
        if env[v] < 1:
            diags.append(
                error(
                    "K0802",
                    f"dimension `{v}` = {env[v]} is not positive",
                    at(file, name, sig.nid_of(v)),
                )
            )
    for g, vals in groups.items():
        if any(x < 1 for x in vals):
            diags.append(
                error(
                    "K0802",
                    f"variadic group `{g}` = {list(vals)} has a dim that is not positive",
                    at(file, name, sig.nid_of(g)) if g in sig.groups else at(file, name, 0),
                )
            )
    if diags:
        return env, groups, diags
    for nid, r in sig.where:
        if not holds_at(r, env):
            diags.append(
                error(
                    "K0802",
                    f"where clause of `{name}` is false at these dims: {explain(r, env)}",
                    at(file, name, nid, "required here"),
                )
            )
    for r in sig.type_divs:
        if not holds_at(r, env):
            diags.append(
                error(
                    "K0802",
                    f"exact division in `{name}` is not exact: {explain(r, env)}",
                    at(file, name, 0),
                )
            )
    for i, axis, size, what in sig.shard_group_divs:
        pt = sig.params[i].type
        if pt is None or pt.shape.group not in groups:
            continue
        try:
            full = (*groups[pt.shape.group], *(D.evaluate(d, env) for d in pt.shape.dims))
        except DimEvalError:
            continue
        if axis < len(full) and full[axis] % size:
            diags.append(
                error(
                    "K0802",
                    f"`{name}` has {what}, uneven at these dims: {size} does not divide "
                    f"{full[axis]} (the shape is {list(full)})",
                    at(file, name, sig.params[i].nid, "sharded here"),
                )
            )
    for i, r, what in sig.shard_divs:
        if not holds_at(r, env):
            diags.append(
                error(
                    "K0802",
                    f"`{name}` has {what}, uneven at these dims: {explain(r, env)}",
                    at(file, name, sig.params[i].nid, "sharded here"),
                )
            )
    return env, groups, diags


def _derive(sig: SigInfo, env: dict[str, int]) -> tuple[set[str], list[Diagnostic]]:
    """Complete ``env`` in place through the ``where`` equalities that leave one unknown; the
    variables whose equality gives no positive integer (K0802 each)."""
    file, name = sig.ref.file, sig.ref.name
    diags: list[Diagnostic] = []
    failed: set[str] = set()
    progress = True
    while progress:
        progress = False
        for _nid, r in sig.where:
            if r.op != "eq":
                continue
            p = D.sub(r.lhs, r.rhs)
            unknown = D.variables(p) - set(env)
            if len(unknown) != 1:
                continue
            (x,) = unknown
            lin = D.linear_in(p, x)
            if lin is None:
                continue
            if all(c < 0 for _, c in lin[0].terms):
                lin = (D.neg(lin[0]), D.neg(lin[1]))
            try:
                a, rest = D.evaluate(lin[0], env), D.evaluate(lin[1], env)
            except DimEvalError:
                continue
            if a and (-rest) % a == 0 and -rest // a >= 1:
                env[x] = -rest // a
                progress = True
            elif x not in failed:
                failed.add(x)
                diags.append(
                    error(
                        "K0802",
                        f"where clause of `{name}` cannot hold at these dims: `{x}` would be "
                        f"{D.fmt_quot(D.neg(lin[1]), lin[0])} = {-rest}/{a}, not a positive integer",
                        at(file, name, _nid, "required here"),
                    )
                )
    return failed, diags


def unbound(
    sig: SigInfo, given: Mapping[str, DimValue], dtypes: Mapping[str, str]
) -> tuple[list[str], list[str]]:
    """``(dims, dtype variables)`` of ``sig`` that ``given`` and ``dtypes`` leave without a
    value (groups as ``..b``), after the ``where`` equalities derive what they can: what a
    caller must still give (``kinac run --dims``, or an entry's dims in ``kina.toml``)."""
    env: dict[str, int] = {k: v for k, v in given.items() if isinstance(v, int)}
    failed, _ = _derive(sig, env)
    dims: list[str] = []
    for v in sig.dim_vars:  # greedily: one of N, M with N = 2*M is enough
        if v not in env and v not in failed:
            dims.append(v)
            env[v] = 1  # a placeholder: only which variables follow matters here
            failed |= _derive(sig, env)[0]
    dims += [g for g in sig.groups if g not in given]
    return dims, [v for v in sig.dtype_vars if v not in dtypes]


def holds_at(r: Rel, env: Mapping[str, int]) -> bool:
    """Whether ``r`` holds at ``env``; a relation that cannot be evaluated there does not."""
    try:
        return holds(r, env)
    except DimEvalError:
        return False


def dtype_errors(sig: SigInfo, dtypes: Mapping[str, str]) -> list[Diagnostic]:
    """K0802 for each dtype variable of ``sig`` that an entry leaves without a value or gives
    a non-float dtype (dtype variables range over the float dtypes), at the first parameter
    typed with it (it was the defn's first character, and the help spoke of dims)."""
    file, name = sig.ref.file, sig.ref.name
    out: list[Diagnostic] = []
    for v in sig.dtype_vars:
        where = next((p.nid for p in sig.params if p.type is not None and p.type.dtype == v), 0)
        if v not in dtypes:
            out.append(
                error(
                    "K0802",
                    f"dtype variable `{v}` of `{name}` has no value",
                    at(file, name, where, f"typed `{v}`"),
                    help=f"give `{v}` in kina.toml's entry dtypes",
                )
            )
        elif dtypes[v] not in FLOAT_DTYPES:
            out.append(
                error(
                    "K0802",
                    f"dtype variable `{v}` ranges over float dtypes, not {dtypes[v]}",
                    at(file, name, where, f"typed `{v}`"),
                    help=f"give `{v}` one of {' '.join(FLOAT_DTYPES)}; for {dtypes[v]} tensors "
                    f"write the defn with {dtypes[v]} in place of `{v}`",
                )
            )
    return out
