"""The ``kina`` dialect: typed Kina primitives on ranked tensors at concrete dims.

One op per primitive of spec section 5 (the names of ``kinac.tir.graph``), on builtin
``tensor<...>`` types whose element types are ``f64 f32 f16 bf16 i64 i32 i1`` (``i1`` is Kina's
``bool``). Verifiers re-check the typing rules at concrete dims, so a bad Graph or a bad pass is
caught at the op that breaks it rather than as wrong numbers. The unary, binary and comparison
ops are not written here one by one: :data:`ELEMENTWISE_OPS` makes one class per definition in
:mod:`kinac.prims.defs` (``kina.<name>``, its definition as ``DEF``). Two structural ops carry the
lowering's decisions: ``kina.kernel`` (one fused loop nest or library call, made by
``fuse_kernels``) and ``kina.yield``.
"""

from __future__ import annotations

from typing import ClassVar

from xdsl.dialects.builtin import (
    BFloat16Type,
    DenseArrayBase,
    Float16Type,
    Float32Type,
    Float64Type,
    IntegerAttr,
    TensorType,
    i1,
    i32,
    i64,
)
from xdsl.ir import Attribute
from xdsl.irdl import (
    AnyAttr,
    IRDLOperation,
    ParsePropInAttrDict,
    VarConstraint,
    irdl_op_definition,
    operand_def,
    result_def,
    traits_def,
)
from xdsl.traits import Pure
from xdsl.utils.exceptions import VerifyException

from kinac.dtypes import FLOAT_DTYPES as FLOATS
from kinac.prims.elementwise import ELEMENTWISE, Elementwise

_ELEM: dict[str, Attribute] = {
    "f64": Float64Type(),
    "f32": Float32Type(),
    "f16": Float16Type(),
    "bf16": BFloat16Type(),
    "i64": i64,
    "i32": i32,
    "bool": i1,
}


def elem_type(dtype: str) -> Attribute:
    """The MLIR element type of a Kina dtype name."""
    return _ELEM[dtype]


def dtype_name(t: Attribute) -> str:
    """The Kina dtype name of a tensor type or an element type."""
    el = t.get_element_type() if isinstance(t, TensorType) else t
    for name, e in _ELEM.items():
        if e == el:
            return name
    raise VerifyException(f"{t} is not a Kina element type")


def tensor_type(dtype: str, shape: tuple[int, ...]) -> TensorType:
    return TensorType(elem_type(dtype), list(shape))


def shape_of(t: Attribute) -> tuple[int, ...]:
    assert isinstance(t, TensorType), t
    return tuple(t.get_shape())


def broadcast(*shapes: tuple[int, ...]) -> tuple[int, ...]:
    """Numpy broadcasting from the right (raises ``VerifyException`` on a mismatch)."""
    rank = max((len(s) for s in shapes), default=0)
    out = []
    for i in range(rank):
        dims = {s[i - rank + len(s)] for s in shapes if i - rank + len(s) >= 0} - {1}
        if len(dims) > 1:
            raise VerifyException(f"shapes {list(shapes)} do not broadcast")
        out.append(dims.pop() if dims else 1)
    return tuple(out)


def int_prop(op: IRDLOperation, name: str) -> int:
    """The integer property ``name`` of a kina op (axis, keepdims, start, ...)."""
    a = op.properties[name]
    assert isinstance(a, IntegerAttr)
    return a.value.data


def ints_prop(op: IRDLOperation, name: str) -> tuple[int, ...]:
    """The integer-array property ``name`` of a kina op (a transpose's perm, ...)."""
    a = op.properties[name]
    assert isinstance(a, DenseArrayBase)
    return tuple(int(v) for v in a.get_values())


class KinaOp(IRDLOperation):
    """Base of every tensor op: attributes print in the attr dict."""

    irdl_options = (ParsePropInAttrDict(),)

    def out_shape(self) -> tuple[int, ...]:
        return shape_of(self.results[0].type)

    def out_dtype(self) -> str:
        return dtype_name(self.results[0].type)


class UnaryOp(KinaOp):
    """Elementwise, shape- and dtype-preserving (integers too where ``INT_OK``)."""

    T: ClassVar = VarConstraint("T", AnyAttr())
    x = operand_def(T)
    result = result_def(T)
    traits = traits_def(Pure())
    assembly_format = "$x attr-dict `:` type($x)"
    INT_OK: ClassVar[bool] = False
    DEF: ClassVar[Elementwise]

    def verify_(self) -> None:
        if not self.INT_OK and dtype_name(self.x.type) not in FLOATS:
            raise VerifyException(f"{self.name} takes a float tensor, got {self.x.type}")


