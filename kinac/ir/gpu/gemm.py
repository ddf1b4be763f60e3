"""A ``kina.kernel`` with ``impl = "blas"`` as one cuBLAS/cuBLASLt call (:class:`GpuGemm`).

cuBLAS reads each operand in place through its layout (:mod:`kinac.ir.layout`): the last two
dims as a matrix at a leading dimension, maybe transposed (``as_blas_matrix``), and every batch
at its own element offset. Batches whose offsets form arithmetic progressions (one stride
each, 0 for a broadcast operand) become one strided-batched call; any other batch pattern, such
as grouped-query attention where query head ``h`` reads key head ``h // G`` through
``repeat_interleave``, becomes one pointer-array batched call; a 2-D right operand with a
batched left one whose rows merge is one plain call with ``M = batch * rows``.
"""

from __future__ import annotations

import itertools
import math

from xdsl.ir import BlockArgument, SSAValue

from kinac.artifacts.gpu import GemmOperand, GpuGemm
from kinac.ir.dialects import kina as el
from kinac.ir.dialects import kina_struct as st
from kinac.ir.dialects.kina import dtype_name, shape_of
from kinac.ir.layout import Layout, as_blas_matrix
from kinac.ir.views import chain_layout, view_base


def _bcast(bi: tuple[int, ...], shape: tuple[int, ...]) -> tuple[int, ...]:
    lead = len(bi) - len(shape)
    return tuple(0 if n == 1 else bi[lead + j] for j, n in enumerate(shape))


def _operand(v: SSAValue, names: dict[SSAValue, str]) -> tuple[str, Layout]:
    base, chain = view_base(v)
    lay = chain_layout(base, chain)
    assert isinstance(base, BlockArgument) and lay is not None, "fusion materialises operands"
    return names.get(base, "?"), lay


def _arith(offs: tuple[int, ...]) -> bool:
    if len(offs) < 2:
        return True
    d = offs[1] - offs[0]
    return all(offs[i + 1] - offs[i] == d for i in range(len(offs) - 1))


def find_matmul(k: st.KernelOp) -> st.MatmulOp:
    return next(o for o in k.body.block.ops if isinstance(o, st.MatmulOp))


def epilogue_of(k: st.KernelOp) -> tuple[str, SSAValue | None]:
    """The epilogue a fused matmul kernel computes after its product, and its operand."""
    mm = find_matmul(k)
    root = k.yielded()
    if root is mm.result:
        return "", None
    add = root.owner
    assert isinstance(add, el.AddOp)
    other = add.rhs if add.lhs is mm.result else add.lhs
    if shape_of(other.type) == shape_of(mm.result.type):
        return "residual", other
    return "bias", other


def plan_gemm(k: st.KernelOp, names: dict[SSAValue, str] | None = None, out: str = "?") -> GpuGemm:
    """The cuBLAS call of matmul kernel ``k``; ``names`` maps body arguments to buffers."""
    nm = names or {}
    mm = find_matmul(k)
    (abuf, alay), (bbuf, blay) = _operand(mm.lhs, nm), _operand(mm.rhs, nm)
    a_s, b_s, o_s = shape_of(mm.lhs.type), shape_of(mm.rhs.type), shape_of(mm.result.type)
    m, kk, n = a_s[-2], a_s[-1], b_s[-1]
    va, vb = as_blas_matrix(alay), as_blas_matrix(blay)
    assert va is not None and vb is not None
    epi, other = epilogue_of(k)
    epi_buf = ""
    if other is not None:
        assert isinstance(other, BlockArgument)
        epi_buf = nm.get(other, "?")
    dt, odt = dtype_name(mm.lhs.type), dtype_name(k.result.type)
    if len(b_s) == 2 and len(a_s) > 2:
        merged = alay.reshape((math.prod(a_s[:-1]), kk))
        vm = as_blas_matrix(merged) if merged is not None else None
        if merged is not None and vm is not None:
            return GpuGemm(
                dt, odt, math.prod(a_s[:-1]), n, kk, 1,
                GemmOperand(abuf, (merged.offset,), vm.ld, vm.trans),
                GemmOperand(bbuf, (blay.offset,), vb.ld, vb.trans),
                GemmOperand(out, (0,), n), "single", epi, epi_buf,
            )  # fmt: skip
    batch_shape = o_s[:-2]
    a_off, b_off, c_off = [], [], []
    for flat, bi in enumerate(itertools.product(*(range(d) for d in batch_shape))):
        a_off.append(alay.offset_of((*_bcast(bi, a_s[:-2]), 0, 0)))
        b_off.append(blay.offset_of((*_bcast(bi, b_s[:-2]), 0, 0)))
        c_off.append(flat * m * n)
    batch = len(c_off)
    offs = (tuple(a_off), tuple(b_off), tuple(c_off))
    if batch == 1:
        mode = "single"
    elif all(_arith(o) for o in offs):
        mode = "strided"
    else:
        mode = "pointers"
    return GpuGemm(
        dt, odt, m, n, kk, batch,
        GemmOperand(abuf, offs[0], va.ld, va.trans),
        GemmOperand(bbuf, offs[1], vb.ld, vb.trans),
        GemmOperand(out, offs[2], n), mode, epi, epi_buf,
    )  # fmt: skip
