"""Pass ``gpu-split-reductions``: a reduction one kernel would run serially becomes two stages.

Why: the GPU reduces the last axis with a row kernel (a row's threads cooperate, warp
shuffles), and any other axis, or a row too long to unroll, with a thread per output group
looping over the reduced axis. That loop is serial: the 45M block's loss (``mean`` over the
8.4M elements of a ``[B*S*D]`` reshape) was one thread adding 8.4M values, ~280 ms of the
305 ms gradient on the H200, and an RMSNorm weight's gradient (a ``[S, D]`` column sum) 512
threads looping 1024 times. Here ``reduce(x, axis)`` with ``n = P * Q`` elements along
``axis`` (:func:`kinac.ir.gpu.plan.reduction_split` picks ``Q``) becomes

    reduce(reduce(reshape(x, [.., P, Q, ..]), axis + 1), axis)

so each stage has parallelism and a short loop (a stage still too long is split again). The
order of the additions is fixed by the shapes: results are deterministic (no atomics). A
bf16/f16 sum or mean accumulates in f32 across the stages (its partials are not rounded)
and is rounded once at the end, like the one-kernel reduction; ``mean`` is the mean of the
stages' means (exact in real arithmetic, both stages even). Integer means are not split
(their rounding would differ). The reshape is a view and the cast elementwise:
``fuse-kernels`` folds both into the first stage's kernel.
"""

from __future__ import annotations

from xdsl.context import Context
from xdsl.dialects.builtin import IntegerAttr, ModuleOp, i64
from xdsl.ir import Operation, SSAValue
from xdsl.passes import ModulePass

from kinac.dtypes import FLOAT_DTYPES, ITEMSIZE
from kinac.ir.dialects import kina as el
from kinac.ir.dialects import kina_struct as st
from kinac.ir.dialects.kina import dtype_name, int_prop, shape_of, tensor_type
from kinac.ir.gpu.plan import reduction_split

NARROW = ("bf16", "f16")


def _reduce(cls: type[st.ReduceOp], x: SSAValue, axis: int, keep: int, dt: str) -> st.ReduceOp:
    shape = list(shape_of(x.type))
    if keep:
        shape[axis] = 1
    else:
        del shape[axis]
    return cls.create(
        operands=[x],
        result_types=[tensor_type(dt, tuple(shape))],
        properties={"axis": IntegerAttr(axis, i64), "keepdims": IntegerAttr(keep, i64)},
    )


def split_one(op: st.ReduceOp) -> list[st.ReduceOp]:
    """Rewrite ``op`` into two stages if it needs it; returns the new reductions."""
    shape, axis, dt = shape_of(op.x.type), int_prop(op, "axis"), dtype_name(op.x.type)
    if isinstance(op, st.ReduceMeanOp) and dt not in FLOAT_DTYPES:
        return []
    q = reduction_split(shape, axis, ITEMSIZE[dt])
    if q is None:
        return []
    p = shape[axis] // q
    cls = type(op)
    new: list[Operation] = []
    x: SSAValue = op.x
    acc = dt
    if dt in NARROW and isinstance(op, st.ReduceSumOp | st.ReduceMeanOp):
        acc = "f32"
        cast = el.CastOp.create(operands=[x], result_types=[tensor_type(acc, shape)])
        new.append(cast)
        x = cast.results[0]
    split = (*shape[:axis], p, q, *shape[axis + 1 :])
    view = st.ReshapeOp.create(operands=[x], result_types=[tensor_type(acc, split)])
    first = _reduce(cls, view.results[0], axis + 1, 0, acc)
    second = _reduce(cls, first.results[0], axis, int_prop(op, "keepdims"), acc)
    new += [view, first, second]
    out: SSAValue = second.results[0]
    if acc != dt:
        back = el.CastOp.create(operands=[out], result_types=[op.result.type])
        new.append(back)
        out = back.results[0]
    block = op.parent_block()
    assert block is not None
    block.insert_ops_before(new, op)
    op.result.replace_all_uses_with(out)
    op.detach()
    op.erase()
    return [first, second]


class GpuSplitReductions(ModulePass):
    """Split every reduction a single kernel would run serially (see the module docstring)."""

    name = "gpu-split-reductions"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        work = [o for o in op.walk() if isinstance(o, st.ReduceOp)]
        while work:
            work.extend(split_one(work.pop()))
