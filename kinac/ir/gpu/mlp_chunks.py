"""Pass ``gpu-chunk-mlp``: a large SwiGLU MLP runs in row chunks, its intermediate kept in L2.

After ``gpu-fuse-epilogues`` the MLP ``r + (silu(n @ wg) * (n @ wu)) @ wd`` is four kernels:
gate and up (cuBLAS), the ``silu * mul`` map, the down product with the residual epilogue.
At the 45M block's size (M = 4096 rows, F = 5632, bf16) gate and up write 92 MB that the map
reads back from HBM. This pass cuts the four into ``c`` chunks of ``M / c`` rows
(:func:`kinac.ir.gpu.mlp_chunks_rule.mlp_chunks`): per chunk, gate and up on a slice of
``n``, the map, the down product; then one ``concat`` kernel joins the chunks' products
along the rows with the residual added (cuBLAS cannot add a residual slice, and the concat
writes each row once anyway). The chunk's gate+up products (23 MB at c = 4) are read by the
map while still in L2, and the arena plan reuses one chunk's buffers for the next.

Sound because every op of the four reads its left operand row by row: a row of the result
depends only on the same row of ``n`` (and of ``r``). Matched strictly: plain cuBLAS products
(no epilogue) of one ``n`` by two 2-D weights, used only by a map kernel of elementwise ops
on exactly those two, used only by a cuBLAS product with a 2-D weight (plain or with the
residual epilogue). The chunks show in the IR (slices in the kernels' bodies, the concat).

**Not in** :data:`kinac.ir.gpu.pipeline.GPU_PASSES`: measured slower on the H200 (2026-12-02,
``benches/mlp_chunk_probe.py``, docs/gpu.md "The MLP in L2"). The map does read its chunk from
L2 (4 x 6.8 us against 33.5 us), but cuBLAS at M = 1024 loses more (gate/up 4 x 73.2 us
against 245.7, down 4 x 33.8 against 113.9): the whole MLP 517-527 us against 447-453, the 45M
block through the API 0.728 ms against 0.639. Kept, with its tests, for the probe that
measures it (``mlp_chunk_probe.chunk_pass``) and for a GEMM that keeps its rate at fewer rows.
"""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.context import Context
from xdsl.dialects import func
from xdsl.dialects.builtin import IntegerAttr, ModuleOp, StringAttr, TensorType, i64
from xdsl.ir import Attribute, Block, Operation, Region, SSAValue
from xdsl.passes import ModulePass
from xdsl.rewriter import Rewriter

from kinac.dtypes import ITEMSIZE
from kinac.ir.dialects import kina as el
from kinac.ir.dialects import kina_struct as st
from kinac.ir.dialects.kina import dtype_name, shape_of
from kinac.ir.gpu.mlp_chunks_rule import mlp_chunks, slice_axis

ELEMENTWISE = (el.UnaryOp, el.CastOp, el.BinaryOp, el.WhereOp)


def _users(v: SSAValue) -> set[Operation]:
    return {u.operation for u in v.uses}


def _plain_product(k: Operation) -> bool:
    """A cuBLAS product kernel of a left operand by a 2-D weight, the body just the product."""
    if not isinstance(k, st.KernelOp) or k.kind.data != "matmul" or k.impl.data != "blas":
        return False
    ops = [o for o in k.body.block.ops if not isinstance(o, st.YieldOp)]
    if len(ops) != 1 or not isinstance(ops[0], st.MatmulOp) or k.yielded() is not ops[0].result:
        return False
    mm, args = ops[0], k.body.block.args
    return len(args) == 2 and mm.lhs is args[0] and mm.rhs is args[1] and len(shape_of(mm.rhs.type)) == 2  # fmt: skip


def _map_of(k: st.KernelOp, a: SSAValue, b: SSAValue) -> bool:
    """Map kernel ``k`` reads exactly ``a`` and ``b``, through elementwise ops of its shape."""
    if k.kind.data != "map" or set(k.inputs) != {a, b} or len(k.inputs) != 2:
        return False
    full = shape_of(k.result.type)
    for o in k.body.block.ops:
        if isinstance(o, st.YieldOp):
            continue
        if isinstance(o, st.ConstOp) and not shape_of(o.result.type):
            continue
        if not isinstance(o, ELEMENTWISE) or shape_of(o.results[0].type) != full:
            return False
    return True


