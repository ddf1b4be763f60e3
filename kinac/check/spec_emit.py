"""The specialiser's walk: one typed-IR expression at concrete dims -> graph nodes.

Why its own module: :mod:`kinac.check.specialise` is the entry (a checked defn at dims -> a
:class:`kinac.tir.graph.Graph`) and :mod:`kinac.check.spec_calls` specialises one call on its
own; both drive the same :class:`SpecEmitter`, which inlines calls (or splices their cached
fragments), folds weak scalars, and evaluates each primitive's concrete rule against its
symbolic type (a disagreement is a :class:`kinac.check.deferred.CheckerBug`).
"""

from __future__ import annotations

from collections.abc import Callable, Generator
from dataclasses import dataclass
from typing import Any

from kinac.check import dims as D
from kinac.check import fold
from kinac.check.codes import at, error
from kinac.check.deferred import (
    CheckerBug,
    call_site,
    check_callee,
    check_deferred,
    dims_text,
    evaluate_inst,
)
from kinac.check.limits import too_large
from kinac.check.literals import fits, range_text
from kinac.check.prims.base import PRIMS, CArgs, Prim, ShapeError
from kinac.check.protocol import SpecEnv
from kinac.check.sig import DefnRef
from kinac.check.typed_ir import TCall, TConst, TDim, TExpr, TLet, TLocal, TParam, TPrim
from kinac.check.types import WEAK_F, SShape, SType
from kinac.diag.model import Diagnostic
from kinac.tir.graph import FLOAT_DTYPES, Node, TType, make_node


class SpecAbort(Exception):
    def __init__(self, diag: Diagnostic) -> None:
        self.diag = diag


@dataclass
class Weak:
    value: float | int | bool
    is_float: bool


@dataclass
class WeakWhere:
    """A ``where`` of literals over a condition tensor: weak like its literals (spec §4), so
    it is built once the dtype it meets is known (``build(dtype)`` -> node), as the checker
    types it (``prims.elementwise``); alone it is f32."""

    build: Callable[[str], int]


Val = int | Weak | WeakWhere

_BY_OP: dict[str, Prim] = {}
for _ps in PRIMS.values():
    for _p in _ps:
        _BY_OP.setdefault(_p.op, _p)


def _own_group(v: Any, e: TPrim) -> Any:
    """A target shape's ``...`` (``reshape``, ``broadcast-to``) names the operand's own
    leading group, which the checker accepted whatever the operand calls it: a parameter's
    ``..b`` binds ``b``, not ``...``, so the shape is read through the operand's group name."""
    if not isinstance(v, SShape) or v.group != "..." or not e.args:
        return v
    operand = getattr(e.args[0], "type", None)
    group = getattr(getattr(operand, "shape", None), "group", None)
    return v if group is None else SShape(group, v.dims)


