"""The ``kina`` dialect, part two: creation, reductions, contraction, views and structure.

See :mod:`kinac.ir.dialects.kina` for the elementwise ops and the type helpers. This module also
assembles the :data:`Kina` dialect and :data:`OPS`, the op class of each Graph op name.
"""

from __future__ import annotations

import math
from typing import ClassVar

from xdsl.dialects.builtin import DenseArrayBase, IntegerAttr, StringAttr, TensorType
from xdsl.ir import Dialect, SSAValue
from xdsl.irdl import (
    AnyAttr,
    IRDLOperation,
    VarConstraint,
    base,
    irdl_op_definition,
    operand_def,
    opt_prop_def,
    prop_def,
    region_def,
    result_def,
    traits_def,
    var_operand_def,
)
from xdsl.traits import IsTerminator, Pure
from xdsl.utils.exceptions import VerifyException

from kinac.ir.dialects import kina as el
from kinac.ir.dialects.kina import KinaOp, broadcast, dtype_name, int_prop, ints_prop, shape_of


class CreationOp(KinaOp):
    """A tensor made from attributes alone (no operands)."""

    result = result_def(TensorType)
    traits = traits_def(Pure())
    assembly_format = "attr-dict `:` type($result)"


@irdl_op_definition
class ConstOp(CreationOp):
    """A weak scalar that has taken its dtype: a rank-0 tensor, broadcast by its users."""

    name = "kina.const"
    value = prop_def(AnyAttr())

    def verify_(self) -> None:
        if self.out_shape() != ():
            raise VerifyException("kina.const is rank 0")


@irdl_op_definition
class FullOp(CreationOp):
    """A tensor of one value."""

    name = "kina.full"
    value = prop_def(AnyAttr())


@irdl_op_definition
class IotaOp(CreationOp):
    """Values ``0 .. n-1`` along ``axis``, broadcast along the others."""

    name = "kina.iota"
    axis = prop_def(IntegerAttr)

    def verify_(self) -> None:
        if not 0 <= int_prop(self, "axis") < len(self.out_shape()):
            raise VerifyException("kina.iota: axis out of range")


class ReduceOp(KinaOp):
    """Reduce ``axis`` (removed, or kept as 1 with ``keepdims``)."""

    x = operand_def(TensorType)
    result = result_def(TensorType)
    axis = prop_def(IntegerAttr)
    keepdims = prop_def(IntegerAttr)
    traits = traits_def(Pure())
    assembly_format = "$x attr-dict `:` type($x) `->` type($result)"

    def verify_(self) -> None:
        shape = list(shape_of(self.x.type))
        ax = int_prop(self, "axis")
        if not 0 <= ax < len(shape):
            raise VerifyException(f"{self.name}: axis {ax} out of range")
        if int_prop(self, "keepdims"):
            shape[ax] = 1
        else:
            del shape[ax]
        if tuple(shape) != self.out_shape() or dtype_name(self.x.type) != self.out_dtype():
            raise VerifyException(f"{self.name}: result type does not match the rule")


@irdl_op_definition
class ReduceSumOp(ReduceOp):
    """Sum along ``axis``."""

    name = "kina.reduce_sum"


@irdl_op_definition
class ReduceMeanOp(ReduceOp):
    """Mean along ``axis``."""

    name = "kina.reduce_mean"


@irdl_op_definition
class ReduceMaxOp(ReduceOp):
    """Maximum along ``axis`` (NaN wins)."""

    name = "kina.reduce_max"


@irdl_op_definition
class ReduceMinOp(ReduceOp):
    """Minimum along ``axis`` (NaN wins)."""

    name = "kina.reduce_min"


def matmul_shape(a: tuple[int, ...], b: tuple[int, ...]) -> tuple[int, ...]:
    if len(a) < 2 or len(b) < 2 or a[-1] != b[-2]:
        raise VerifyException(f"kina.matmul: {list(a)} x {list(b)} do not contract")
    return broadcast(a[:-2], b[:-2]) + (a[-2], b[-1])


@irdl_op_definition
class MatmulOp(KinaOp):
    """Numpy ``matmul`` of rank >= 2 tensors, batch dims broadcast.

    ``impl`` is the lowering's choice (``select_impl``): ``"blas"`` calls the host BLAS,
    ``"loops"`` generates a loop nest; on the GPU ``"tc"`` is the generated tensor-core GEMM
    for small products (:mod:`kinac.ir.gpu.small_gemm`).
    """

    name = "kina.matmul"
    lhs = operand_def(TensorType)
    rhs = operand_def(TensorType)
    result = result_def(TensorType)
    impl = opt_prop_def(StringAttr)
    traits = traits_def(Pure())
    assembly_format = "$lhs `,` $rhs attr-dict `:` type($lhs) `,` type($rhs) `->` type($result)"

    def verify_(self) -> None:
        if matmul_shape(shape_of(self.lhs.type), shape_of(self.rhs.type)) != self.out_shape():
            raise VerifyException("kina.matmul: result shape does not match the rule")
        if self.impl is not None and self.impl.data not in ("blas", "loops", "tc"):
            raise VerifyException(f"kina.matmul: unknown impl {self.impl.data!r}")


