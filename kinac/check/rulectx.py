"""Applying a primitive's table entry to a call: read its arguments, run its rule.

Why apart from ``infer.py``: this is the one generic adapter between the syntax of a call
(positional and keyword arguments, as the reader gives them) and the table entries' typed
arguments, and it gives rules their :class:`RuleCtx` (obligations with labels on the right
argument, its declaration and the primitive's keyword).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kinac.check.codes import error
from kinac.check.formula import Rel
from kinac.check.oblig import fmt_rel
from kinac.check.prims.base import REQ, Args, Prim
from kinac.check.typed_ir import TExpr, TPrim
from kinac.check.types import fmt_type, settle_weak
from kinac.diag.model import Label
from kinac.reader import ast

if TYPE_CHECKING:
    from kinac.check.infer import Checker


class _RC:
    """The rule context of one primitive call."""

    def __init__(
        self,
        ck: Checker,
        call: ast.Call,
        texprs: list[TExpr],
        exprs: list[ast.Expr],
        kw_nids: dict[str, int],
    ) -> None:
        self.ck, self.call = ck, call
        self.texprs, self.exprs, self.kw_nids = texprs, exprs, kw_nids
        self.extra: dict[str, Any] = {}

    def name(self, i: int) -> str:
        e = self.exprs[i]
        if isinstance(e, ast.Var):
            return f"`{e.name}`"
        if isinstance(e, ast.Num):
            return f"`{e.value}`"
        if isinstance(e, ast.Call):
            return f"`({e.head} …)`"
        return f"argument {i + 1}"

    def _decl(self, i: int) -> Label:
        e = self.exprs[i]
        t = fmt_type(self.texprs[i].type)
        if isinstance(e, ast.Var) and e.name in self.ck.scope:
            return self.ck.label(self.ck.scope[e.name][1], f"`{e.name}`: {t}")
        return self.ck.label(e.nid, f"this is {t}")

    def _nid(self, arg: int | None, kw: str | None) -> int:
        if kw is not None and kw in self.kw_nids:
            return self.kw_nids[kw]
        if arg is not None and arg < len(self.exprs):
            return self.exprs[arg].nid
        return self.call.nid

    def require(
        self,
        rel: Rel,
        code: str,
        what: str,
        args: tuple[int, ...] = (),
        help: str | None = None,
        kw: str | None = None,
        hint: tuple[Rel, ...] = (),
    ) -> bool:
        sec = tuple(self._decl(i) for i in args)
        primary = self.ck.label(self._nid(None, kw), f"needs {fmt_rel(rel)}")
        return self.ck.prover.require(rel, code, what, primary, sec, help, hint=hint)

    def proves(self, rel: Rel) -> bool:
        """Whether ``rel`` holds under the defn's assumptions; silent (no diagnostic), for rules
        that branch on a fact (a dim that the ``where`` clause makes 1 broadcasts)."""
        return self.ck.prover.check(rel).status == "proved"

    def fail(
        self,
        code: str,
        msg: str,
        arg: int | None = None,
        help: str | None = None,
        kw: str | None = None,
        label: str = "",
    ) -> None:
        sec = (self._decl(arg),) if arg is not None and arg < len(self.exprs) else ()
        if arg is not None and arg < len(self.exprs) and not label:
            label = f"this is {fmt_type(self.texprs[arg].type)}"
        self.ck.diags.append(
            error(
                code,
                msg,
                self.ck.label(self._nid(arg, kw), label),
                sec if sec and sec[0].loc != self.ck.label(self._nid(arg, kw)).loc else (),
                help=help,
            )
        )

    def set_attr(self, key: str, value: Any) -> None:
        self.extra[key] = value


def read_prim(ck: Checker, p: Prim, e: ast.Call) -> TExpr:
    """Check ``e``, a call of primitive ``p``."""
    from kinac.check.infer import CheckFail

    specs = list(p.args)
    pos = list(e.args)
    rest_kind = specs[-1][1] if specs else ""
    fixed = [s for s in specs if s[1] not in ("annots",)]
    n_min = sum(1 for s in fixed if not s[1].endswith("?"))
    n_max = len(fixed) if rest_kind != "annots" else 10**6
    if not n_min <= len(pos) <= max(n_max, n_min):
        want = f"{n_min}" if n_min == len(fixed) else f"{n_min} or {len(fixed)}"
        raise ck.err(
            "K0203",
            f"`{e.head}` takes {want} positional argument"
            f"{'s' if want != '1' else ''}, got {len(pos)}",
            e.nid,
            help=f"usage: ({e.head} {' '.join(n for n, _ in specs)}"
            + "".join(f" :{k} …" for k, _, _ in p.kwargs)
            + ")",
        )
    vals: dict[str, Any] = {}
    texprs: list[TExpr] = []
    exprs: list[ast.Expr] = []
    failed = False
    i = 0
    for name, kind in specs:
        if kind == "annots":
            vals[name] = ck.static(lambda rest=tuple(pos[i:]): ck.st.shards(rest))
            i = len(pos)
            continue
        if kind.endswith("?"):
            if i < len(pos):
                vals[name] = ck.static(lambda a=pos[i]: ck.st.device(a))
                i += 1
            else:
                vals[name] = ""
            continue
        a = pos[i]
        i += 1
        try:
            if kind == "tensor":
                t = ck.expr(a)
                texprs.append(t)
                exprs.append(a)
            elif kind == "tensors":
                if not isinstance(a, ast.ListLit):
                    raise ck.err(
                        "K0207",
                        f"`{e.head}` takes a list of tensors `[x y …]`",
                        a.nid,
                        help=f"write the tensors in brackets: ({e.head} [x y] :axis 0)",
                    )
                for it in a.items:
                    try:
                        texprs.append(ck.expr(it))
                        exprs.append(it)
                    except CheckFail:
                        failed = True
            else:
                vals[name] = _static(ck, kind, a)
        except CheckFail:
            failed = True
    kw_nids: dict[str, int] = {}
    known = {k: (kind, d) for k, kind, d in p.kwargs}
    for k in e.kwargs:
        if k.key not in known:
            hint = ", ".join(f":{x}" for x in known)
            raise ck.err(
                "K0206",
                f"`{e.head}` has no keyword `:{k.key}`",
                k.nid,
                help=f"its keywords: {hint}"
                if hint
                else f"`{e.head}` takes no keywords: remove it",
            )
        if k.key in kw_nids:
            raise ck.err(
                "K0206", f"keyword `:{k.key}` given twice", k.nid, help=f"keep one `:{k.key}`"
            )
        kw_nids[k.key] = k.nid
        try:
            vals[k.key] = _static(ck, known[k.key][0], k.value)
        except CheckFail:
            failed = True
    for key, (_kind, d) in known.items():
        if key not in kw_nids:
            if d is REQ:
                raise ck.err(
                    "K0206", f"`{e.head}` needs `:{key}`", e.nid, help=f"add `:{key} …` to the call"
                )
            vals[key] = d
    if failed:
        raise CheckFail()
    rc = _RC(ck, e, texprs, exprs, kw_nids)
    types = [x.type for x in texprs]
    if p.family != "elementwise":  # a weak `where` meets a reduction, a view, …: it is f32
        types = [settle_weak(t) for t in types]
    rt = p.rule(rc, Args(types, vals))
    if rt is None:
        raise CheckFail()
    vals.update(rc.extra)
    return TPrim(e.nid, p.op, tuple(texprs), tuple(sorted(vals.items())), rt)


def _static(ck: Checker, kind: str, a: ast.Expr) -> Any:
    st = ck.st
    if kind == "dtype":
        return ck.static(lambda: st.dtype(a))
    if kind == "shape":
        return ck.static(lambda: st.shape(a))
    if kind == "scalar":
        return ck.static(lambda: st.scalar(a))
    if kind == "int":
        return ck.static(lambda: st.int_(a))
    if kind == "ints":
        return ck.static(lambda: st.ints(a))
    if kind == "bool":
        return ck.static(lambda: st.bool_(a))
    if kind == "dim":
        return ck.static(lambda: st.dim(a))
    if kind == "dim0":
        return ck.static(lambda: st.dim(a, allow_zero=True))
    if kind == "device":
        return ck.static(lambda: st.device(a))
    raise AssertionError(kind)