class SpecEmitter:
    def __init__(self, env: SpecEnv, default_device: str) -> None:
        self.env, self.default = env, default_device
        self.nodes: list[Node] = []
        self.calls: list[tuple[int, int]] = []  # the entry body's calls (see Specialised)
        self.cache_calls = True  # take the entry body's calls from env.specialised_call

    def dtype(self, dt: str, dts: dict[str, str]) -> str:
        return dts.get(dt, dt)

    def ttype(
        self,
        t: SType,
        denv: dict[str, int],
        groups: dict[str, tuple[int, ...]],
        dts: dict[str, str],
        device: str,
    ) -> TType:
        return TType(self.dtype(t.dtype, dts), self.shape(t.shape, denv, groups), device)

    def shape(
        self, s: SShape, denv: dict[str, int], groups: dict[str, tuple[int, ...]]
    ) -> tuple[int, ...]:
        lead = groups[s.group] if s.group is not None else ()
        return tuple(lead) + tuple(D.evaluate(d, denv) for d in s.dims)

    def defn(
        self,
        ref: DefnRef,
        args: list[Val],
        denv: dict[str, int],
        groups: dict[str, tuple[int, ...]],
        dts: dict[str, str],
        stack: tuple[DefnRef, ...],
    ) -> Val:
        return self.run(*self.enter(ref, args, denv, groups, dts, stack))

    def enter(
        self,
        ref: DefnRef,
        args: list[Val],
        denv: dict[str, int],
        groups: dict[str, tuple[int, ...]],
        dts: dict[str, str],
        stack: tuple[DefnRef, ...],
    ) -> tuple[TExpr, _Ctx]:
        """The body to inline for a call of ``ref`` and its context."""
        if ref in stack:
            raise SpecAbort(error("K0204", f"`{ref.name}` is recursive", at(ref.file, ref.name, 0)))
        cd = self.env.checked(ref)
        if not cd.ok or cd.body is None:
            raise SpecAbort(
                error("K0802", f"`{ref.name}` does not type-check", at(ref.file, ref.name, 0))
            )
        return cd.body, _Ctx(ref, args, denv, groups, dts, (*stack, ref), {})

    def run(self, e: TExpr, c: _Ctx) -> Val:
        """Evaluate ``e`` without recursion: each node's :meth:`walk` is a generator that
        yields the sub-expressions it needs and receives their values, so inlining a chain of
        thousands of calls uses a list, not the Python stack."""
        todo: list[Generator[tuple[TExpr, _Ctx], Val, Val]] = [self.walk(e, c)]
        val: Any = None
        while todo:
            try:
                need = todo[-1].send(val)
            except StopIteration as done:
                todo.pop()
                val = done.value
                continue
            todo.append(self.walk(*need))
            val = None
        return val  # type: ignore[no-any-return]

    def expr(self, e: TExpr, c: _Ctx) -> Val:
        return self.run(e, c)

    def walk(self, e: TExpr, c: _Ctx) -> Generator[tuple[TExpr, _Ctx], Val, Val]:
        if isinstance(e, TParam):
            return c.args[e.index]
        if isinstance(e, TLocal):
            return c.locals[e.name]
        if isinstance(e, TConst):
            return Weak(e.value, e.type.dtype == WEAK_F or isinstance(e.value, float))
        if isinstance(e, TDim):
            return Weak(D.evaluate(e.dim, c.denv), False)
        if isinstance(e, TLet):
            saved = dict(c.locals)
            for b in e.bindings:
                c.locals[b.name] = yield b.value, c
            v = yield e.body, c
            c.locals = saved
            return v
        args: list[Val] = []
        for a in e.args if isinstance(e, TCall | TPrim) else ():
            args.append((yield a, c))
        if isinstance(e, TCall):
            denv = evaluate_inst(c.ref, e.nid, e.callee.name, e.inst.dims, c.denv)
            groups = {g: self.shape(s, c.denv, c.groups) for g, s in e.inst.groups}
            dts = {v: self.dtype(d, c.dts) for v, d in e.inst.dtypes}
            if any(isinstance(a, WeakWhere) for a in args):  # it takes the parameter's dtype
                tensors = [p for p in self.env.checked(e.callee).sig.params if p.type is not None]
                for i, (param, arg) in enumerate(zip(tensors, args, strict=False)):
                    if isinstance(arg, WeakWhere) and param.type is not None:
                        args[i] = arg.build(self.dtype(param.type.dtype, dts))
            self.check_call(e, c, denv, groups, args)
            start = len(self.nodes)
            if len(c.stack) != 1 or not all(isinstance(a, int) for a in args):
                return (yield self.enter(e.callee, args, denv, groups, dts, c.stack))
            out: Val | None = self.splice(e.callee, args, denv, groups, dts)  # type: ignore[arg-type]
            if out is None:
                out = yield self.enter(e.callee, args, denv, groups, dts, c.stack)
            self.calls.append((start, len(self.nodes)))
            return out
        assert isinstance(e, TPrim)
        return self.prim(e, c, args)

    def splice(
        self,
        callee: DefnRef,
        args: list[int],
        denv: dict[str, int],
        groups: dict[str, tuple[int, ...]],
        dts: dict[str, str],
    ) -> int | None:
        """The call's nodes from the environment's cache of calls (:mod:`kinac.check.spec_calls`)
        appended, and its value; None when the environment has no cache or the call's value is
        not a tensor node (then it is inlined)."""
        cached = getattr(self.env, "specialised_call", None)
        if cached is None or not self.cache_calls:
            return None
        from kinac.check.spec_calls import CallKey, spliced_nodes

        key = CallKey(
            callee,
            tuple(sorted(denv.items())),
            tuple(sorted(groups.items())),
            tuple(sorted(dts.items())),
            tuple(self.nodes[a].type for a in args),
            self.default,
        )
        frag = cached(key)
        if frag is None:
            return None
        if frag.diagnostic is not None:
            raise SpecAbort(frag.diagnostic)
        k, off = len(args), len(self.nodes) - len(args)
        self.nodes.extend(spliced_nodes(frag, args, off))
        return args[frag.result] if frag.result < k else frag.result + off

    def check_call(
        self,
        e: TCall,
        c: _Ctx,
        denv: dict[str, int],
        groups: dict[str, tuple[int, ...]],
        args: list[Val],
    ) -> None:
        """At the dims the call computes: the callee's assumptions (a failure the checker
        should have caught is a :class:`CheckerBug`) and the obligations its check deferred
        (K0804 at the obligation, the call as the second label)."""
        cd = self.env.checked(e.callee)
        types = [self.nodes[a].type for a in args if isinstance(a, int)]
        bad = check_callee(c.ref, e.nid, cd, denv, groups, types)
        if bad is None:
            bad = check_deferred(cd, denv, (call_site(c.ref, e.nid, e.callee.name, denv),))
        if bad is not None:
            raise SpecAbort(bad)

    def prim(self, e: TPrim, c: _Ctx, args: list[Val], meets: str | None = None) -> Val:
        """The node of ``e`` over ``args``; ``meets``: the dtype a weak ``where`` is built at."""
        p = _BY_OP[e.op]
        if e.op == "where" and meets is None and e.type.is_weak:
            built: dict[str, int] = {}
            operands = list(args)

            def build(dtype: str) -> int:
                if dtype not in built:
                    node = self.prim(e, c, operands, dtype)
                    assert isinstance(node, int)
                    built[dtype] = node
                return built[dtype]

            return WeakWhere(build)
        if (
            e.op == "cast"
            and isinstance(args[0], int)
            and (self.nodes[args[0]].type.dtype == self.dtype(e.attr("to"), c.dts))
        ):
            return args[0]
        if all(isinstance(a, Weak) for a in args) and args and p.family == "elementwise":
            folded = self.fold(e, args)
            if folded is not None:
                return folded
        strong = [self.nodes[a].type for a in args if isinstance(a, int)]
        vstrong = (
            strong
            if e.op != "where"
            else [self.nodes[a].type for a in args[1:] if isinstance(a, int)]
        )
        ctx_dt = meets or next((t.dtype for t in vstrong), "f32")
        if e.op in ("cast",):
            ctx_dt = self.dtype(e.attr("to"), c.dts)
        dev = next((t.device for t in strong), self.default)
        vals = {k: self.concrete_attr(_own_group(v, e), c) for k, v in e.attrs}
        for a in [*args, Weak(vals["value"], False)] if e.op == "full" else args:
            dt = vals.get("dtype", ctx_dt) if e.op == "full" else ctx_dt
            if isinstance(a, Weak) and not isinstance(a.value, bool) and not fits(a.value, dt):
                raise SpecAbort(misfit(a.value, dt, c.ref, e.nid))
        idx = [self.materialise(a, ctx_dt, dev) for a in args]
        devs = {self.nodes[i].type.device for i in idx}
        if len(devs) > 1 and e.op not in ("to_device", "to_host"):
            raise SpecAbort(
                error(
                    "K0803",
                    f"`{e.op}` mixes placements at specialisation: {' and '.join(sorted(devs))}",
                    at(c.ref.file, c.ref.name, e.nid),
                    help="annotate the values with the same placement, or move one with "
                    "to-device / to-host",
                )
            )
        cargs = CArgs([self.nodes[i].type for i in idx], vals, self.default)
        try:
            t, gattrs = p.concrete(cargs)
        except ShapeError as ex:
            # Every obligation deferred by solver.on_unknown = "runtime-check" was checked at
            # these dims when this defn was entered (check_deferred): what fails here was proved.
            raise CheckerBug(
                f"`{e.op}` (node {e.nid} of `{c.ref.name}` in {c.ref.file}) fails at "
                f"{dims_text(c.denv) or 'these dims'}: {ex}, although the checker proved its "
                "shape obligations; this is a bug in kinac"
            ) from ex
        if e.op == "iota" and t.shape:  # it counts to dim - 1 along the axis
            n = t.shape[gattrs["axis"]] - 1
            if not fits(n, t.dtype):
                raise SpecAbort(misfit(n, t.dtype, c.ref, e.nid, code="K0605"))
        want = self.shape(e.type.shape, c.denv, c.groups)  # weak scalars: (), a weak `where`: c's
        if t.shape != want:
            raise AssertionError(f"internal: {e.op} concrete shape {t.shape} != symbolic {want}")
        dev = t.device or self.default
        if dev != t.device:
            t = TType(t.dtype, t.shape, dev)
        self.runnable(dev, c.ref, e.nid, f"`{p.name}`")
        self.small_enough(t, c.ref, e.nid, f"the result of `{p.name}`")
        if e.op == "matmul" and len(self.nodes[idx[0]].type.shape) == 1:
            return self.vecmat(idx, t)
        if e.op == "reshard":  # where it was written: sharding's diagnostics point there
            gattrs = {**gattrs, "site": (c.ref.file, c.ref.name, e.nid)}
        self.nodes.append(make_node(e.op, tuple(idx), t, **gattrs))
        return len(self.nodes) - 1

    def small_enough(self, t: TType, ref: DefnRef, nid: int, what: str) -> None:
        """K0806 for a tensor past kinac's size limit (:mod:`kinac.check.limits`), here rather
        than as an overflow in lowering or a numpy error when allocating."""
        diag = too_large(t, what, ref.file, ref.name, nid)
        if diag is not None:
            raise SpecAbort(diag)

    def runnable(self, dev: str, ref: DefnRef, nid: int, what: str) -> None:
        """A host build (default ``cpu``) runs no GPU placement: K0803, not a lowering crash."""
        if self.default == "cpu" and dev.startswith("cuda"):
            raise SpecAbort(
                error(
                    "K0803",
                    f"{what} is placed on {dev}, but this build targets the host (cpu)",
                    at(ref.file, ref.name, nid),
                    help='build for the GPU (--target cuda, or [target] kind = "cuda" in '
                    "kina.toml), or drop the @cuda placement",
                )
            )

    def vecmat(self, idx: list[int], t: TType) -> int:
        """``[K] x [K N]``: the graph's matmul wants rank >= 2, so go through ``[1 K]``."""
        x = self.nodes[idx[0]].type
        self.nodes.append(make_node("reshape", (idx[0],), TType(x.dtype, (1,) + x.shape, x.device)))
        self.nodes.append(
            make_node(
                "matmul", (len(self.nodes) - 1, idx[1]), TType(t.dtype, (1,) + t.shape, t.device)
            )
        )
        self.nodes.append(make_node("reshape", (len(self.nodes) - 1,), t))
        return len(self.nodes) - 1

    def concrete_attr(self, v: Any, c: _Ctx) -> Any:
        if isinstance(v, D.Poly):
            return D.evaluate(v, c.denv)
        if isinstance(v, SShape):
            return self.shape(v, c.denv, c.groups)
        if isinstance(v, str) and v in c.dts:
            return c.dts[v]
        return v

    def fold(self, e: TPrim, args: list[Val]) -> Val | None:
        ws = [a for a in args if isinstance(a, Weak)]
        r = fold.fold_elementwise(e.op, [w.value for w in ws], [w.is_float for w in ws])
        return None if r is None else Weak(*r)

    def materialise(self, v: Val, dtype: str, device: str) -> int:
        if isinstance(v, int):
            return v
        if isinstance(v, WeakWhere):
            return v.build(dtype)
        value: float | int | bool
        if isinstance(v.value, bool):
            dtype, value = "bool", bool(v.value)
        elif dtype in FLOAT_DTYPES:
            value = float(v.value)
        elif dtype in ("i32", "i64"):
            value = int(v.value)
        elif dtype == "bool":  # 0 or 1 (K0604 judged the literal): it was built as f32
            value = bool(v.value)
        else:
            dtype, value = "f32", float(v.value)
        self.nodes.append(make_node("const", (), TType(dtype, (), device), value=value))
        return len(self.nodes) - 1


def misfit(value: Any, dtype: str, ref: DefnRef, nid: int, code: str = "K0604") -> Diagnostic:
    """K0604 at specialisation: a value (a folded literal, a dim at these dims, a literal
    that met a dtype variable) that ``dtype`` cannot hold never reaches the graph; K0605 for
    the count of an ``iota``."""
    return error(
        code,
        f"the value {value} does not fit {dtype} ({range_text(dtype)}) at these dims and dtypes",
        at(ref.file, ref.name, nid),
        help="use a value in range, or a wider dtype",
    )


@dataclass
class _Ctx:
    ref: DefnRef
    args: list[Val]
    denv: dict[str, int]
    groups: dict[str, tuple[int, ...]]
    dts: dict[str, str]
    stack: tuple[DefnRef, ...]
    locals: dict[str, Val]
