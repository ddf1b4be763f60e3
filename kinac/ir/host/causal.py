"""Causal attention's products on the host: which BLAS products may skip the masked keys.

Why (issue 14): the host computed the whole ``S x S`` scores per head and the whole
``P @ V``, although a causal softmax row ``i`` reads keys ``[0, i]`` only (rounded up to 16,
:func:`kinac.ir.host.causal_blocks.causal_rows`) and stores an exact 0 past them. Split into
blocks (query rows ``[r0, r1)`` see keys ``[0, r1)``), the two products do 62% of their work
for four blocks, as PyTorch's CPU ``scaled_dot_product_attention`` does.

After fusion (:class:`FuseKernelsHost`, the host's ``fuse-kernels``: the shared pass, then
this marking, so the stage list is unchanged) a matmul kernel's product gets the discardable
attribute ``causal`` (inside the kernel's body, so it is part of the kernel's canonical text):

- ``"scores"``: the kernel's result has one reader, a softmax kernel whose root is a causal
  softmax and which reads that input only through elementwise ops that keep its last two dims
  (each element at its own row and column) down to the softmax's input. The softmax reads no
  element past its row's keys, so those are not computed (the buffer holds whatever was there).
- ``"weights"``: the product's left operand is, unviewed, the result of a softmax kernel whose
  root is a causal softmax: exact zeros past each row's keys (or NaN across a row whose kept
  part is NaN), so the terms ``0 * v`` are left out of the sum. A non-finite ``v`` at a masked
  key therefore no longer makes the row NaN, as in the GPU's fused attention kernel, which skips
  the masked blocks (docs/host.md).

Both may hold (``"scores,weights"``). The kernel lowering reads the attribute
(``KernelLowering._gemm``, calls from :func:`~kinac.ir.host.causal_blocks.gemm_blocks`): a ``"weights"`` product (or
both) is one BLAS call per row block over the keys its rows see; a ``"scores"`` product one
call per key block ``[c0, c1)`` for the rows ``[c0, S)`` that read it (the same elements;
OpenBLAS ran the scores' thin row blocks, ``32 x 64 @ 64 x keys``, no faster than the whole
product, and these taller ones ~10% faster).
"""

from __future__ import annotations

from xdsl.context import Context
from xdsl.dialects import func
from xdsl.dialects.builtin import ModuleOp, StringAttr
from xdsl.ir import BlockArgument, SSAValue

from kinac.ir.dialects import kina as el
from kinac.ir.dialects import kina_struct as st
from kinac.ir.dialects.kina import int_prop, shape_of
from kinac.ir.fuse_kernels import FuseKernels
from kinac.ir.host.causal_blocks import causal_rows
from kinac.ir.host.gemm_out import fold_output_views
from kinac.ir.host.row_fuse import fuse_row_reductions

CAUSAL = "causal"  # the attribute on a kernel's kina.matmul
ENABLED = True  # False: no product is marked (benches/cpu_ab.py ``causal=0``, the A/B's before)
_ROW_PRESERVING = (el.UnaryOp, el.CastOp, el.BinaryOp, el.WhereOp)


def causal_softmax_kernel(k: st.KernelOp) -> st.SoftmaxOp | None:
    """The root of softmax kernel ``k`` when its lowering skips each row's masked keys."""
    op = k.yielded().owner
    if k.kind.data != "softmax" or not isinstance(op, st.SoftmaxOp):
        return None
    return op if causal_rows(op, shape_of(op.x.type), int_prop(op, "axis")) else None


def _only_softmax_reads(v: SSAValue, softmax: st.SoftmaxOp) -> bool:
    """``v`` is read once, by a chain of elementwise ops each read once whose last two dims
    are ``v``'s, ending in ``softmax``'s input: each element read at its own row and column."""
    rows_cols = shape_of(v.type)[-2:]
    while True:
        uses = list(v.uses)
        if len(uses) != 1:
            return False
        user = uses[0].operation
        if user is softmax:
            return softmax.x is v
        if not isinstance(user, _ROW_PRESERVING) or isinstance(user, el.CompareOp):
            return False
        v = user.results[0]
        if shape_of(v.type)[-2:] != rows_cols:
            return False


def _product(k: st.KernelOp) -> st.MatmulOp | None:
    op = k.yielded().owner
    if k.kind.data != "matmul" or k.impl.data != "blas" or not isinstance(op, st.MatmulOp):
        return None
    return op


def mark_causal(fn: func.FuncOp) -> None:
    """Set ``causal`` on the products of ``fn``'s kernels that may skip masked keys."""
    kernels = [o for o in fn.body.block.ops if isinstance(o, st.KernelOp)]
    for k in kernels:
        mm = _product(k)
        if mm is None:
            continue
        roles = []
        uses = list(k.results[0].uses)
        if len(uses) == 1 and isinstance(reader := uses[0].operation, st.KernelOp):
            soft = causal_softmax_kernel(reader)
            operands = list(reader.inputs)
            if soft is not None and operands.count(k.results[0]) == 1:
                arg = reader.body.block.args[operands.index(k.results[0])]
                if _only_softmax_reads(arg, soft):
                    roles.append("scores")
        lhs = mm.lhs
        if isinstance(lhs, BlockArgument) and lhs.owner is k.body.block:
            src = k.inputs[lhs.index].owner
            if isinstance(src, st.KernelOp) and causal_softmax_kernel(src) is not None:
                roles.append("weights")
        if roles:
            mm.attributes[CAUSAL] = StringAttr(",".join(roles))


class FuseKernelsHost(FuseKernels):
    """The shared ``fuse-kernels``, then :func:`mark_causal`,
    :func:`~kinac.ir.host.gemm_out.fold_output_views` and
    :func:`~kinac.ir.host.row_fuse.fuse_row_reductions` (same name: one stage)."""

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        super().apply(ctx, op)
        for f in op.ops:
            if isinstance(f, func.FuncOp) and f.body.blocks:
                if ENABLED:
                    mark_causal(f)
                fold_output_views(f)
                fuse_row_reductions(f)
