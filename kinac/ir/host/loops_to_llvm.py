"""Pass ``loops-to-llvm``: ``func``/``cf``/``arith``/``math``/``memref``/``kbuf`` to ``llvm``.

Structured loops first go through xDSL's own ``convert-scf-to-cf``. xDSL 0.75 has no
arith/func/memref-to-llvm conversions (its ``convert-memref-to-ptr`` + ``convert-ptr-to-llvm``
route computes addresses with ``ptrtoint``/``inttoptr``, which blinds LLVM's alias analysis and
vectoriser), so this pass rebuilds each function in the ``llvm`` dialect in one walk: index is
``i64`` (with ``nsw nuw`` arithmetic: indices are never negative), a flat memref is a pointer
and ``memref.load`` an ``inbounds`` GEP plus a load, float ops keep their fast-math flags, and
ops without an ``llvm`` dialect op become intrinsic calls (``llvm.maximum``, ``llvm.smax``,
``llvm.fptosi.sat``). ``kbuf.gemm`` becomes a call of ``kinac_sgemm``/``kinac_dgemm`` (CBLAS
``?gemm`` with 64-bit integers, bound by the runtime to numpy's OpenBLAS), f64 ``tanh``/``erf``
calls of libm; the module's libm declarations (``kinac.libm``, made by the pass that made the
calls) join those externals, each declared once, after the functions, in name order. Each
entry gets an exported wrapper ``kinac_call_NAME(ptr argv)`` so the runtime calls every entry
through one C signature.
"""

from __future__ import annotations

from typing import Any

from xdsl.context import Context
from xdsl.dialects import arith, cf, func, llvm, math, memref
from xdsl.dialects.builtin import (
    FloatAttr,
    IndexType,
    IntegerAttr,
    IntegerType,
    MemRefType,
    ModuleOp,
    f32,
    f64,
    i1,
    i32,
    i64,
)
from xdsl.ir import Attribute, Block, Operation, Region, SSAValue
from xdsl.passes import ModulePass
from xdsl.transforms.convert_scf_to_cf import ConvertScfToCf

from kinac.ir.dialects.kbuf import GemmOp, LaunchOp
from kinac.ir.host.scalar_algebra import LIBM
from kinac.ir.host.stitch import task_name, wrapper_name

PTR = llvm.LLVMPointerType()
_NOWRAP = llvm.OverflowAttr([llvm.OverflowFlag.NO_SIGNED_WRAP, llvm.OverflowFlag.NO_UNSIGNED_WRAP])
_INT_BIN: dict[type, type] = {
    arith.AddiOp: llvm.AddOp, arith.SubiOp: llvm.SubOp, arith.MuliOp: llvm.MulOp,
    arith.DivUIOp: llvm.UDivOp, arith.DivSIOp: llvm.SDivOp, arith.RemUIOp: llvm.URemOp,
    arith.RemSIOp: llvm.SRemOp, arith.AndIOp: llvm.AndOp, arith.OrIOp: llvm.OrOp,
    arith.XOrIOp: llvm.XOrOp, arith.ShLIOp: llvm.ShlOp, arith.ShRUIOp: llvm.LShrOp,
    arith.ShRSIOp: llvm.AShrOp,
}  # fmt: skip
_FLOAT_BIN: dict[type, type] = {
    arith.AddfOp: llvm.FAddOp, arith.SubfOp: llvm.FSubOp, arith.MulfOp: llvm.FMulOp,
    arith.DivfOp: llvm.FDivOp,
}  # fmt: skip
_INTRINSIC: dict[type, str] = {
    arith.MaximumfOp: "llvm.maximum", arith.MinimumfOp: "llvm.minimum",
    arith.MaxSIOp: "llvm.smax", arith.MinSIOp: "llvm.smin", math.FloorOp: "llvm.floor",
    math.CopySignOp: "llvm.copysign", math.FmaOp: "llvm.fma", math.SqrtOp: "llvm.sqrt",
    math.AbsFOp: "llvm.fabs", math.ExpOp: "llvm.exp", math.LogOp: "llvm.log",
    math.PowFOp: "llvm.pow",
}  # fmt: skip
_LIBM = {math.TanhOp: "tanh", math.ErfOp: "erf"}
_CASTS: dict[type, type] = {
    arith.SIToFPOp: llvm.SIToFPOp, arith.ExtFOp: llvm.FPExtOp, arith.TruncFOp: llvm.FPTruncOp,
    arith.ExtUIOp: llvm.ZExtOp, arith.ExtSIOp: llvm.SExtOp, arith.TruncIOp: llvm.TruncOp,
    arith.BitcastOp: llvm.BitcastOp,
}  # fmt: skip
_CMPI = ("eq", "ne", "slt", "sle", "sgt", "sge", "ult", "ule", "ugt", "uge")
_CBLAS_ROW_MAJOR, _CBLAS_NO_TRANS, _CBLAS_TRANS = 101, 111, 112


