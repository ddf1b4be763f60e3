"""Checking a call of another defn: arguments against the callee's signature.

Why apart from ``infer.py``: a call is where a defn meets its callees, by signature only. The
callee's variables are instantiated from the arguments (``calls.instantiate``); what cannot be
settled syntactically becomes obligations under the caller's assumptions, labelled with the
callee's parameter or ``where`` clause.
"""

from __future__ import annotations

from typing import Any

from kinac.check import dims as D
from kinac.check.calls import instantiate as instantiate  # re-exported: tests patch it here
from kinac.check.formula import Rel
from kinac.check.infer import Checker, CheckFail
from kinac.check.sig import DefnRef, analyse
from kinac.check.typed_ir import TCall, TExpr
from kinac.check.types import SShape, SType
from kinac.diag.model import Diagnostic, Label, NodeRef
from kinac.reader import ast


def check_call(ck: Checker, e: ast.Call, ref: DefnRef, sig_ast: ast.Signature) -> TExpr:
    """Check ``e``, a call of the defn ``ref``, against its signature ``sig_ast``."""
    seen = ck.instantiated.get(ref)
    if seen is not None and seen[0] is sig_ast:
        callee = seen[1]
    else:
        callee = analyse(ref.file, sig_ast, ck.env.meshes(ref.file))
        ck.instantiated[ref] = (sig_ast, callee)
    if not callee.ok:
        first = next(d for d in callee.diagnostics if d.is_error)
        ck.diags.append(
            Diagnostic(
                first.code,
                "note",
                f"this call of `{e.head}` is not checked: the signature of `{e.head}` has "
                f"errors ({first.code}: {first.message})",
                ck.label(e.nid),
                (Label(first.primary.loc, "the signature's first error"),),
            )
        )
        raise CheckFail()
    cref = NodeRef(ref.file, ref.name, 0)
    if len(e.args) != len(callee.params) or e.kwargs:
        names = " ".join(p.name for p in callee.params)
        n = len(callee.params)
        dim_params = [p.name for p in callee.params if p.is_dim]
        help = "pass arguments in declared order, dim parameters included"
        if dim_params and len(e.args) == n - len(dim_params) and not e.kwargs:
            shown = ", ".join(f"`{d}`" for d in dim_params)
            help = (
                f"{shown} {'is a `dim` parameter' if len(dim_params) == 1 else 'are `dim` parameters'}"
                f": pass {'its value' if len(dim_params) == 1 else 'their values'} too, in declared "
                f"order: ({e.head} {names})"
            )
        raise ck.err(
            "K0203",
            f"`{e.head}` takes {n} argument{'s' * (n != 1)} "
            f"({names}), got {len(e.args)}" + (" and keyword arguments" if e.kwargs else ""),
            e.nid,
            secondary=(Label(cref, "defined here"),),
            help=help,
        )
    args: list[Any] = []
    texprs: list[TExpr] = []
    failed = False
    for p, a in zip(callee.params, e.args, strict=True):
        try:
            if p.is_dim:
                args.append(ck.static(lambda a=a: ck.st.dim(a)))
            else:
                t = ck.expr(a)
                texprs.append(t)
                args.append(t.type)
        except CheckFail:
            failed = True
    if failed:
        raise CheckFail()
    key = (ref, e.head, tuple(args))
    hit = ck.instantiated.get(key)
    if hit is not None and hit[0] is callee:
        b, done = hit[1], hit[2]  # read only below
        if done is not None:  # an identical call site proved all its obligations
            ck.prover.count_proved(done[0], done[1])
            return TCall(e.nid, ref, tuple(texprs), done[2], done[3])
    else:
        b = instantiate(callee, args, e.head, majority=ck.prover.facts.normal)
        ck.instantiated[key] = (callee, b, None)
    sec: tuple[Label, ...]
    for iss in b.issues:
        nid = e.args[iss.param].nid if iss.param is not None else e.nid
        sec = (
            (
                Label(
                    NodeRef(ref.file, ref.name, callee.params[iss.param].nid),
                    "parameter declared here",
                ),
            )
            if iss.param is not None
            else ()
        )
        ck.err(iss.code, iss.message, nid, iss.help, sec)
    if b.issues:
        raise CheckFail()
    ok = True
    for n in b.needs:
        if ck.prover.proved_before(n.rel):  # an identical call site proved it: no labels
            continue
        nid = e.args[n.param].nid if n.param is not None else e.nid
        sec = ()
        if n.bound_by is not None:  # the argument whose dim the others must match
            sec = (ck.label(e.args[n.bound_by[0]].nid, n.bound_by[1]),)
        if n.param is not None:
            sec += (
                Label(
                    NodeRef(ref.file, ref.name, callee.params[n.param].nid),
                    "parameter declared here",
                ),
            )
        elif n.where is not None:
            sec = (Label(NodeRef(ref.file, ref.name, callee.where[n.where][0]), "required here"),)
        ok = ck.require(n.rel, n.code, n.what, nid, sec, _call_help(n.rel)) and ok
    if not ok or b.result is None:
        raise CheckFail()
    r = b.result
    shape = SShape(r.shape.group, tuple(ck.tidy(d) for d in r.shape.dims))
    inst, rtype = b.inst(), SType(r.dtype, shape, r.device, r.shards)
    if all(ck.prover.proved_before_quietly(n.rel) for n in b.needs):  # not deferred (K0502)
        norm = sum(ck.prover.by_norm(n.rel) for n in b.needs)
        ck.instantiated[key] = (callee, b, (norm, len(b.needs) - norm, inst, rtype))
    return TCall(e.nid, ref, tuple(texprs), inst, rtype)


def _call_help(r: Rel) -> str:
    """How a caller can discharge a call's obligation: pass other dims, or assume it."""
    if not (D.variables(r.lhs) | D.variables(r.rhs)):
        return "pass dims that satisfy it"
    rel = D.fmt_kina_rel(r.op, r.lhs, r.rhs)
    return f"pass dims that satisfy it, or assume it in this defn: (where {rel})"