class ViewOp(KinaOp):
    """A view: the lowering folds it into its readers' index arithmetic (no copy)."""

    x = operand_def(TensorType)
    result = result_def(TensorType)
    traits = traits_def(Pure())
    assembly_format = "$x attr-dict `:` type($x) `->` type($result)"

    def _check_dtype(self) -> None:
        if dtype_name(self.x.type) != self.out_dtype():
            raise VerifyException(f"{self.name} keeps the dtype")


@irdl_op_definition
class TransposeOp(ViewOp):
    """Permute dims: result dim ``i`` is input dim ``perm[i]``."""

    name = "kina.transpose"
    perm = prop_def(DenseArrayBase)

    def verify_(self) -> None:
        self._check_dtype()
        perm, shape = ints_prop(self, "perm"), shape_of(self.x.type)
        if sorted(perm) != list(range(len(shape))):
            raise VerifyException(f"kina.transpose: {list(perm)} is not a permutation")
        if tuple(shape[p] for p in perm) != self.out_shape():
            raise VerifyException("kina.transpose: result shape does not match perm")


@irdl_op_definition
class ReshapeOp(ViewOp):
    """Same elements in row-major order, new shape."""

    name = "kina.reshape"

    def verify_(self) -> None:
        self._check_dtype()
        if math.prod(shape_of(self.x.type)) != math.prod(self.out_shape()):
            raise VerifyException("kina.reshape: element counts differ")


@irdl_op_definition
class BroadcastToOp(ViewOp):
    """Numpy ``broadcast_to`` the result shape."""

    name = "kina.broadcast_to"

    def verify_(self) -> None:
        self._check_dtype()
        if broadcast(shape_of(self.x.type), self.out_shape()) != self.out_shape():
            raise VerifyException("kina.broadcast_to: shapes do not broadcast")


@irdl_op_definition
class SliceOp(ViewOp):
    """``x[..., start:stop, ...]`` along ``axis``."""

    name = "kina.slice"
    axis = prop_def(IntegerAttr)
    start = prop_def(IntegerAttr)
    stop = prop_def(IntegerAttr)

    def verify_(self) -> None:
        self._check_dtype()
        shape = list(shape_of(self.x.type))
        ax, s, e = int_prop(self, "axis"), int_prop(self, "start"), int_prop(self, "stop")
        if not (0 <= ax < len(shape) and 0 <= s < e <= shape[ax]):
            raise VerifyException(f"kina.slice: bad range {s}:{e} on axis {ax}")
        shape[ax] = e - s
        if tuple(shape) != self.out_shape():
            raise VerifyException("kina.slice: result shape does not match")


@irdl_op_definition
class RepeatInterleaveOp(ViewOp):
    """Repeat each element ``repeats`` times along ``axis`` (GQA's K/V heads)."""

    name = "kina.repeat_interleave"
    axis = prop_def(IntegerAttr)
    repeats = prop_def(IntegerAttr)

    def verify_(self) -> None:
        self._check_dtype()
        shape = list(shape_of(self.x.type))
        shape[int_prop(self, "axis")] *= int_prop(self, "repeats")
        if tuple(shape) != self.out_shape():
            raise VerifyException("kina.repeat_interleave: result shape does not match")


@irdl_op_definition
class ToDeviceOp(ViewOp):
    """Copy to ``device`` (``cpu`` for ``to_host``); on the host, cpu to cpu is a no-op."""

    name = "kina.to_device"
    device = prop_def(StringAttr)

    def verify_(self) -> None:
        self._check_dtype()
        if shape_of(self.x.type) != self.out_shape():
            raise VerifyException("kina.to_device keeps the shape")


@irdl_op_definition
class ConcatOp(KinaOp):
    """Join along ``axis``; the other dims agree."""

    name = "kina.concat"
    xs = var_operand_def(TensorType)
    result = result_def(TensorType)
    axis = prop_def(IntegerAttr)
    traits = traits_def(Pure())
    assembly_format = "$xs attr-dict `:` type($xs) `->` type($result)"

    def verify_(self) -> None:
        ax = int_prop(self, "axis")
        shapes = [list(shape_of(x.type)) for x in self.xs]
        total = sum(s[ax] for s in shapes)
        for s in shapes:
            s[ax] = total
            if tuple(s) != self.out_shape():
                raise VerifyException("kina.concat: operand dims disagree")


@irdl_op_definition
class GatherOp(KinaOp):
    """Embedding lookup ``table[idx]``: ``[V, D]`` and ``[..b]`` ints to ``[..b, D]``.

    An index outside ``[0, V)`` is a runtime error (the host kernel records it and the
    runtime raises), never a read out of bounds.
    """

    name = "kina.gather"
    table = operand_def(TensorType)
    idx = operand_def(TensorType)
    result = result_def(TensorType)
    assembly_format = "$table `,` $idx attr-dict `:` type($table) `,` type($idx) `->` type($result)"

    def verify_(self) -> None:
        t, i = shape_of(self.table.type), shape_of(self.idx.type)
        if len(t) != 2 or dtype_name(self.idx.type) not in ("i32", "i64"):
            raise VerifyException("kina.gather: a [V, D] table and an int index tensor")
        if i + (t[1],) != self.out_shape():
            raise VerifyException("kina.gather: result shape is [..idx, D]")