def _down(k: Operation) -> str | None:
    """``""`` or ``"residual"`` if ``k`` is a down product (plain, or with the residual)."""
    if _plain_product(k):
        return ""
    if not isinstance(k, st.KernelOp) or k.kind.data != "matmul" or k.impl.data != "blas":
        return None
    if k.attributes.get("epilogue") != StringAttr("residual"):
        return None
    ops = [o for o in k.body.block.ops if not isinstance(o, st.YieldOp)]
    if len(ops) != 2 or not isinstance(ops[0], st.MatmulOp) or not isinstance(ops[1], el.AddOp):
        return None
    mm, add, args = ops[0], ops[1], k.body.block.args
    if len(args) != 3 or mm.lhs is not args[0] or mm.rhs is not args[1]:
        return None
    if len(shape_of(mm.rhs.type)) != 2 or {add.lhs, add.rhs} != {mm.result, args[2]}:
        return None
    return "residual"


def _ttype(v: SSAValue, shape: Sequence[int]) -> TensorType:
    t = v.type
    assert isinstance(t, TensorType)
    return TensorType(t.element_type, list(shape))


def _slice(body: Block, x: SSAValue, axis: int, i: int, step: int) -> SSAValue:
    shape = list(shape_of(x.type))
    shape[axis] = step
    props: dict[str, Attribute] = {
        "axis": IntegerAttr(axis, i64),
        "start": IntegerAttr(i * step, i64),
        "stop": IntegerAttr((i + 1) * step, i64),
    }
    op = st.SliceOp.create(operands=[x], result_types=[_ttype(x, shape)], properties=props)
    body.add_op(op)
    return op.result


def _kernel(kind: str, impl: str, sym: str, inputs: list[SSAValue], body: Block, attrs: dict[str, Attribute] | None = None) -> st.KernelOp:  # fmt: skip
    y = body.last_op
    assert isinstance(y, st.YieldOp)
    return st.KernelOp.create(
        operands=inputs,
        result_types=[y.value.type],
        properties={"kind": StringAttr(kind), "impl": StringAttr(impl), "sym": StringAttr(sym)},
        attributes=attrs or {},
        regions=[Region(body)],
    )


def _product(k: st.KernelOp, lhs: SSAValue, sliced: tuple[int, int, int] | None, sym: str) -> st.KernelOp:  # fmt: skip
    """``k``'s product with ``lhs`` as its left operand, sliced in the body (``sliced``:
    axis, chunk, step) or whole."""
    w = k.inputs[1]
    body = Block(arg_types=[lhs.type, w.type])
    a = body.args[0] if sliced is None else _slice(body, body.args[0], *sliced)
    out = [*shape_of(a.type)[:-1], shape_of(w.type)[-1]]
    mm = st.MatmulOp.create(operands=[a, body.args[1]], result_types=[_ttype(a, out)], properties=dict(st_props(k)))  # fmt: skip
    body.add_op(mm)
    body.add_op(st.YieldOp.create(operands=[mm.result]))
    return _kernel("matmul", "blas", sym, [lhs, w], body)


def st_props(k: st.KernelOp) -> dict[str, Attribute]:
    mm = next(o for o in k.body.block.ops if isinstance(o, st.MatmulOp))
    return dict(mm.properties)


def _chunk_map(m: st.KernelOp, ins: dict[SSAValue, SSAValue], shape: Sequence[int], sym: str) -> st.KernelOp:  # fmt: skip
    """Map kernel ``m`` on the chunk's values (``ins``: ``m``'s inputs to the chunk's)."""
    inputs = [ins[u] for u in m.inputs]
    body = Block(arg_types=[u.type for u in inputs])
    vmap: dict[SSAValue, SSAValue] = dict(zip(m.body.block.args, body.args, strict=True))
    for o in m.body.block.ops:
        if isinstance(o, st.YieldOp):
            continue
        r = o.results[0]
        rt = _ttype(r, shape) if shape_of(r.type) else r.type
        new = o.__class__.create(operands=[vmap[x] for x in o.operands], result_types=[rt], properties=dict(o.properties))  # fmt: skip
        body.add_op(new)
        vmap[r] = new.results[0]
    body.add_op(st.YieldOp.create(operands=[vmap[m.yielded()]]))
    return _kernel("map", "loops", sym, inputs, body)


