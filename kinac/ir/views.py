"""View ops as layout transformations (see :mod:`kinac.ir.layout`).

Shared by fusion (may BLAS read this view in place?) and by kernel lowering (which offset does
this element live at?).
"""

from __future__ import annotations

from xdsl.ir import BlockArgument, SSAValue

from kinac.ir.dialects import kina_struct as st
from kinac.ir.dialects.kina import int_prop, ints_prop, shape_of
from kinac.ir.layout import Layout

VIEWS = (
    st.TransposeOp,
    st.ReshapeOp,
    st.BroadcastToOp,
    st.SliceOp,
    st.RepeatInterleaveOp,
    st.ToDeviceOp,
)


def apply_view(op: st.ViewOp, lay: Layout) -> Layout | None:
    """The layout of ``op``'s result given its input's layout (``None``: not a layout)."""
    out = shape_of(op.result.type)
    if isinstance(op, st.TransposeOp):
        return lay.transpose(ints_prop(op, "perm"))
    if isinstance(op, st.ReshapeOp):
        return lay.reshape(out)
    if isinstance(op, st.BroadcastToOp):
        return lay.broadcast_to(out)
    if isinstance(op, st.SliceOp):
        return lay.slice(int_prop(op, "axis"), int_prop(op, "start"), int_prop(op, "stop"))
    if isinstance(op, st.RepeatInterleaveOp):
        return lay.repeat_interleave(int_prop(op, "axis"), int_prop(op, "repeats"))
    if isinstance(op, st.ToDeviceOp):
        return lay
    raise AssertionError(op.name)


def view_base(v: SSAValue, stop: set[SSAValue] | None = None) -> tuple[SSAValue, list[st.ViewOp]]:
    """Follow view ops back from ``v`` to a non-view value (or one in ``stop``).

    Returns the base value and the view ops from base to ``v``.
    """
    chain: list[st.ViewOp] = []
    while not isinstance(v, BlockArgument) and (stop is None or v not in stop):
        op = v.owner
        if not isinstance(op, VIEWS):
            break
        chain.append(op)
        v = op.x
    chain.reverse()
    return v, chain


def chain_layout(base: SSAValue, chain: list[st.ViewOp]) -> Layout | None:
    """The layout of the end of ``chain`` over a contiguous buffer holding ``base``."""
    lay: Layout | None = Layout.contiguous(shape_of(base.type))
    for op in chain:
        if lay is None:
            return None
        lay = apply_view(op, lay)
    return lay