@irdl_op_definition
class SoftmaxOp(KinaOp):
    """``exp(x - max) / sum(exp(x - max))`` along ``axis``."""

    name = "kina.softmax"
    T: ClassVar = VarConstraint("T", base(TensorType))
    x = operand_def(T)
    result = result_def(T)
    axis = prop_def(IntegerAttr)
    traits = traits_def(Pure())
    assembly_format = "$x attr-dict `:` type($x)"

    def verify_(self) -> None:
        if not 0 <= int_prop(self, "axis") < len(self.out_shape()):
            raise VerifyException("kina.softmax: axis out of range")
        if dtype_name(self.x.type) not in el.FLOATS:
            raise VerifyException("kina.softmax takes a float tensor")


@irdl_op_definition
class YieldOp(IRDLOperation):
    """Ends a ``kina.kernel`` body with the value it materialises."""

    name = "kina.yield"
    value = operand_def(TensorType)
    traits = traits_def(IsTerminator())
    assembly_format = "$value attr-dict `:` type($value)"


@irdl_op_definition
class ScatterAddOp(KinaOp):
    """Gather's VJP: ``src`` rows ``[..idx, D]`` added into a zero ``[V, D]`` table at rows
    ``idx``, in row-major order of ``idx`` (deterministic). Indices outside ``[0, V)``
    contribute nothing (the gather of the same indices reports them)."""

    name = "kina.scatter_add"
    idx = operand_def(TensorType)
    src = operand_def(TensorType)
    result = result_def(TensorType)
    assembly_format = "$idx `,` $src attr-dict `:` type($idx) `,` type($src) `->` type($result)"

    def verify_(self) -> None:
        i, s, r = shape_of(self.idx.type), shape_of(self.src.type), self.out_shape()
        if len(r) != 2 or dtype_name(self.idx.type) not in ("i32", "i64"):
            raise VerifyException("kina.scatter_add: an int index tensor into a [V, D] result")
        if s != i + (r[1],) or dtype_name(self.src.type) != dtype_name(self.result.type):
            raise VerifyException("kina.scatter_add: src is [..idx, D] of the result's dtype")


@irdl_op_definition
class KernelOp(IRDLOperation):
    """One materialised result: a fused loop nest or a library call over buffers.

    ``kind`` names the loop structure (``map``, ``reduce``, ``softmax``, ``gather``,
    ``concat``, ``matmul``); ``impl`` is ``loops`` (generated code) or ``blas`` (a call into the
    host BLAS). The body maps the block arguments (the materialised ``inputs``) to the result
    through ops that are recomputed per element (elementwise ops and views), ending in at most
    one non-elementwise root. This is the unit a GPU target would map to one launch.
    """

    name = "kina.kernel"
    inputs = var_operand_def(TensorType)
    result = result_def(TensorType)
    kind = prop_def(StringAttr)
    impl = prop_def(StringAttr)
    sym = prop_def(StringAttr)
    body = region_def("single_block")

    def yielded(self) -> SSAValue:
        """The value the body yields: the kernel's result as computed inside it (what every
        fusion pass matches on; the verifier below guarantees the body ends in ``kina.yield``)."""
        y = self.body.block.last_op
        assert isinstance(y, YieldOp)
        return y.value

    def verify_(self) -> None:
        blk = self.body.block
        if len(blk.args) != len(self.inputs):
            raise VerifyException("kina.kernel: one block argument per input")
        for a, v in zip(blk.args, self.inputs, strict=True):
            if a.type != v.type:
                raise VerifyException("kina.kernel: block argument types match the inputs")
        last = blk.last_op
        if not isinstance(last, YieldOp) or last.value.type != self.result.type:
            raise VerifyException("kina.kernel: the body ends in kina.yield of the result type")


OPS: dict[str, type[IRDLOperation]] = {
    **el.ELEMENTWISE_OPS, "cast": el.CastOp, "where": el.WhereOp,
    "const": ConstOp, "full": FullOp, "iota": IotaOp,
    "reduce_sum": ReduceSumOp, "reduce_mean": ReduceMeanOp, "reduce_max": ReduceMaxOp,
    "reduce_min": ReduceMinOp, "matmul": MatmulOp, "transpose": TransposeOp,
    "reshape": ReshapeOp, "broadcast_to": BroadcastToOp, "slice": SliceOp,
    "repeat_interleave": RepeatInterleaveOp, "to_device": ToDeviceOp, "to_host": ToDeviceOp,
    "concat": ConcatOp, "gather": GatherOp, "softmax": SoftmaxOp,
    "scatter_add": ScatterAddOp,
}  # fmt: skip
"""Graph op name -> ``kina`` op class (the elementwise ones come from the definitions)."""

Kina = Dialect("kina", [*dict.fromkeys(OPS.values()), YieldOp, KernelOp], [])
