"""Checking one defn body against its own signature and its callees' signatures.

Why this shape: :func:`check_defn` is a pure function of the defn and the environment (callee
signatures, the solver), so the engine can cache it per defn; a body edit re-checks that defn
only. Expressions are walked once; each primitive's rule comes from the table in ``prims``;
every obligation goes through the :class:`Prover` (normalisation, then the solver).
"""

from __future__ import annotations

from typing import Any

from kinac.check import dims as D
from kinac.check.codes import at, error
from kinac.check.consistent import before_body
from kinac.check.declared import match_declared
from kinac.check.formula import Rel
from kinac.check.literals import check_call_literals, check_fit, check_prim_literals
from kinac.check.oblig import Prover, fmt_rel
from kinac.check.prims import Prim, find
from kinac.check.prims.base import PRIMS, REQ
from kinac.check.protocol import CheckEnv
from kinac.check.shard_even import uneven_written
from kinac.check.sig import analyse
from kinac.check.statics import FLOAT_CONSTS, Bad, Statics
from kinac.check.suggest import unknown_function, unknown_name
from kinac.check.typed_ir import (
    CheckedDefn,
    TBind,
    TCall,
    TConst,
    TDim,
    TExpr,
    TLet,
    TLocal,
    TParam,
    TPrim,
)
from kinac.check.types import ERR, SCALAR, WEAK_F, WEAK_I, SType
from kinac.diag.model import Diagnostic, Label, NodeRef
from kinac.reader import ast
from kinac.tir.graph import DTYPES


class CheckFail(Exception):
    """An expression failed; its diagnostic is recorded (or it depends on one that is)."""


def check_defn(file: str, defn: ast.Defn, env: CheckEnv) -> CheckedDefn:
    """Type-check ``defn`` of ``file`` (its callees by signature only)."""
    return Checker(file, defn, env).run()


