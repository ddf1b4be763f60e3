"""A row reduction fused into the map kernel that reads it: one pass of rows, not two kernels.

Why (issue 14, docs/host.md): RMSNorm (``x / sqrt(mean(x*x) + eps) * w``) fuses into two
kernels, a row reduction (``mean(x*x)``, ``[.., 1]``) and a map reading it broadcast over the
row: two launches on the pool, and ``x`` read from memory twice, 16-20 us each on the small
block's two threads. :func:`fuse_row_reductions` (in the host's ``fuse-kernels`` stage) moves
the reduction kernel into the map kernel when the map is its only reader and the reduction is
over the last axis with ``keepdims`` at the map's rows (``[..., n] -> [..., 1]`` for a map of
``[..., m]``): the kernel stays a ``map``, its body holds the ``kina.reduce_*``, and
``KernelLowering._map`` computes each row's reduction in a loop before that row's map loop
(the row's ``x`` still in L1). The reduction sums in the same order as the reduce kernel did.
"""

from __future__ import annotations

from xdsl.dialects import func
from xdsl.dialects.builtin import StringAttr
from xdsl.ir import Block, Region, SSAValue

from kinac.ir.dialects import kina_struct as st
from kinac.ir.dialects.kina import int_prop, shape_of
from kinac.ir.fuse_kernels import copy_op
from kinac.ir.views import VIEWS

ENABLED = True  # False: the two kernels stay (as before 2026-12-02d; benches/cpu_ab.py rows=0)


def row_reduction(k: st.KernelOp) -> st.ReduceOp | None:
    """The root of reduce kernel ``k`` when it reduces each row's last axis, keeping it."""
    op = k.yielded().owner
    if k.kind.data != "reduce" or not isinstance(op, st.ReduceOp):
        return None
    xs = shape_of(op.x.type)
    if int_prop(op, "axis") != len(xs) - 1 or not int_prop(op, "keepdims"):
        return None
    return op


def row_reductions(root: SSAValue) -> list[st.ReduceOp]:
    """The row reductions a fused map kernel's body holds, in body order."""
    block = root.owner.parent_block() if root.owner is not None else None
    if block is None:
        return []
    return [o for o in block.ops if isinstance(o, st.ReduceOp)]


def _fusable(r: st.KernelOp, m: st.KernelOp) -> bool:
    red = row_reduction(r)
    if red is None or m.kind.data != "map" or len(list(r.results[0].uses)) != 1:
        return False
    if row_reductions(m.yielded()):
        return False  # one reduction a kernel
    rows = shape_of(red.result.type)[:-1]
    out = shape_of(m.yielded().type)
    if len(out) != len(rows) + 1 or tuple(out[:-1]) != tuple(rows) or out[-1] == 1:
        return False
    if all(d == 1 for d in rows):
        return False  # one row: the pool would split its columns, the reduction with them
    arg = m.body.block.args[list(m.inputs).index(r.results[0])]
    return _elementwise_only(arg)


def _elementwise_only(v: SSAValue) -> bool:
    """Whether every op reading ``v`` (and what is computed from it) in the map's body is
    elementwise: each reads the reduced value at its own row (index ``[*row, 0]``), where the
    fused lowering keeps it. A view (a reshape, a transpose) would read another row's."""
    todo, seen = [v], set()
    while todo:
        x = todo.pop()
        for use in x.uses:
            op = use.operation
            if isinstance(op, st.YieldOp) or op in seen:
                continue
            if isinstance(op, VIEWS) or not op.results:
                return False
            seen.add(op)
            todo.extend(op.results)
    return True


def fuse_row_reductions(fn: func.FuncOp) -> None:
    """Move each row-reduction kernel of ``fn`` into the map kernel that alone reads it."""
    if not ENABLED:
        return
    for r in [o for o in fn.body.block.ops if isinstance(o, st.KernelOp)]:
        uses = list(r.results[0].uses)
        if len(uses) != 1 or not isinstance(m := uses[0].operation, st.KernelOp):
            continue
        if not _fusable(r, m):
            continue
        inputs: list[SSAValue] = [u for u in m.inputs if u is not r.results[0]]
        inputs += [u for u in r.inputs if u not in inputs]
        body = Block(arg_types=[u.type for u in inputs])
        where = dict(zip(inputs, body.args, strict=True))
        rargs = zip(r.body.block.args, r.inputs, strict=True)
        vmap: dict[SSAValue, SSAValue] = {a: where[u] for a, u in rargs}
        for op in list(r.body.block.ops)[:-1]:
            copy_op(op, body, vmap)
        reduced = vmap[r.yielded()]
        mmap: dict[SSAValue, SSAValue] = {}
        for a, u in zip(m.body.block.args, m.inputs, strict=True):
            mmap[a] = reduced if u is r.results[0] else where[u]
        for op in list(m.body.block.ops)[:-1]:
            copy_op(op, body, mmap)
        body.add_op(st.YieldOp.create(operands=[mmap[m.yielded()]]))
        new = st.KernelOp.create(
            operands=inputs,
            result_types=[m.result.type],
            properties={"kind": m.kind, "impl": m.impl, "sym": StringAttr(m.sym.data)},
            regions=[Region(body)],
        )
        fn.body.block.insert_op_before(new, m)
        m.result.replace_all_uses_with(new.result)
        for dead in (m, r):
            dead.detach()
            dead.erase()
