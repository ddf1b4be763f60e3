"""Concrete checks at specialisation: deferred obligations and each call's callee assumptions.

Why: with ``solver.on_unknown = "runtime-check"`` the checker accepts a defn whose obligations
it could not decide (K0502) on the promise that they are checked at the concrete dims of every
instance. Specialisation inlines calls, so each defn it enters (the entry and every callee at
the dims its call computes) has its deferred obligations evaluated there: a violation is K0804
at the obligation, with the call that chose the dims. A callee's own assumptions (its ``where``
clauses, exact divisions, dims at least 1) are evaluated at each call too: the checker proved
or deferred each of them at the call, so one that fails although nothing deferred failed is a
bug in kinac (:class:`CheckerBug`), never a silent graph.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from kinac.check import dims as D
from kinac.check.codes import at, error
from kinac.check.dims import DimEvalError
from kinac.check.formula import Rel, holds, rel_vars
from kinac.check.oblig import explain, fmt_rel
from kinac.check.sig import DefnRef
from kinac.check.typed_ir import CheckedDefn
from kinac.diag.model import Diagnostic, Label
from kinac.tir.graph import TType


class CheckerBug(AssertionError):
    """An obligation the checker proved fails at concrete dims: an internal compiler error
    (the CLI reports it as such, exit 3), not a fault of the program."""


def dims_text(env: Mapping[str, int], names: Sequence[str] | None = None) -> str:
    """``N = 100, K = 8`` (every dim, or ``names`` in order)."""
    keys = list(names) if names is not None else sorted(env)
    return ", ".join(f"{k} = {env[k]}" for k in keys if k in env)


def _verdict(rel: Rel, env: Mapping[str, int]) -> str | None:
    """None when ``rel`` holds at ``env``; otherwise why not (sides evaluated)."""
    try:
        if holds(rel, env):
            return None
    except DimEvalError as ex:
        return str(ex)
    return explain(rel, dict(env))


def call_site(caller: DefnRef, nid: int, callee: str, env: Mapping[str, int]) -> Label:
    """The label on a call that fixes a callee's dims, with their values."""
    shown = dims_text(env)
    return at(
        caller.file,
        caller.name,
        nid,
        f"`{callee}` is called here" + (f" with {shown}" if shown else ""),
    )


def check_deferred(
    cd: CheckedDefn, env: Mapping[str, int], via: tuple[Label, ...] = ()
) -> Diagnostic | None:
    """K0804 for the first obligation of ``cd`` that was deferred when checking and is false at
    ``env`` (the defn's dims here); ``via`` labels the call that chose them."""
    for d in cd.deferred:
        why = _verdict(d.rel, env)
        if why is None:
            continue
        names = sorted(rel_vars(d.rel))
        return error(
            "K0804",
            f"{d.what}: {why}",
            d.primary,
            via,
            (
                f"when `{cd.ref.name}` was checked, {fmt_rel(d.rel)} was undecided and deferred "
                'to the concrete dims (K0502, solver.on_unknown = "runtime-check")',
            ),
            "pass dims that satisfy it, or state it in a `where` to have it proved for all dims",
            tuple((n, env[n]) for n in names if n in env),
        )
    return None


def check_callee(
    caller: DefnRef,
    nid: int,
    callee: CheckedDefn,
    env: Mapping[str, int],
    groups: Mapping[str, tuple[int, ...]],
    arg_types: Sequence[TType],
) -> Diagnostic | None:
    """The callee's assumptions at the dims a call computes. A ``@sharded`` axis that falls in
    a variadic group has no name to assume or prove, so it is judged here (K0802, as at an
    entry); any other failure is a :class:`CheckerBug`."""
    sig = callee.sig
    name = sig.ref.name
    for v, x in env.items():
        if x < 1:
            _bug(caller, nid, name, f"its dim `{v}` = {x} is not positive", env)
    for g, vals in groups.items():
        if any(x < 1 for x in vals):
            _bug(caller, nid, name, f"its group `{g}` = {list(vals)} has a dim below 1", env)
    for r in sig.assumptions:
        why = _verdict(r, env)
        if why is not None:
            _bug(caller, nid, name, f"its assumption {fmt_rel(r)} is false: {why}", env)
    tensor_index = [i for i, p in enumerate(sig.params) if not p.is_dim and p.type is not None]
    for i, axis, size, what in sig.shard_group_divs:
        k = tensor_index.index(i) if i in tensor_index else -1
        if 0 <= k < len(arg_types):
            shape = arg_types[k].shape
            if axis < len(shape) and shape[axis] % size:
                return error(
                    "K0802",
                    f"`{name}` has {what}, uneven at these dims: {size} does not divide "
                    f"{shape[axis]} (the argument's shape is {list(shape)})",
                    call_site(caller, nid, name, env),
                    (at(sig.ref.file, name, sig.params[i].nid, "sharded here"),),
                )
    return None


def _bug(caller: DefnRef, nid: int, callee: str, what: str, env: Mapping[str, int]) -> None:
    raise CheckerBug(
        f"the call of `{callee}` in `{caller.name}` (node {nid} of {caller.file}) "
        f"breaks {what} at {dims_text(env) or 'these dims'}, although the checker proved it "
        "at the call; this is a bug in kinac"
    )


def evaluate_inst(
    caller: DefnRef,
    nid: int,
    callee: str,
    inst: Sequence[tuple[str, D.Poly]],
    env: Mapping[str, int],
) -> dict[str, int]:
    """A callee's dims at a call: its instantiation evaluated at the caller's dims. An inexact
    quotient here means a divisibility the checker proved is false: a :class:`CheckerBug`."""
    out: dict[str, int] = {}
    for v, p in inst:
        try:
            out[v] = D.evaluate(p, env)
        except DimEvalError as ex:
            raise CheckerBug(
                f"the call of `{callee}` in `{caller.name}` gives `{v}` = "
                f"{D.fmt_infix(p)} no value at {dims_text(env)} ({ex}), although the checker "
                "proved it exact; this is a bug in kinac"
            ) from ex
    return out
