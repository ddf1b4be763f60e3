"""Pass ``gpu-fuse-rows``: a reduction over the last axis joins the kernel that consumes it.

After ``fuse-kernels`` an RMSNorm is two kernels: ``reduce`` (``mean(x^2)`` per row) and
``map`` (``x / sqrt(r + eps) * w``), so ``x`` crosses device memory three times. On the GPU a
row fits in the registers of the threads that own it, so this pass merges a ``reduce``,
``softmax`` or ``row`` kernel into the ``map`` kernel that is its only user when their rows
line up (the map's output has the reduced tensor's shape, and reads the reduction only
elementwise, broadcast along the row). The result is one ``kind = "row"`` kernel whose body
holds both: the GPU lowering reads each row once, reduces it with warp shuffles, and writes
the normalised row (see :mod:`kinac.ir.gpu.kernels`). The merge shows in the IR.
"""

from __future__ import annotations

import math

from xdsl.context import Context
from xdsl.dialects import func
from xdsl.dialects.builtin import ModuleOp, StringAttr
from xdsl.ir import Block, Operation, Region, SSAValue
from xdsl.passes import ModulePass
from xdsl.rewriter import Rewriter

from kinac.dtypes import ITEMSIZE
from kinac.ir.dialects import kina as el
from kinac.ir.dialects import kina_struct as st
from kinac.ir.dialects.kina import dtype_name, int_prop, shape_of
from kinac.ir.fuse_kernels import copy_op
from kinac.ir.gpu.plan import row_config, vector_width

ELEMENTWISE = (el.UnaryOp, el.CastOp, el.BinaryOp, el.WhereOp)
ROWLIKE = ("reduce", "softmax", "row")


def only_user(k: st.KernelOp) -> Operation | None:
    """The one op using ``k``'s result (``None`` if several, none, or the return)."""
    users = {u.operation for u in k.result.uses}
    if len(users) != 1:
        return None
    (u,) = users
    return None if isinstance(u, func.ReturnOp) else u


def merge_kernels(a: st.KernelOp, b: st.KernelOp, kind: str) -> st.KernelOp:
    """One kernel computing ``b`` with ``a``'s body inlined in place of ``a``'s result.

    Inserted before ``b``; ``a`` and ``b`` are erased.
    """
    inputs = list(dict.fromkeys([*a.inputs, *(u for u in b.inputs if u is not a.result)]))
    body = Block(arg_types=[u.type for u in inputs])
    arg_of = dict(zip(inputs, body.args, strict=True))
    vmap: dict[SSAValue, SSAValue] = {}
    for blk_arg, u in zip(a.body.block.args, a.inputs, strict=True):
        vmap[blk_arg] = arg_of[u]
    for src in (a, b):
        for op in src.body.block.ops:
            if isinstance(op, st.YieldOp):
                continue
            copy_op(op, body, vmap)
        if src is a:
            a_val = vmap[a.yielded()]
            for blk_arg, u in zip(b.body.block.args, b.inputs, strict=True):
                vmap[blk_arg] = a_val if u is a.result else arg_of[u]
    body.add_op(st.YieldOp.create(operands=[vmap[b.yielded()]]))
    new_k = st.KernelOp.create(
        operands=inputs,
        result_types=[b.result.type],
        properties={
            "kind": StringAttr(kind),
            "impl": StringAttr(a.impl.data if kind == "matmul" else "loops"),
            "sym": StringAttr(
                a.sym.data if kind == "matmul" else f"{b.sym.data.split('_')[0]}_{kind}"
            ),
        },
        attributes=dict(b.attributes),
        regions=[Region(body)],
    )
    Rewriter.replace_op(b, new_k)
    a.detach()
    a.erase()
    return new_k


def row_shape(k: st.KernelOp) -> tuple[int, ...] | None:
    """The shape whose rows a ``reduce``/``softmax``/``row`` kernel walks (last axis), or None."""
    root = k.yielded()
    op = root.owner
    if k.kind.data == "row":
        return shape_of(root.type)
    if isinstance(op, st.ReduceOp) and int_prop(op, "keepdims"):
        xs = shape_of(op.x.type)
        return xs if xs and int_prop(op, "axis") == len(xs) - 1 else None
    if isinstance(op, st.SoftmaxOp):
        xs = shape_of(op.x.type)
        return xs if int_prop(op, "axis") == len(xs) - 1 else None
    return None


def fits_rows(shape: tuple[int, ...], dtype: str) -> bool:
    vec = vector_width(shape[-1], ITEMSIZE[dtype])
    return row_config(shape[-1], vec, math.prod(shape[:-1])) is not None


def can_fuse(a: st.KernelOp, b: st.KernelOp) -> bool:
    if a.kind.data not in ROWLIKE or b.kind.data != "map":
        return False
    rows = row_shape(a)
    out = shape_of(b.result.type)
    if rows is None or out != rows or not fits_rows(out, dtype_name(b.result.type)):
        return False
    lead = rows[:-1]
    for blk_arg, u in zip(b.body.block.args, b.inputs, strict=True):
        if u is not a.result:
            continue
        if shape_of(blk_arg.type) not in (rows, (*lead, 1)):
            return False
        if not elementwise_to_yield(blk_arg):
            return False
    return True


def elementwise_to_yield(v: SSAValue) -> bool:
    """Whether every op between ``v`` and the kernel's yield is elementwise, so the map's
    output at an index reads ``v`` at that same index (up to the row broadcast). A view on the
    way (a transpose of the result) would move the reduced rows: with a square matrix the
    shapes still agree, and the fused row kernel would pair row ``i`` of the reduction with
    row ``i`` of a transposed output (x^T * rowsum instead of (x * rowsum)^T)."""
    seen: set[int] = set()
    todo = [v]
    while todo:
        for use in todo.pop().uses:
            o = use.operation
            if isinstance(o, st.YieldOp) or id(o) in seen:
                continue
            if not isinstance(o, ELEMENTWISE):
                return False
            seen.add(id(o))
            todo.extend(o.results)
    return True


def fuse_rows(fn: func.FuncOp) -> int:
    """Merge row producers into their consumers until nothing changes; returns the count.

    One forward walk: a merge puts the ``row`` kernel where its consumer was, so the walk
    meets it again (it may merge on into its own consumer), and no op before the merge can
    become mergeable (its consumer, if merged, is now a ``row`` kernel, not a ``map``). The
    merges are those of restarting from the top after each one (quadratic in the entry's
    length: 1.2 s for 128 layers), in the same order."""
    merged = 0
    op = fn.body.block.first_op
    while op is not None:
        nxt = op.next_op
        if isinstance(op, st.KernelOp) and op.kind.data in ROWLIKE:
            user = only_user(op)
            if isinstance(user, st.KernelOp) and can_fuse(op, user):
                new = merge_kernels(op, user, "row")
                merged += 1
                nxt = new if nxt is user else nxt
        op = nxt
    return merged


class GpuFuseRows(ModulePass):
    """Merge last-axis reductions and softmaxes into their elementwise consumers."""

    name = "gpu-fuse-rows"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        for f in op.ops:
            if isinstance(f, func.FuncOp) and f.body.blocks:
                fuse_rows(f)