class Checker:
    def __init__(self, file: str, defn: ast.Defn, env: CheckEnv) -> None:
        self.file, self.defn, self.env = file, defn, env
        self.name = defn.name
        self.sig = analyse(file, defn.signature, env.meshes(file))
        self.diags = list(self.sig.diagnostics)
        self.prover = Prover(self.sig.assumptions, env.solve, getattr(env, "on_unknown", "error"))
        self.prover.diags = self.diags
        # call sites of one callee at the same argument types bind the same way (calls.instantiate
        # is pure): (callee, signature, args) -> (its SigInfo, Bound), see callsite.check_call
        self.instantiated: dict[Any, Any] = {}
        # name -> (kind, declaration nid, type, tensor index)
        self.scope: dict[str, tuple[str, int, SType, int]] = {}
        self.weak_locals: dict[str, TExpr] = {}  # let-bound literals and dims, by name
        k = 0
        for p in self.sig.params:
            if p.type is not None:
                self.scope[p.name] = ("param", p.nid, p.type, k)
                k += 1
        self.dimset = frozenset(self.sig.dim_vars)
        self.st = Statics(
            file,
            self.name,
            self.dimset,
            frozenset(self.sig.groups),
            frozenset(self.sig.dtype_vars),
            self.diags,
        )
        self.st.is_tensor = lambda n: n in self.scope

    def label(self, nid: int, msg: str = "") -> Label:
        return at(self.file, self.name, nid, msg)

    def err(
        self,
        code: str,
        msg: str,
        nid: int,
        help: str | None = None,
        secondary: tuple[Label, ...] = (),
        label: str = "",
    ) -> CheckFail:
        self.diags.append(error(code, msg, self.label(nid, label), secondary, help=help))
        return CheckFail()

    def run(self) -> CheckedDefn:
        body: TExpr | None = None
        if self.sig.ok:
            self.diags.extend(before_body(self.file, self.defn, self.sig, self.env, self.label))
            try:
                body = self.expr(self.defn.body)
                if body.type.is_weak:
                    check_fit(self, body, self.sig.ret.dtype)
                self.match(
                    self.sig.ret,
                    body.type,
                    self.defn.body.nid,
                    "the result",
                    (self.label(self.defn.signature.ret.nid, "declared result type"),),
                )
                for r, what in self.sig.ret_shard_divs:
                    self.require(
                        r,
                        "K0413",
                        f"the declared result has {what}",
                        self.defn.signature.ret.nid,
                    )
            except CheckFail:
                body = None
        if any(d.is_error for d in self.diags):
            body = None
        return CheckedDefn(
            self.sig.ref,
            self.sig,
            body,
            tuple(self.diags),
            self.prover.stats(),
            tuple(self.prover.deferred),
        )

    # ------------------------------------------------------------ expressions

    def expr(self, e: ast.Expr) -> TExpr:
        if isinstance(e, ast.Var):
            return self.var(e)
        if isinstance(e, ast.Num):
            return TConst(e.nid, e.value, SType(WEAK_F if e.is_float else WEAK_I, SCALAR))
        if isinstance(e, ast.Let):
            return self.let(e)
        if isinstance(e, ast.The):
            return self.the(e)
        if isinstance(e, ast.Call):
            return self.call(e)
        what = {ast.Str: "a string", ast.ListLit: "a list", ast.AnnotExpr: "an annotation"}
        raise self.err(
            "K0208",
            f"{what.get(type(e), 'this')} is not a tensor value",
            e.nid,
            help="lists, strings and annotations are only static arguments of primitives",
        )

    def var(self, e: ast.Var) -> TExpr:
        ent = self.scope.get(e.name)
        if ent is not None:
            kind, _nid, t, idx = ent
            if t.is_err:
                raise CheckFail()
            if kind == "param":
                return TParam(e.nid, e.name, idx, t)
            return TLocal(e.nid, e.name, t)
        if e.name in self.dimset:
            return TDim(e.nid, D.var(e.name), SType(WEAK_I, SCALAR))
        if e.name in FLOAT_CONSTS:
            return TConst(e.nid, FLOAT_CONSTS[e.name], SType(WEAK_F, SCALAR))
        if e.name in DTYPES or e.name in self.sig.dtype_vars:
            raise self.err(
                "K0208",
                f"the dtype `{e.name}` is not a value",
                e.nid,
                help="dtypes are static arguments, e.g. (cast x :to f32)",
            )
        cands = list(self.scope) + list(self.dimset)
        raise self.err(
            "K0202",
            f"unknown name `{e.name}`",
            e.nid,
            help=unknown_name(e.name, cands),
            label="not defined here",
        )

    def let(self, e: ast.Let) -> TExpr:
        saved, saved_weak = dict(self.scope), dict(self.weak_locals)
        binds: list[TBind] = []
        failed = False
        for b in e.bindings:
            self.weak_locals.pop(b.name, None)
            try:
                v = self.expr(b.value)
                self.scope[b.name] = ("local", b.nid, v.type, -1)
                if isinstance(v, TConst | TDim):  # judged where it meets a dtype
                    self.weak_locals[b.name] = v
                binds.append(TBind(b.nid, b.name, v))
            except CheckFail:
                failed = True
                self.scope[b.name] = ("local", b.nid, SType(ERR, SCALAR), -1)
        try:
            body = self.expr(e.body)
        finally:
            self.scope, self.weak_locals = saved, saved_weak
        if failed:
            raise CheckFail()
        return TLet(e.nid, tuple(binds), body, body.type)

    def the(self, e: ast.The) -> TExpr:
        from kinac.check.convert import TypeConv

        conv = TypeConv(self.file, self.name, self.dimset, frozenset(self.sig.groups))
        want = conv.type(e.type)
        if is_bad_dtype(want.dtype, self.sig.dtype_vars):
            conv.diags.append(
                error("K0302", f"unknown dtype variable `{want.dtype}`", self.label(e.type.nid))
            )
        inner = self.expr(e.expr)
        self.diags.extend(conv.diags)
        for r in conv.div_rels:
            self.require(r, "K0410", "exact division in the ascribed type", e.type.nid)
        if conv.diags:
            raise CheckFail()
        if inner.type.is_weak:
            check_fit(self, inner, want.dtype)
        self.match(
            want,
            inner.type,
            e.nid,
            "the ascribed expression",
            (self.label(e.type.nid, "ascribed type"),),
        )
        self._uneven(want, "the ascribed type has", e.type.nid)
        return inner

    def require(
        self,
        rel: Rel,
        code: str,
        what: str,
        nid: int,
        secondary: tuple[Label, ...] = (),
        help: str | None = None,
        hint: tuple[Rel, ...] = (),
    ) -> bool:
        if self.prover.proved_before(rel):  # no diagnostic: skip formatting its label
            return True
        return self.prover.require(
            rel, code, what, self.label(nid, f"needs {fmt_rel(rel)}"), secondary, help, hint=hint
        )

    def match(
        self, want: SType, got: SType, nid: int, what: str, secondary: tuple[Label, ...]
    ) -> None:
        """``got`` must be provably ``want`` (declared result, ``the``): K0411."""
        match_declared(self, want, got, nid, what, secondary)

    # ------------------------------------------------------------ calls

    def call(self, e: ast.Call) -> TExpr:
        kw = {k.key for k in e.kwargs}
        n_pos = len(e.args)
        prim = find(e.head, n_pos, kw)
        if prim is not None:
            return self.prim(prim, e)
        found = self.env.lookup(self.file, e.head)
        if found is not None:
            return self.defn_call(e, *found)
        ambiguous = getattr(self.env, "ambiguous", None)  # an env without imports has none
        refs = ambiguous(self.file, e.head) if ambiguous is not None else ()
        if refs:
            files = " and ".join(f"`{r.file}`" for r in refs)
            secondary = tuple(Label(NodeRef(r.file, r.name, 0), "defined here") for r in refs)
            self.diags.append(  # K0210 is name resolution's (the pipeline's scope), as K0201
                Diagnostic(
                    "K0210",
                    "error",
                    f"`{e.head}` is ambiguous: {files} "
                    f"{'both' if len(refs) == 2 else 'all'} define it",
                    self.label(e.head_nid, "defined by more than one import"),
                    secondary,
                    (),
                    f"Kina has no qualified names: rename `{e.head}` in one of the files, or "
                    "drop one of the imports (a defn of this file would shadow both)",
                )
            )
            raise CheckFail()
        if e.head in ("+", "*", "/"):
            raise self.err(
                "K0208",
                f"`({e.head} …)` over dims is not a tensor value",
                e.nid,
                help="use add/mul/div for tensors; dim arithmetic goes inside shapes",
            )
        if self.env.is_broken(self.file, e.head):
            raise CheckFail()  # the callee's own syntax error is reported; no cascade here
        cands = list(PRIMS) + list(self.env.visible(self.file))
        raise self.err(
            "K0202",
            f"unknown function `{e.head}`",
            e.head_nid,
            help=unknown_function(e.head, cands),
            label="neither a primitive nor a defn",
        )

    def prim(self, p: Prim, e: ast.Call) -> TExpr:
        from kinac.check.rulectx import read_prim

        t = read_prim(self, p, e)
        if isinstance(t, TPrim):
            check_prim_literals(self, t, e)
            if p.op == "reshard":  # reshard and the collectives write the layout
                self._uneven(t.type, f"`{p.name}` gives", e.nid)
        return t

    def _uneven(self, ty: SType, what: str, nid: int) -> None:
        """K0413 for a layout written in the body whose split is ground and uneven."""
        meshes, subst = self.env.meshes(self.file), self.prover.facts.subst
        self.diags.extend(uneven_written(ty, meshes, subst, what, self.label(nid)))

    def defn_call(self, e: ast.Call, ref: Any, sig_ast: ast.Signature) -> TExpr:
        from kinac.check.callsite import check_call

        t = check_call(self, e, ref, sig_ast)
        if isinstance(t, TCall):
            check_call_literals(self, t, sig_ast)
        return t

    def tidy(self, p: D.Poly) -> D.Poly:
        """Divisions that are exact under the defn's equalities become polynomials."""
        n = self.prover.facts.normal
        return D.map_divs(p, lambda a: D.exact_div(n(a.num), n(a.den)))

    def static(self, f: Any) -> Any:
        n0 = len(self.st.divs)
        try:
            v = f()
        except Bad:
            raise CheckFail() from None
        for r, nid in self.st.divs[n0:]:
            self.require(
                r,
                "K0410",
                f"exact division {D.fmt_quot(r.rhs, r.lhs)}",
                nid,
                help="state it as an assumption: (where (divides "
                f"{D.fmt_kina(r.lhs)} {D.fmt_kina(r.rhs)}))",
            )
        return v


def is_bad_dtype(dt: str, dtype_vars: tuple[str, ...]) -> bool:
    return dt not in DTYPES and dt not in dtype_vars and dt != ERR


_ = REQ
