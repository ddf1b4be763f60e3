"""Pass ``legalize-dtypes``: f16 / bf16 arithmetic becomes f32 arithmetic between casts.

The host has no bf16 arithmetic (and numpy no bf16 at all), so every op that computes on a
low-precision float is rewritten to compute in f32 with its result cast back to the original
dtype: each intermediate is still rounded to f16 / bf16, as PyTorch does on the CPU. Data
movement (views, ``where``, ``concat``, ``gather``, casts, creation) keeps the low-precision
dtype, so buffers stay half the size.
"""

from __future__ import annotations

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp, TensorType
from xdsl.ir import Operation, SSAValue
from xdsl.passes import ModulePass
from xdsl.rewriter import InsertPoint, Rewriter

from kinac.ir.dialects import kina as el
from kinac.ir.dialects import kina_struct as st
from kinac.ir.dialects.kina import dtype_name, shape_of, tensor_type

LOW = ("f16", "bf16")
_COMPUTE = (el.UnaryOp, el.BinaryOp, st.ReduceOp, st.SoftmaxOp, st.MatmulOp, st.ScatterAddOp)


def _cast(v: SSAValue, dtype: str) -> Operation:
    return el.CastOp.create(operands=[v], result_types=[tensor_type(dtype, shape_of(v.type))])


class LegalizeDtypes(ModulePass):
    """Rewrite f16/bf16 compute ops to f32 ops wrapped in ``kina.cast``."""

    name = "legalize-dtypes"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        for o in list(op.walk()):
            if not isinstance(o, _COMPUTE):
                continue
            low = [v for v in o.operands if dtype_name(v.type) in LOW]
            if not low:
                continue
            new_operands: list[SSAValue] = []
            for v in o.operands:
                if dtype_name(v.type) in LOW:
                    c = _cast(v, "f32")
                    Rewriter.insert_op(c, InsertPoint.before(o))
                    new_operands.append(c.results[0])
                else:
                    new_operands.append(v)
            res_t = o.results[0].type
            assert isinstance(res_t, TensorType)
            out_dt = dtype_name(res_t)
            f32_t = tensor_type("f32" if out_dt in LOW else out_dt, shape_of(res_t))
            new = o.__class__.create(
                operands=new_operands, result_types=[f32_t], properties=dict(o.properties)
            )
            Rewriter.insert_op(new, InsertPoint.before(o))
            if out_dt in LOW:
                back = _cast(new.results[0], out_dt)
                Rewriter.insert_op(back, InsertPoint.before(o))
                o.results[0].replace_all_uses_with(back.results[0])
            else:
                o.results[0].replace_all_uses_with(new.results[0])
            o.detach()
            o.erase()
