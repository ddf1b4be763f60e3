"""Pass ``gpu-fuse-epilogues``: a bias or residual add joins the cuBLAS call that feeds it.

After ``fuse-kernels`` ``(add (matmul x w) b)`` is a library call and a ``map`` kernel that
reads its result once more. cuBLASLt can add while it writes: a bias vector over the last dim
(``CUBLASLT_EPILOGUE_BIAS``), or a whole tensor of the
output's shape (``D = A B + C`` with ``beta = 1``: the transformer's residual connections). So
when a ``map`` kernel is exactly such an add of a matmul kernel's result (its only user) and one
other buffer, the two become one ``matmul`` kernel whose body ends in the add, with an
``epilogue`` attribute naming it. GELU is not fused: cuBLASLt's GELU is the tanh approximation
and Kina's ``gelu`` is exact. The bias epilogue is used for unbatched products only.
"""

from __future__ import annotations

from xdsl.context import Context
from xdsl.dialects import func
from xdsl.dialects.builtin import ModuleOp, StringAttr
from xdsl.ir import BlockArgument
from xdsl.passes import ModulePass

from kinac.ir.dialects import kina as el
from kinac.ir.dialects import kina_struct as st
from kinac.ir.dialects.kina import dtype_name, shape_of
from kinac.ir.gpu.fuse_rows import merge_kernels, only_user
from kinac.ir.gpu.gemm import plan_gemm

EPILOGUE_DTYPES = ("f32", "f16", "bf16")


def epilogue_kind(m: st.KernelOp, e: st.KernelOp) -> str | None:
    """``bias`` or ``residual`` if map kernel ``e`` is one on ``m``'s result."""
    if m.kind.data != "matmul" or m.impl.data != "blas" or e.kind.data != "map":
        return None
    if "epilogue" in m.attributes or dtype_name(m.result.type) not in EPILOGUE_DTYPES:
        return None
    ops = [o for o in e.body.block.ops if not isinstance(o, st.YieldOp)]
    if len(ops) != 1 or not isinstance(ops[0], el.AddOp):
        return None
    if e.yielded() is not ops[-1].results[0]:
        return None
    add = ops[0]
    m_arg = [a for a, u in zip(e.body.block.args, e.inputs, strict=True) if u is m.result]
    if len(m_arg) != 1 or len(list(m_arg[0].uses)) != 1:
        return None
    mine = m_arg[0]
    if add.lhs is mine:
        other = add.rhs
    elif add.rhs is mine:
        other = add.lhs
    else:
        return None
    if not isinstance(other, BlockArgument):
        return None
    out = shape_of(m.result.type)
    if shape_of(e.result.type) != out:
        return None
    oshape = shape_of(other.type)
    if oshape == out:
        return "residual"
    if oshape and oshape[-1] == out[-1] and all(d == 1 for d in oshape[:-1]):
        if plan_gemm(m).batch == 1:
            return "bias"
    return None


def fuse_epilogues(fn: func.FuncOp) -> int:
    merged = 0
    for k in list(fn.body.block.ops):
        if not isinstance(k, st.KernelOp) or k.kind.data != "matmul":
            continue
        user = only_user(k)
        if not isinstance(user, st.KernelOp):
            continue
        kind = epilogue_kind(k, user)
        if kind is None:
            continue
        new = merge_kernels(k, user, "matmul")
        new.attributes["epilogue"] = StringAttr(kind)
        merged += 1
    return merged


class GpuFuseEpilogues(ModulePass):
    """Fold bias and residual adds into the matmul kernels that produce their input."""

    name = "gpu-fuse-epilogues"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        for f in op.ops:
            if isinstance(f, func.FuncOp) and f.body.blocks:
                fuse_epilogues(f)
