"""A concrete shape interpreter of the AST: evaluate a defn's types at integer dims.

Why: it is the independent referee of the symbolic checker. It never builds an obligation or
calls a solver: it reads the program like the checker does, but evaluates every shape with
integers and runs each primitive's *concrete* evaluator. The tests use it to confirm that a
counterexample really breaks the program, and that well-typed programs never fail at any dims.
Like the checker, it accepts programs of any depth: nested expressions and chains of calls are
walked with generators on an explicit stack (:func:`_drive`), never with Python recursion, and
only a real cycle of calls is reported as recursion.
"""

from __future__ import annotations

from collections.abc import Generator, Mapping
from typing import Any, Protocol

from kinac.check import dims as D
from kinac.check.bind import bind_call_types, holds_at
from kinac.check.dims import DimEvalError
from kinac.check.literals import MEET_ALL, fits
from kinac.check.prims.base import CArgs, ShapeError, find
from kinac.check.protocol import CheckEnv
from kinac.check.sig import DefnRef, analyse
from kinac.check.statics import FLOAT_CONSTS, Bad, Statics
from kinac.check.types import WEAK_F, WEAK_I, SShape
from kinac.diag.model import Diagnostic
from kinac.reader import ast
from kinac.tir.graph import DTYPES, TType

WEAK = (WEAK_F, WEAK_I)


class ConcreteError(Exception):
    """The program fails at these dims (the message says where and why); ``nids`` are the
    failing node and its argument nodes (what a diagnostic about it may point at)."""

    def __init__(self, msg: str, nids: tuple[int, ...] = ()) -> None:
        super().__init__(msg)
        self.nids = nids


class _Silent(Exception):
    """An operand already failed; the failure was recorded where it happened."""


_ERR = TType("!", (), "")


class DefnSource(CheckEnv, Protocol):
    """A checking environment that can also give a defn's AST (for calls)."""

    def defn(self, ref: DefnRef) -> ast.Defn | None: ...


Step = Generator[Any, Any, Any]
"""A suspended evaluation: it yields the sub-evaluations it needs and receives their values."""


def _drive(first: Step) -> Any:
    """Run ``first`` and every sub-evaluation it asks for on an explicit stack; an exception
    in a sub-evaluation is thrown into the one that asked (so a ``let`` can record it)."""
    stack = [first]
    val: Any = None
    exc: Exception | None = None
    while True:
        top = stack[-1]
        try:
            need = top.throw(exc) if exc is not None else top.send(val)
        except StopIteration as done:
            stack.pop()
            val, exc = done.value, None
            if not stack:
                return val
            continue
        except Exception as ex:  # noqa: BLE001 - handed to the asking evaluation
            stack.pop()
            if not stack:
                raise
            val, exc = None, ex
            continue
        stack.append(need)
        val, exc = None, None


def eval_defn(
    file: str,
    defn: ast.Defn,
    dims: Mapping[str, int | tuple[int, ...]],
    dtypes: Mapping[str, str],
    env: DefnSource,
    default_device: str = "cpu",
) -> TType:
    """The result type of ``defn`` at ``dims`` (groups as ``..b``) and ``dtypes``; raises
    :class:`ConcreteError` (the first failure) when any primitive, call or ascription fails."""
    return _drive(_defn_result(file, defn, dims, dtypes, env, default_device, ()))  # type: ignore[no-any-return]


def eval_all(
    file: str,
    defn: ast.Defn,
    dims: Mapping[str, int | tuple[int, ...]],
    dtypes: Mapping[str, str],
    env: DefnSource,
    default_device: str = "cpu",
) -> tuple[TType | None, list[ConcreteError]]:
    """Evaluate ``defn`` and collect every failure (a failed ``let`` binding does not stop
    the others; uses of it stay silent)."""
    return _drive(_defn_all(file, defn, dims, dtypes, env, default_device, ()))  # type: ignore[no-any-return]