def _concat(parts: list[SSAValue], axis: int, step: int, res: SSAValue | None, lhs_first: bool, sym: str) -> st.KernelOp:  # fmt: skip
    """The chunks' products joined along ``axis`` (each plus its slice of ``res``)."""
    inputs = [*parts, *([res] if res is not None else [])]
    body = Block(arg_types=[u.type for u in inputs])
    xs: list[SSAValue] = []
    for i, p in enumerate(body.args[: len(parts)]):
        if res is None:
            xs.append(p)
            continue
        r = _slice(body, body.args[-1], axis, i, step)
        add = el.AddOp.create(operands=[r, p] if lhs_first else [p, r], result_types=[p.type])
        body.add_op(add)
        xs.append(add.results[0])
    full = list(shape_of(xs[0].type))
    full[axis] = step * len(parts)
    cat = st.ConcatOp.create(operands=xs, result_types=[_ttype(xs[0], full)], properties={"axis": IntegerAttr(axis, i64)})  # fmt: skip
    body.add_op(cat)
    body.add_op(st.YieldOp.create(operands=[cat.result]))
    return _kernel("concat", "loops", sym, inputs, body)


def chunk_mlp(gate: st.KernelOp) -> st.KernelOp | None:
    """Chunk the MLP whose gate (or up) product is ``gate``; the new concat kernel, or None
    where the pattern or the rule says no."""
    n = gate.inputs[0]
    users = _users(gate.result)
    if len(users) != 1:
        return None
    (m,) = users
    if not isinstance(m, st.KernelOp) or m.kind.data != "map":
        return None
    ups = [u for u in m.inputs if u is not gate.result]
    if len(ups) != 1 or not isinstance(ups[0].owner, st.KernelOp):
        return None
    up = ups[0].owner
    if not _plain_product(up) or up.inputs[0] is not n or _users(up.result) != {m}:
        return None
    if not _map_of(m, gate.result, up.result) or len(_users(m.result)) != 1:
        return None
    (d,) = _users(m.result)
    epi = _down(d)
    if epi is None or not isinstance(d, st.KernelOp) or d.inputs[0] is not m.result:
        return None
    shape, dt = shape_of(m.result.type), dtype_name(m.result.type)
    rows = 1
    for s in shape[:-1]:
        rows *= s
    c = mlp_chunks(rows, shape[-1], ITEMSIZE[dt], dt)
    cut = slice_axis(shape[:-1], rows // c) if c > 1 else None
    if cut is None:
        return None
    axis, step = cut
    order = {id(o): i for i, o in enumerate(gate.parent_block().ops)}  # type: ignore[union-attr]
    first = min((gate, up), key=lambda k: order[id(k)])
    gate_first = first is gate
    at = d
    parts: list[SSAValue] = []
    new_ops: list[Operation] = []
    for i in range(c):
        sl = (axis, i, step)
        pair = [_product(k, n, sl, f"{k.sym.data}_c{i}") for k in ((gate, up) if gate_first else (up, gate))]  # fmt: skip
        g_i, u_i = pair if gate_first else pair[::-1]
        h_i = _chunk_map(m, {gate.result: g_i.result, up.result: u_i.result}, shape_of(g_i.result.type), f"{m.sym.data}_c{i}")  # fmt: skip
        d_i = _product(d, h_i.result, None, f"{d.sym.data}_c{i}")
        new_ops += [*pair, h_i, d_i]
        parts.append(d_i.result)
    res, lhs_first = None, True
    if epi:
        add = next(o for o in d.body.block.ops if isinstance(o, el.AddOp))
        res, lhs_first = d.inputs[2], add.lhs is d.body.block.args[2]
    cat = _concat(parts, axis, step, res, lhs_first, f"{d.sym.data}_chunks")
    blk = at.parent_block()
    assert blk is not None
    blk.insert_ops_before([*new_ops, cat], at)
    Rewriter.replace_op(d, [], [cat.result])
    for k in (m, up, gate):
        k.detach()
        k.erase()
    return cat


def chunk_mlps(fn: func.FuncOp) -> int:
    """Chunk every MLP of ``fn`` the rule asks for; how many."""
    done = 0
    for k in list(fn.body.block.ops):
        if isinstance(k, st.KernelOp) and k.parent is not None and _plain_product(k):
            if chunk_mlp(k) is not None:
                done += 1
    return done


class GpuChunkMlp(ModulePass):
    """Run large SwiGLU MLPs in row chunks whose intermediate stays in L2."""

    name = "gpu-chunk-mlp"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        for f in op.ops:
            if isinstance(f, func.FuncOp) and f.body.blocks:
                chunk_mlps(f)