@irdl_op_definition
class CastOp(KinaOp):
    """Dtype conversion, same shape (floats to ints truncate toward zero and saturate)."""

    name = "kina.cast"
    x = operand_def(TensorType)
    result = result_def(TensorType)
    traits = traits_def(Pure())
    assembly_format = "$x attr-dict `:` type($x) `->` type($result)"

    def verify_(self) -> None:
        if shape_of(self.x.type) != self.out_shape():
            raise VerifyException("kina.cast changes only the dtype")


class BinaryOp(KinaOp):
    """Elementwise on two tensors of one dtype, numpy broadcasting from the right."""

    lhs = operand_def(TensorType)
    rhs = operand_def(TensorType)
    result = result_def(TensorType)
    traits = traits_def(Pure())
    assembly_format = "$lhs `,` $rhs attr-dict `:` type($lhs) `,` type($rhs) `->` type($result)"
    IS_COMPARE: ClassVar[bool] = False
    DEF: ClassVar[Elementwise]

    def verify_(self) -> None:
        dl, dr = dtype_name(self.lhs.type), dtype_name(self.rhs.type)
        if dl != dr:
            raise VerifyException(f"{self.name}: dtypes {dl} and {dr} differ (cast first)")
        want = "bool" if self.IS_COMPARE else dl
        if self.out_dtype() != want:
            raise VerifyException(f"{self.name} yields {want}, not {self.out_dtype()}")
        if broadcast(shape_of(self.lhs.type), shape_of(self.rhs.type)) != self.out_shape():
            raise VerifyException(f"{self.name}: result shape is not the broadcast shape")


class CompareOp(BinaryOp):
    """Elementwise comparison, result ``i1`` (ordered: NaN compares false)."""

    IS_COMPARE: ClassVar[bool] = True


@irdl_op_definition
class WhereOp(KinaOp):
    """``c ? a : b`` elementwise, broadcasting over the three; ``c`` is ``i1``."""

    name = "kina.where"
    cond = operand_def(TensorType)
    a = operand_def(TensorType)
    b = operand_def(TensorType)
    result = result_def(TensorType)
    traits = traits_def(Pure())
    assembly_format = (
        "$cond `,` $a `,` $b attr-dict `:` type($cond) `,` type($a) `,` type($b) `->` type($result)"
    )

    def verify_(self) -> None:
        if dtype_name(self.cond.type) != "bool":
            raise VerifyException("kina.where: the condition must be i1")
        if not dtype_name(self.a.type) == dtype_name(self.b.type) == self.out_dtype():
            raise VerifyException("kina.where: branches and result share one dtype")
        shapes = (shape_of(self.cond.type), shape_of(self.a.type), shape_of(self.b.type))
        if broadcast(*shapes) != self.out_shape():
            raise VerifyException("kina.where: result shape is not the broadcast shape")


def _op_class(d: Elementwise) -> type[KinaOp]:
    """The ``kina`` op class of one elementwise definition (``gelu`` -> ``GeluOp``)."""
    base = {"float": UnaryOp, "numeric": UnaryOp, "arith": BinaryOp, "compare": CompareOp}[d.kind]
    cls_name = "".join(w.capitalize() for w in d.name.split("_")) + "Op"
    body = {
        "name": f"kina.{d.name}",
        "DEF": d,
        "INT_OK": d.kind != "float",
        "__annotations__": {"DEF": "ClassVar[Elementwise]", "INT_OK": "ClassVar[bool]"},
        "__doc__": d.doc,
        "__module__": __name__,
        "__qualname__": cls_name,
    }
    return irdl_op_definition(type(cls_name, (base,), body))


ELEMENTWISE_OPS: dict[str, type[KinaOp]] = {n: _op_class(d) for n, d in ELEMENTWISE.items()}
"""One op class per elementwise primitive, keyed by its graph op name."""
globals().update({cls.__name__: cls for cls in ELEMENTWISE_OPS.values()})  # el.ExpOp, ...


def _binary_op(name: str) -> type[BinaryOp]:
    cls = ELEMENTWISE_OPS[name]
    assert issubclass(cls, BinaryOp), name
    return cls


AddOp = _binary_op("add")
"""``kina.add`` (the GPU GEMM epilogue matches it)."""