def _defn_result(
    file: str,
    defn: ast.Defn,
    dims: Mapping[str, int | tuple[int, ...]],
    dtypes: Mapping[str, str],
    env: DefnSource,
    default_device: str,
    stack: tuple[str, ...],
) -> Step:
    out, fails = yield _defn_all(file, defn, dims, dtypes, env, default_device, stack)
    if fails:
        raise fails[0]
    assert out is not None
    return out


def _defn_all(
    file: str,
    defn: ast.Defn,
    dims: Mapping[str, int | tuple[int, ...]],
    dtypes: Mapping[str, str],
    env: DefnSource,
    default_device: str,
    stack: tuple[str, ...],
) -> Step:
    key = f"{file}::{defn.name}"
    if key in stack:
        return None, [ConcreteError(f"`{defn.name}` calls itself (recursion)")]
    sig = analyse(file, defn.signature, env.meshes(file))
    denv = {k: v for k, v in dims.items() if isinstance(v, int)}
    groups = {k: tuple(v) for k, v in dims.items() if isinstance(v, tuple | list)}
    ev = _Eval(file, defn, denv, groups, dict(dtypes), env, default_device, (*stack, key))
    scope: dict[str, TType] = {}
    try:
        for p in sig.params:
            if p.type is not None:
                scope[p.name] = ev.ttype(
                    p.type.dtype, p.type.shape, p.type.device or default_device
                )
        out = yield ev.expr(defn.body, scope)
        ret = ev.ttype(sig.ret.dtype, sig.ret.shape, "")
        ev.same(out, ret, "the result", (defn.body.nid,))
        if out.dtype in WEAK and out.shape:  # a weak `where` returned: the declared dtype
            out = TType(ret.dtype, out.shape, out.device)
        for r, what in sig.ret_shard_divs:  # the declared result's @sharded dims split evenly
            if not holds_at(r, denv):
                raise ConcreteError(f"the result has {what}: uneven", (defn.signature.ret.nid,))
    except ConcreteError as e:
        ev.fails.append(e)
        return None, ev.fails
    except _Silent:
        return None, ev.fails
    return (out if not ev.fails else None), ev.fails