def llvm_type(t: Attribute) -> Attribute:
    if isinstance(t, IndexType):
        return i64
    if isinstance(t, MemRefType):
        return PTR
    return t


def _suffix(t: Attribute) -> str:
    if isinstance(t, IntegerType):
        return f"i{t.width.data}"
    return "f32" if t == f32 else "f64" if t == f64 else "f16"


def _fastmath(op: Operation) -> llvm.FastMathAttr:
    fm = op.properties.get("fastmath")
    flags: frozenset[llvm.FastMathFlag] = getattr(fm, "data", frozenset())
    return llvm.FastMathAttr(list(flags))


def _gemm_decl(t: Attribute) -> tuple[str, llvm.LLVMFunctionType]:
    name = "kinac_sgemm" if t == f32 else "kinac_dgemm"
    args = [i32, i32, i32, i64, i64, i64, t, PTR, i64, PTR, i64, t, PTR, i64]
    return name, llvm.LLVMFunctionType(args, llvm.LLVMVoidType())


class _FuncConverter:
    """Rebuilds one ``func.func`` (after scf-to-cf) as an ``llvm.func``."""

    def __init__(self, externals: dict[str, llvm.LLVMFunctionType]) -> None:
        self.externals = externals
        self.launches: list[tuple[str, int, int, int]] = []
        self.vmap: dict[SSAValue, SSAValue] = {}
        self.bmap: dict[Block, Block] = {}
        self.out: Block = Block()

    def emit(self, op: Operation) -> SSAValue:
        self.out.add_op(op)
        return op.results[0] if op.results else None  # type: ignore[return-value]

    def v(self, x: SSAValue) -> SSAValue:
        return self.vmap[x]

    def const(self, value: int | float, t: Attribute) -> SSAValue:
        if isinstance(t, IntegerType):
            return self.emit(llvm.ConstantOp(IntegerAttr(int(value), t), t))
        attr = FloatAttr(float(value), t)  # type: ignore[call-overload]
        return self.emit(llvm.ConstantOp(attr, t))

    def gep(self, base: SSAValue, off: SSAValue, elem: Attribute) -> SSAValue:
        return self.emit(
            llvm.GEPOp(base, [llvm.GEP_USE_SSA_VAL], elem, ssa_indices=[off], inbounds=True)
        )

    def convert(self, fn: func.FuncOp) -> llvm.FuncOp:
        inputs = [llvm_type(t) for t in fn.function_type.inputs]
        outs = [llvm_type(t) for t in fn.function_type.outputs]
        ftype = llvm.LLVMFunctionType(inputs, outs[0] if outs else llvm.LLVMVoidType())
        blocks = list(fn.body.blocks)
        for b in blocks:
            nb = Block(arg_types=[llvm_type(a.type) for a in b.args])
            self.bmap[b] = nb
            for a, na in zip(b.args, nb.args, strict=True):
                self.vmap[a] = na
                na.name_hint = a.name_hint
        for b in blocks:
            self.out = self.bmap[b]
            for op in b.ops:
                self.op(op)
        # a declaration (a kernel compiled in its own object) links externally
        linkage = "internal" if fn.sym_visibility is not None and blocks else "external"
        props: dict[str, Attribute | None] = {}
        if fn.arg_attrs is not None:
            props["arg_attrs"] = fn.arg_attrs
        return llvm.FuncOp(
            fn.sym_name.data,
            ftype,
            linkage=llvm.LinkageAttr(linkage),
            body=Region([self.bmap[b] for b in blocks]),
            other_props=props,
        )

    def op(self, op: Operation) -> None:
        res: SSAValue | None
        t = llvm_type(op.results[0].type) if op.results else i1  # i1: unused for no result
        cls = type(op)
        if isinstance(op, arith.ConstantOp):
            val = op.value
            assert isinstance(val, IntegerAttr | FloatAttr)
            res = self.const(val.value.data, t)  # type: ignore[arg-type]
        elif cls in _INT_BIN:
            a, b = self.v(op.operands[0]), self.v(op.operands[1])
            kw: dict[str, Any] = {}
            if isinstance(op.results[0].type, IndexType) and cls in (arith.AddiOp, arith.MuliOp):
                kw["overflow"] = _NOWRAP
            res = self.emit(_INT_BIN[cls](a, b, **kw))
        elif cls in _FLOAT_BIN:
            res = self.emit(
                _FLOAT_BIN[cls](self.v(op.operands[0]), self.v(op.operands[1]), _fastmath(op))
            )
        elif isinstance(op, arith.NegfOp):
            res = self.emit(llvm.FNegOp(self.v(op.operand)))
        elif cls in _INTRINSIC:
            name = f"{_INTRINSIC[cls]}.{_suffix(t)}"
            res = self.intrinsic(name, [self.v(x) for x in op.operands], t)
        elif isinstance(op, math.AbsIOp):
            args = [self.v(op.operands[0]), self.const(0, i1)]
            res = self.intrinsic(f"llvm.abs.{_suffix(t)}", args, t)
        elif cls in _LIBM:
            assert t == f64, "f32 transcendentals are expanded by expand-math"
            self.externals[_LIBM[cls]] = llvm.LLVMFunctionType([f64], f64)
            res = self.emit(llvm.CallOp(_LIBM[cls], self.v(op.operands[0]), return_type=f64))
        elif isinstance(op, arith.FPToSIOp):
            name = f"llvm.fptosi.sat.{_suffix(t)}.{_suffix(op.operands[0].type)}"
            res = self.intrinsic(name, [self.v(op.operands[0])], t)
        elif cls in _CASTS:
            res = self.emit(_CASTS[cls](self.v(op.operands[0]), t))
        elif isinstance(op, arith.IndexCastOp):
            res = self.index_cast(op)
        elif isinstance(op, arith.CmpiOp):
            pred = IntegerAttr(
                _CMPI.index(arith.CMPI_COMPARISON_OPERATIONS[op.predicate.value.data]), i64
            )
            res = self.emit(llvm.ICmpOp(self.v(op.lhs), self.v(op.rhs), pred))
        elif isinstance(op, arith.CmpfOp):
            pred_s = arith.CMPF_COMPARISON_OPERATIONS[op.predicate.value.data]
            res = self.emit(llvm.FCmpOp(self.v(op.lhs), self.v(op.rhs), pred_s))
        elif isinstance(op, arith.SelectOp):
            res = self.emit(llvm.SelectOp(*(self.v(x) for x in op.operands)))
        elif isinstance(op, memref.LoadOp):
            ptr = self.gep(self.v(op.memref), self.v(op.indices[0]), op.res.type)
            res = self.emit(llvm.LoadOp(ptr, op.res.type))
        elif isinstance(op, memref.StoreOp):
            ptr = self.gep(self.v(op.memref), self.v(op.indices[0]), op.value.type)
            res = self.emit(llvm.StoreOp(self.v(op.value), ptr))
        elif isinstance(op, memref.ViewOp):
            res = self.gep(self.v(op.source), self.v(op.byte_shift), IntegerType(8))
        elif isinstance(op, func.CallOp):
            rt = llvm_type(op.results[0].type) if op.results else None
            args = [self.v(x) for x in op.operands]
            if LIBM in op.attributes:  # a C math library function: declared in the module
                assert op.callee.string_value() in self.externals, "libm call not declared"
            res = self.emit(llvm.CallOp(op.callee.string_value(), *args, return_type=rt))
        elif isinstance(op, func.ReturnOp):
            res = self.emit(llvm.ReturnOp(self.v(op.operands[0]) if op.operands else None))
        elif isinstance(op, cf.BranchOp):
            res = self.emit(llvm.BrOp(self.bmap[op.successor], *(self.v(x) for x in op.arguments)))
        elif isinstance(op, cf.ConditionalBranchOp):
            res = self.emit(
                llvm.CondBrOp(
                    self.v(op.cond),
                    self.bmap[op.then_block],
                    [self.v(x) for x in op.then_arguments],
                    self.bmap[op.else_block],
                    [self.v(x) for x in op.else_arguments],
                )
            )
        elif isinstance(op, GemmOp):
            self.gemm(op)
            res = None
        elif isinstance(op, LaunchOp):
            self.launch(op)
            res = None
        else:
            raise NotImplementedError(f"loops-to-llvm: no lowering for {op.name}")
        if op.results:
            assert res is not None
            self.vmap[op.results[0]] = res

    def launch(self, op: LaunchOp) -> None:
        """``kinac_parallel(task, ctx, tasks)`` with the buffers packed in ``ctx``."""
        ctx = self.emit(llvm.AllocaOp(self.const(len(op.args), i64), PTR, alignment=8))
        for j, a in enumerate(op.args):
            slot = self.emit(llvm.GEPOp(ctx, [j], PTR, inbounds=True))
            self.emit(llvm.StoreOp(self.v(a), slot))
        name = op.callee.data
        task = self.emit(llvm.AddressOfOp(task_name(name), PTR))
        self.externals["kinac_parallel"] = llvm.LLVMFunctionType(
            [PTR, PTR, i64], llvm.LLVMVoidType()
        )
        self.emit(llvm.CallOp("kinac_parallel", task, ctx, self.const(op.tasks.value.data, i64)))
        self.launches.append((name, len(op.args), op.extent.value.data, op.tasks.value.data))

    def intrinsic(self, name: str, args: list[SSAValue], t: Attribute | None) -> SSAValue:
        return self.emit(llvm.CallIntrinsicOp(name, args, [t] if t is not None else []))

    def index_cast(self, op: arith.IndexCastOp) -> SSAValue:
        x = self.v(op.input)
        src, dst = llvm_type(op.input.type), llvm_type(op.result.type)
        assert isinstance(src, IntegerType) and isinstance(dst, IntegerType)
        if src.width.data == dst.width.data:
            return x
        if src.width.data > dst.width.data:
            return self.emit(llvm.TruncOp(x, dst))
        return self.emit(llvm.SExtOp(x, dst))

    def gemm(self, op: GemmOp) -> None:
        at = op.a.type
        assert isinstance(at, MemRefType)
        t = at.element_type
        name, ftype = _gemm_decl(t)
        self.externals[name] = ftype
        a = self.gep(self.v(op.a), self.v(op.a_off), t)
        b = self.gep(self.v(op.b), self.v(op.b_off), t)
        c = self.gep(self.v(op.c), self.v(op.c_off), t)
        ci = self.const
        tr = [_CBLAS_TRANS if op.get(x) else _CBLAS_NO_TRANS for x in ("trans_a", "trans_b")]
        args = [ci(_CBLAS_ROW_MAJOR, i32), ci(tr[0], i32), ci(tr[1], i32)]
        args += [ci(op.get(x), i64) for x in ("m", "n", "k")]
        args += [ci(1.0, t), a, ci(op.get("lda"), i64), b, ci(op.get("ldb"), i64)]
        args += [ci(0.0, t), c, ci(op.get("ldc"), i64)]
        self.emit(llvm.CallOp(name, *args))


