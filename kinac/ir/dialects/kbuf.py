"""The ``kbuf`` dialect: buffer-level operations that are calls into a library.

Kernels are loop nests over flat ``memref`` buffers (``scf`` / ``arith`` / ``memref``); the one
thing they do not spell out as loops is a BLAS matrix product. ``kbuf.gemm`` is that call,
kept as an op (not an opaque ``func.call``) so the IR states the shapes, leading dimensions and
transposes it relies on, and so a GPU target can lower it to cuBLAS instead.
"""

from __future__ import annotations

from xdsl.dialects.builtin import (
    Float32Type,
    Float64Type,
    IndexType,
    IntegerAttr,
    MemRefType,
    StringAttr,
)
from xdsl.ir import Dialect
from xdsl.irdl import (
    IRDLOperation,
    ParsePropInAttrDict,
    irdl_op_definition,
    operand_def,
    prop_def,
    var_operand_def,
)
from xdsl.utils.exceptions import VerifyException


@irdl_op_definition
class GemmOp(IRDLOperation):
    """``C[c_off:] = op(A[a_off:]) @ op(B[b_off:])`` with row-major ``m x k`` by ``k x n``.

    ``op(X)`` is ``X`` or its transpose (``trans_a``/``trans_b``); ``lda``/``ldb``/``ldc`` are the
    leading dimensions in elements, as in CBLAS. ``C`` is overwritten (beta = 0). f32 lowers to
    ``sgemm``, f64 to ``dgemm``.
    """

    name = "kbuf.gemm"
    irdl_options = (ParsePropInAttrDict(),)
    a = operand_def(MemRefType)
    a_off = operand_def(IndexType)
    b = operand_def(MemRefType)
    b_off = operand_def(IndexType)
    c = operand_def(MemRefType)
    c_off = operand_def(IndexType)
    m = prop_def(IntegerAttr)
    n = prop_def(IntegerAttr)
    k = prop_def(IntegerAttr)
    lda = prop_def(IntegerAttr)
    ldb = prop_def(IntegerAttr)
    ldc = prop_def(IntegerAttr)
    trans_a = prop_def(IntegerAttr)
    trans_b = prop_def(IntegerAttr)

    assembly_format = (
        "$a `[` $a_off `]` `,` $b `[` $b_off `]` `,` $c `[` $c_off `]` attr-dict "
        "`:` type($a) `,` type($b) `,` type($c)"
    )

    def get(self, name: str) -> int:
        a = self.properties[name]
        assert isinstance(a, IntegerAttr)
        return a.value.data

    def verify_(self) -> None:
        types = [t.element_type for t in (self.a.type, self.b.type, self.c.type)]  # type: ignore[attr-defined]
        if not (
            all(isinstance(t, Float32Type) for t in types)
            or all(isinstance(t, Float64Type) for t in types)
        ):
            raise VerifyException("kbuf.gemm: A, B and C are all f32 or all f64")
        m, n, k = self.get("m"), self.get("n"), self.get("k")
        need_a = m if self.get("trans_a") else k
        need_b = k if self.get("trans_b") else n
        if self.get("lda") < max(1, need_a) or self.get("ldb") < max(1, need_b):
            raise VerifyException("kbuf.gemm: leading dimension too small")
        if self.get("ldc") < max(1, n):
            raise VerifyException("kbuf.gemm: ldc < n")


@irdl_op_definition
class LaunchOp(IRDLOperation):
    """Run kernel ``callee`` over ``[0, extent)`` of its outermost loop, in ``tasks`` chunks.

    The kernel function takes its buffers then the ``lo, hi`` bounds of that loop; chunks are
    independent (each writes its own rows of the output), so they may run in any order and
    concurrently: on the host they are tasks of the runtime's thread pool, and a GPU target
    would map them to blocks of a grid.
    """

    name = "kbuf.launch"
    irdl_options = (ParsePropInAttrDict(),)
    args = var_operand_def(MemRefType)
    callee = prop_def(StringAttr)
    extent = prop_def(IntegerAttr)
    tasks = prop_def(IntegerAttr)

    assembly_format = "$callee `(` $args `)` attr-dict `:` type($args)"

    def verify_(self) -> None:
        ext, tasks = self.extent.value.data, self.tasks.value.data
        if not 1 <= tasks <= ext:
            raise VerifyException(f"kbuf.launch: {tasks} tasks for an extent of {ext}")


KBuf = Dialect("kbuf", [GemmOp, LaunchOp], [])