class _Eval:
    def __init__(
        self,
        file: str,
        defn: ast.Defn,
        denv: dict[str, int],
        groups: dict[str, tuple[int, ...]],
        dts: dict[str, str],
        env: DefnSource,
        default_device: str,
        stack: tuple[str, ...],
    ) -> None:
        self.file, self.defn, self.denv, self.groups, self.dts = file, defn, denv, groups, dts
        self.env, self.default, self.stack = env, default_device, stack
        self.fails: list[ConcreteError] = []
        sig = analyse(file, defn.signature)
        self.st = Statics(
            file,
            defn.name,
            frozenset(sig.dim_vars),
            frozenset(sig.groups),
            frozenset(sig.dtype_vars),
            [],
        )

    def num(self, p: D.Poly, nids: tuple[int, ...] = ()) -> int:
        try:
            return D.evaluate(p, self.denv)
        except DimEvalError as e:
            raise ConcreteError(str(e), nids) from None

    def shape(self, s: SShape) -> tuple[int, ...]:
        lead: tuple[int, ...] = ()
        if s.group is not None:
            if s.group not in self.groups:
                raise ConcreteError(f"group {s.group} has no value")
            lead = self.groups[s.group]
        return lead + tuple(self.num(d) for d in s.dims)

    def ttype(self, dtype: str, s: SShape, device: str) -> TType:
        return TType(self.dts.get(dtype, dtype), self.shape(s), device)

    def same(self, got: TType, want: TType, what: str, nids: tuple[int, ...]) -> None:
        if got.dtype in (WEAK_F, WEAK_I) and got.shape:  # a weak `where` takes want's dtype
            fits_want = want.dtype not in ("i32", "i64", "bool") or got.dtype == WEAK_I
            got = TType(want.dtype if fits_want else "f32", got.shape, got.device)
        if got.dtype in (WEAK_F, WEAK_I):
            if want.shape != () or want.dtype in ("i32", "i64", "bool") and got.dtype == WEAK_F:
                raise ConcreteError(f"{what}: a scalar literal is not {want}", nids)
            return
        if got.shape != want.shape or got.dtype != want.dtype:
            raise ConcreteError(
                f"{what} is {got.dtype}{list(got.shape)}, not {want.dtype}{list(want.shape)}",
                nids,
            )
        if want.device and got.device != want.device:
            raise ConcreteError(f"{what} is on {got.device}, not {want.device}", nids)

    def static(self, f: Any) -> Any:
        try:
            return f()
        except Bad:
            raise ConcreteError("malformed static argument") from None

    def expr(self, e: ast.Expr, scope: dict[str, TType]) -> Step:
        """The type of ``e`` (a step: sub-expressions are yielded to :func:`_drive`)."""
        if isinstance(e, ast.Var):
            if e.name in scope:
                if scope[e.name] is _ERR:
                    raise _Silent()
                return scope[e.name]
            if e.name in self.denv:
                return TType(WEAK_I, (), "")
            if e.name in FLOAT_CONSTS:
                return TType(WEAK_F, (), "")
            raise ConcreteError(f"unknown name {e.name}")
        if isinstance(e, ast.Num):
            return TType(WEAK_F if e.is_float else WEAK_I, (), "")
        if isinstance(e, ast.Let):
            inner = dict(scope)
            for b in e.bindings:
                try:
                    inner[b.name] = yield self.expr(b.value, inner)
                except ConcreteError as ex:
                    self.fails.append(ex)
                    inner[b.name] = _ERR
                except _Silent:
                    inner[b.name] = _ERR
            return (yield self.expr(e.body, inner))
        if isinstance(e, ast.The):
            from kinac.check.convert import TypeConv

            t = TypeConv(self.file, self.defn.name, None).type(e.type)
            got = yield self.expr(e.expr, scope)
            self.same(got, self.ttype(t.dtype, t.shape, ""), "the ascribed expression", (e.nid,))
            return got
        if isinstance(e, ast.Call):
            return (yield from self.call(e, scope))
        raise ConcreteError("not a value", (e.nid,))

    def call(self, e: ast.Call, scope: dict[str, TType]) -> Step:
        nids = (
            e.nid,
            e.head_nid,
            *(a.nid for a in e.args),
            *(k.nid for k in e.kwargs),
            *(x.nid for a in e.args if isinstance(a, ast.ListLit) for x in a.items),
        )
        try:
            return (yield from self._call(e, scope))
        except ConcreteError as ex:
            if not ex.nids:
                ex.nids = nids
            raise

    def _call(self, e: ast.Call, scope: dict[str, TType]) -> Step:
        p = find(e.head, len(e.args), {k.key for k in e.kwargs})
        if p is None:
            return (yield from self.defn_call(e, scope))
        ts: list[TType] = []
        vals: dict[str, Any] = {}
        pos = list(e.args)
        i = 0
        for name, kind in p.args:
            if kind == "annots":
                vals[name] = self.static(lambda rest=tuple(pos[i:]): self.st.shards(rest))
                i = len(pos)
            elif kind.endswith("?"):
                vals[name] = self.static(lambda a=pos[i]: self.st.device(a)) if i < len(pos) else ""
                i += 1
            elif kind == "tensor":
                ts.append((yield self.expr(pos[i], scope)))
                i += 1
            elif kind == "tensors":
                lst = pos[i]
                items = lst.items if isinstance(lst, ast.ListLit) else ()
                for x in items:
                    ts.append((yield self.expr(x, scope)))
                i += 1
            else:
                vals[name] = self.conv(kind, pos[i])
                i += 1
        kws = {k.key: k.value for k in e.kwargs}
        for k, kind, default in p.kwargs:
            vals[k] = self.conv(kind, kws[k]) if k in kws else default
        if p.family != "elementwise":  # a weak `where` meeting a reduction, a view, …: f32
            ts = [TType("f32", t.shape, t.device) if t.dtype in WEAK and t.shape else t for t in ts]
        try:
            t, _attrs = p.concrete(CArgs(ts, vals, self.default))
        except ShapeError as ex:
            raise ConcreteError(f"{e.head}: {ex}") from None
        self.literals_fit(p.op, e, ts, vals)
        return t

    def literals_fit(self, op: str, e: ast.Call, ts: list[TType], vals: dict[str, Any]) -> None:
        """The literals and dims among the operands fit the dtype they meet (K0604/K0605)."""
        if op == "full":
            if not fits(vals["value"], vals["dtype"]):
                raise ConcreteError(
                    f"full: {vals['value']} is not a {vals['dtype']}", (e.args[2].nid,)
                )
            return
        meet = {"cast": 0, "where": 1}.get(op, 0 if op in MEET_ALL else None)
        if meet is None:
            return
        args = [a for a in e.args if not isinstance(a, ast.AnnotExpr)][meet:]
        types = ts[meet:]
        strong = next((t.dtype for t in types if t.dtype not in (WEAK_F, WEAK_I)), None)
        dt = vals["to"] if op == "cast" else strong
        for a, t in zip(args, types, strict=False):
            v = a.value if isinstance(a, ast.Num) else None
            if isinstance(a, ast.Var) and a.name in self.denv:
                v = self.denv[a.name]
            if dt is not None and v is not None and t.dtype in (WEAK_F, WEAK_I) and not fits(v, dt):
                raise ConcreteError(f"{op}: {v} is not a {dt}", (a.nid,))

    def conv(self, kind: str, a: ast.Expr) -> Any:
        st = self.st
        if kind == "shape":
            return self.shape(self.static(lambda: st.shape(a)))
        if kind in ("dim", "dim0"):
            return self.num(self.static(lambda: st.dim(a, allow_zero=kind == "dim0")))
        if kind == "scalar":
            v = self.static(lambda: st.scalar(a))
            return self.num(v) if isinstance(v, D.Poly) else v
        if kind == "dtype":
            dt = self.static(lambda: st.dtype(a))
            return self.dts.get(dt, dt)
        fn = {"int": st.int_, "ints": st.ints, "bool": st.bool_, "device": st.device}[kind]
        return self.static(lambda: fn(a))

    def defn_call(self, e: ast.Call, scope: dict[str, TType]) -> Step:
        found = self.env.lookup(self.file, e.head)
        if found is None:
            raise ConcreteError(f"unknown function {e.head}")
        ref, sig_ast = found
        callee = self.env.defn(ref)
        if callee is None or len(e.args) != len(sig_ast.params):
            raise ConcreteError(f"bad call of {e.head}")
        tensors: list[TType] = []
        dim_args: dict[str, int] = {}
        for p, a in zip(sig_ast.params, e.args, strict=True):
            if p.is_dim:
                dim_args[p.name] = self.num(self.static(lambda a=a: self.st.dim(a)))
            else:
                t = yield self.expr(a, scope)
                if t.dtype in (WEAK_F, WEAK_I):
                    # a literal for a dtype variable stays weak: a tensor argument fixes it
                    pd = p.type.dtype if p.type is not None else "f32"
                    device = t.device if t.shape else self.default  # a weak `where` has one
                    t = TType(pd if pd in DTYPES else t.dtype, t.shape, device)
                tensors.append(t)
        b = bind_call_types(ref.file, sig_ast, tuple(tensors), dim_args, self.env.meshes(ref.file))
        if isinstance(b, tuple):
            raise ConcreteError(
                f"call of {e.head}: " + "; ".join(d.message for d in b if isinstance(d, Diagnostic))
            )
        return (
            yield _defn_result(
                ref.file, callee, dict(b.dims), dict(b.dtypes), self.env, self.default, self.stack
            )
        )