def _task(kernel: str, nbufs: int, extent: int, tasks: int) -> llvm.FuncOp:
    """``void kernel__task(ptr ctx, i64 i)``: chunk ``i`` of a launched kernel's outer loop."""
    block = Block(arg_types=[PTR, i64])
    conv = _FuncConverter({})
    conv.out = block
    ctx, i = block.args
    bufs = []
    for j in range(nbufs):
        slot = conv.emit(llvm.GEPOp(ctx, [j], PTR, inbounds=True))
        bufs.append(conv.emit(llvm.LoadOp(slot, PTR)))
    chunk = conv.const(-(-extent // tasks), i64)
    lo = conv.emit(llvm.MulOp(i, chunk))
    hi = conv.emit(llvm.AddOp(lo, chunk))
    ext = conv.const(extent, i64)
    past = conv.emit(llvm.ICmpOp(hi, ext, IntegerAttr(_CMPI.index("ugt"), i64)))
    hi = conv.emit(llvm.SelectOp(past, ext, hi))
    conv.emit(llvm.CallOp(kernel, *bufs, lo, hi))
    conv.emit(llvm.ReturnOp())
    ftype = llvm.LLVMFunctionType([PTR, i64], llvm.LLVMVoidType())
    return llvm.FuncOp(
        task_name(kernel), ftype, linkage=llvm.LinkageAttr("internal"), body=Region(block)
    )


def _wrapper(fn: llvm.FuncOp) -> llvm.FuncOp:
    block = Block(arg_types=[PTR])
    conv = _FuncConverter({})
    conv.out = block
    args = []
    for i, t in enumerate(fn.function_type.inputs):
        slot = conv.gep(block.args[0], conv.const(i, i64), PTR)
        args.append(conv.emit(llvm.LoadOp(slot, t)))
    conv.emit(llvm.CallOp(fn.sym_name.data, *args))
    conv.emit(llvm.ReturnOp())
    ftype = llvm.LLVMFunctionType([PTR], llvm.LLVMVoidType())
    return llvm.FuncOp(
        wrapper_name(fn.sym_name.data),
        ftype,
        linkage=llvm.LinkageAttr("external"),
        body=Region(block),
    )


class LoopsToLLVM(ModulePass):
    """Lower the buffer-level module to the ``llvm`` dialect (see the module docstring)."""

    name = "loops-to-llvm"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        ConvertScfToCf().apply(ctx, op)
        externals: dict[str, llvm.LLVMFunctionType] = {}
        for f in list(op.ops):  # libm declarations join the externals declared at the end
            if isinstance(f, func.FuncOp) and LIBM in f.attributes:
                ft = f.function_type
                ret = llvm_type(ft.outputs.data[0]) if ft.outputs.data else llvm.LLVMVoidType()
                externals[f.sym_name.data] = llvm.LLVMFunctionType(
                    [llvm_type(t) for t in ft.inputs.data], ret
                )
                f.detach()
                f.erase()
        new: list[Operation] = []
        for f in list(op.ops):
            assert isinstance(f, func.FuncOp)
            conv = _FuncConverter(externals)
            lf = conv.convert(f)
            new.append(lf)
            for launch in dict.fromkeys(conv.launches):  # identical kernels share one task
                new.append(_task(*launch))
            if "kinac.entry" in f.attributes:
                lf.properties["linkage"] = llvm.LinkageAttr("internal")
                new.append(_wrapper(lf))
            f.detach()
            f.erase(safe_erase=False)
        for name, ftype in sorted(externals.items()):
            new.append(llvm.FuncOp(name, ftype, linkage=llvm.LinkageAttr("external")))
        op.body.block.add_ops(new)
