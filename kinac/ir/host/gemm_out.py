"""A batched BLAS product writes straight into the layout its only reader wants.

Why (issue 14, docs/host.md): attention's ``P @ V`` yields ``[B, H, S, Dh]`` and the next
kernel only transposes and reshapes it to ``[B, S, H*Dh]`` for the output projection: a map
kernel that copies 512 KiB (25-30 us of the small block's ~3.4 ms on two threads, one more
fork/join). BLAS writes each ``S x Dh`` matrix with any row stride (``ldc``), so the product
can write it at ``(b, h)``'s place in ``[B, S, H*Dh]`` directly (``ldc = H*Dh``).

:func:`fold_output_views` (run in the host's ``fuse-kernels`` stage, after the causal marking)
moves such a view-only map kernel into the matmul kernel it reads: the kernel's body ends in
the views, its result is the map's. It applies when the map kernel's body is transposes and
reshapes of its one input, that input is a batched ``blas`` product read by nothing else, and
the views put each of the product's matrices at a constant row stride with contiguous rows
(:func:`output_strides`). The kernel lowering (``KernelLowering._gemm``) reads the strides.
"""

from __future__ import annotations

from xdsl.dialects import func
from xdsl.dialects.builtin import StringAttr
from xdsl.ir import Block, Operation, Region, SSAValue

from kinac.ir.dialects import kina_struct as st
from kinac.ir.dialects.kina import ints_prop, shape_of
from kinac.ir.fuse_kernels import copy_op
from kinac.ir.layout import cstrides
from kinac.ir.views import view_base

ENABLED = True  # False: the map kernel stays (as before 2026-12-02d; benches/cpu_ab.py fold=0)
_VIEWS = (st.TransposeOp, st.ReshapeOp)


def output_strides(result: SSAValue, root: SSAValue) -> tuple[int, ...] | None:
    """The strides, in the contiguous buffer of ``root``, of each dim of ``result``, when
    ``root`` is transposes and reshapes of ``result`` that keep each dim whole (a reshape
    only between contiguous layouts); None otherwise."""
    base, chain = view_base(root)
    if base is not result or not chain or not all(isinstance(op, _VIEWS) for op in chain):
        return None
    strides = tuple(cstrides(shape_of(root.type)))
    for op in reversed(chain):
        src = op.operands[0]
        if isinstance(op, st.ReshapeOp):
            if strides != tuple(cstrides(shape_of(op.results[0].type))):
                return None  # a reshape of a non-contiguous layout
            strides = tuple(cstrides(shape_of(src.type)))
        else:
            perm = ints_prop(op, "perm")
            back = [0] * len(perm)
            for i, p in enumerate(perm):
                back[p] = strides[i]
            strides = tuple(back)
    return strides


def gemm_output(k: st.KernelOp) -> tuple[st.MatmulOp, tuple[int, ...]] | None:
    """The product of matmul kernel ``k`` and the strides of its result's dims in ``k``'s
    output buffer, when ``k``'s root is views of the product (else None: contiguous)."""
    root = k.yielded()
    base, chain = view_base(root)
    if not chain or not isinstance(base.owner, st.MatmulOp):
        return None
    strides = output_strides(base, root)
    assert strides is not None, "fold_output_views checked the views"
    return base.owner, strides


def _views_only(m: st.KernelOp) -> bool:
    body = list(m.body.block.ops)
    return (
        m.kind.data == "map"
        and len(m.inputs) == 1
        and len(body) > 1
        and all(isinstance(o, _VIEWS) for o in body[:-1])
    )


def _foldable(k: st.KernelOp, m: st.KernelOp) -> bool:
    """``k`` a batched BLAS product whose result only ``m`` reads, through views BLAS can
    write: each output matrix's rows contiguous, at a row stride of at least its width."""
    mm = k.yielded().owner
    if k.kind.data != "matmul" or k.impl.data != "blas" or not isinstance(mm, st.MatmulOp):
        return False
    if len(shape_of(mm.result.type)) < 3 or len(list(k.results[0].uses)) != 1:
        return False
    from kinac.ir.host.kernel_loops import parallel_extent

    if parallel_extent(k) is None:
        return False  # one call over merged rows: its output stays contiguous
    arg = m.body.block.args[0]
    strides = output_strides(arg, m.yielded())
    n = shape_of(mm.result.type)[-1]
    return strides is not None and strides[-1] == 1 and strides[-2] >= n


def fold_output_views(fn: func.FuncOp) -> None:
    """Move each view-only map kernel of ``fn`` into the product kernel it reads, if any."""
    for m in [o for o in fn.body.block.ops if isinstance(o, st.KernelOp)]:
        if not ENABLED or not _views_only(m):
            continue
        k = m.inputs[0].owner
        if not isinstance(k, st.KernelOp) or not _foldable(k, m):
            continue
        body = Block(arg_types=[a.type for a in k.body.block.args])
        vmap: dict[SSAValue, SSAValue] = dict(zip(k.body.block.args, body.args, strict=True))
        for op in list(k.body.block.ops)[:-1]:
            copy_op(op, body, vmap)
            copied = body.last_op
            assert copied is not None
            _copy_attributes(op, copied)  # the product's causal marking
        vmap[m.body.block.args[0]] = vmap[k.yielded()]
        for op in list(m.body.block.ops)[:-1]:
            copy_op(op, body, vmap)
        body.add_op(st.YieldOp.create(operands=[vmap[m.yielded()]]))
        new = st.KernelOp.create(
            operands=list(k.inputs),
            result_types=[m.result.type],
            properties={"kind": k.kind, "impl": k.impl, "sym": StringAttr(k.sym.data)},
            regions=[Region(body)],
        )
        _copy_attributes(k, new)
        fn.body.block.insert_op_before(new, k)
        m.result.replace_all_uses_with(new.result)
        for dead in (m, k):
            dead.detach()
            dead.erase()


def _copy_attributes(src: Operation, dst: Operation) -> None:
    for name, attr in src.attributes.items():
        dst.attributes[name] = attr
