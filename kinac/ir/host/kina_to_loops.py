"""Pass ``kina-to-loops``: kernels become functions of loops over flat buffers.

Bufferization: every materialised value gets a buffer. Params and outputs are the caller's
arrays; every other value lives in one *arena* at a byte offset chosen by a liveness-based
first-fit, so buffers of values that are never live together share memory. The entry becomes
``func.func @NAME(params..., outputs..., arena: memref<Nxi8>, status: memref<8xi64>)`` that
calls one private ``func.func`` per kernel (its buffers marked ``llvm.noalias``), in order.
A large kernel whose outermost loop has independent iterations (map, softmax, row reduction)
takes that loop's bounds as two extra arguments and is started with ``kbuf.launch`` in chunks
that the runtime's thread pool runs concurrently (a GPU target would launch a grid instead).
Buffers are flat 1-D memrefs of the storage type (see :mod:`kinac.ir.host.scalar`): a kernel's
index arithmetic is explicit, which is what a GPU target maps to thread indices.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import arith, func, memref
from xdsl.dialects.builtin import (
    ArrayAttr,
    DictionaryAttr,
    IntegerAttr,
    MemRefType,
    ModuleOp,
    StringAttr,
    UnitAttr,
    i8,
    i64,
)
from xdsl.ir import Attribute, Block, Operation, Region, SSAValue
from xdsl.passes import ModulePass

from kinac.dtypes import ITEMSIZE
from kinac.ice import in_kernel
from kinac.ir.dialects import kina_struct as st
from kinac.ir.dialects.kbuf import LaunchOp
from kinac.ir.dialects.kina import dtype_name, shape_of
from kinac.ir.host.kernel_loops import KernelLowering, parallel_extent
from kinac.ir.host.loopgen import INDEX, Emitter
from kinac.ir.host.scalar import storage_type
from kinac.ir.host.scalar_algebra import libm_declarations
from kinac.ir.host.stitch import ALIGN, STATUS_SLOTS, first_fit

PAR_MIN_ELEMENTS = 1 << 15  # smaller kernels run whole: a task costs about a microsecond
PAR_TASKS = 16


def nbytes(t: Attribute) -> int:
    return max(1, math.prod(shape_of(t))) * ITEMSIZE[dtype_name(t)]


def buffer_type(t: Attribute) -> MemRefType:
    """The flat memref that stores a tensor type."""
    return MemRefType(storage_type(dtype_name(t)), [max(1, math.prod(shape_of(t)))])


@dataclass
class BufferPlan:
    """Where each materialised value lives: ``("param"|"out"|"temp", index or byte offset)``."""

    where: dict[SSAValue, tuple[str, int]]
    arena_bytes: int


def plan_buffers(fn: func.FuncOp) -> BufferPlan:
    """Assign params, outputs and arena offsets (first fit over live ranges)."""
    blk = fn.body.block
    ret = blk.last_op
    assert isinstance(ret, func.ReturnOp)
    kernels = [o for o in blk.ops if isinstance(o, st.KernelOp)]
    where: dict[SSAValue, tuple[str, int]] = {a: ("param", i) for i, a in enumerate(blk.args)}
    for j, v in enumerate(ret.operands):
        where[v] = ("out", j)
    return pack_arena(kernels, where, lambda v: nbytes(v.type), ALIGN)


def pack_arena(
    kernels: list[st.KernelOp],
    where: dict[SSAValue, tuple[str, int]],
    size_of: Callable[[SSAValue], int],
    align: int,
) -> BufferPlan:
    """Give each kernel result not yet in ``where`` an ``align``-ed arena offset: first fit over
    live ranges (values never live at the same time share memory; a kernel's output never
    overlaps its inputs). Shared with the GPU's :mod:`kinac.ir.gpu.kernels_to_nvvm`."""
    results = [k.results[0] for k in kernels]
    arena = first_fit(results, [k.operands for k in kernels], where, size_of, align)
    return BufferPlan(where, max(arena, align))


_NOALIAS = DictionaryAttr({"llvm.noalias": UnitAttr()})


def launch_shape(k: st.KernelOp) -> tuple[int, int] | None:
    """``(extent, tasks)`` when ``k`` is big enough to split over the thread pool."""
    ext = parallel_extent(k)
    work = max(math.prod(shape_of(v.type)) for v in (k.result, *k.inputs))
    if ext is None or work < PAR_MIN_ELEMENTS:
        return None
    return ext, min(ext, PAR_TASKS)


def kernel_signature(k: st.KernelOp, parallel: bool) -> tuple[list[Attribute], int]:
    """The argument types of ``k``'s function and how many of them are buffers."""
    types: list[Attribute] = [buffer_type(k.result.type)]
    types += [buffer_type(u.type) for u in k.inputs]
    if k.kind.data == "gather":
        types.append(MemRefType(i64, [STATUS_SLOTS]))
    nbufs = len(types)
    if parallel:
        types += [INDEX, INDEX]  # lo, hi of the outermost loop
    return types, nbufs


def kernel_declaration(k: st.KernelOp, parallel: bool) -> func.FuncOp:
    """A body-less declaration of ``k``'s function: its code lives in its own object
    (:mod:`kinac.ir.host.kernels`), compiled once per canonical kernel."""
    types, _ = kernel_signature(k, parallel)
    return func.FuncOp.external(k.sym.data, types, [])


def kernel_func(
    k: st.KernelOp, index: int, parallel: bool, visibility: str | None = "private"
) -> func.FuncOp:
    """``k`` as a function of loops over flat buffers (``index``: its step, for errors)."""
    has_status = k.kind.data == "gather"
    types, nbufs = kernel_signature(k, parallel)
    block = Block(arg_types=types)
    ret = func.ReturnOp()
    block.add_op(ret)
    em = Emitter(block, ret)
    if parallel:
        em.split = (block.args[-2], block.args[-1])
    status = block.args[nbufs - 1] if has_status else None
    ins = block.args[1 : 1 + len(k.inputs)]
    KernelLowering(k, em, ins, block.args[0], status, index).lower()
    assert em.split is None, "the parallel loop was opened"
    attrs = ArrayAttr([_NOALIAS] * nbufs + [DictionaryAttr({})] * (len(types) - nbufs))
    return func.FuncOp(k.sym.data, (types, []), Region(block), visibility, arg_attrs=attrs)


def lower_entry(fn: func.FuncOp, declare_only: bool = False) -> tuple[list[Operation], BufferPlan]:
    """The entry function and its kernel functions, for one fused ``func.func``; with
    ``declare_only``, declarations of them (one per symbol: identical kernels share one)."""
    plan = plan_buffers(fn)
    blk = fn.body.block
    ret = blk.last_op
    assert isinstance(ret, func.ReturnOp)
    params = [buffer_type(a.type) for a in blk.args]
    outs = [buffer_type(v.type) for v in ret.operands]
    arena_t = MemRefType(i8, [plan.arena_bytes])
    status_t = MemRefType(i64, [STATUS_SLOTS])
    entry = Block(arg_types=[*params, *outs, arena_t, status_t])
    for a, old in zip(entry.args, blk.args, strict=False):
        a.name_hint = old.name_hint
    arena, status = entry.args[-2], entry.args[-1]
    ops: list[Operation] = []
    bufs: dict[SSAValue, SSAValue] = {}

    def buf(v: SSAValue) -> SSAValue:
        if v in bufs:
            return bufs[v]
        kind, n = plan.where[v]
        if kind == "param":
            r: SSAValue = entry.args[n]
        elif kind == "out":
            r = entry.args[len(params) + n]
        else:
            c = arith.ConstantOp(IntegerAttr(n, INDEX))
            view = memref.ViewOp(arena, c, [], buffer_type(v.type))
            ops.extend([c, view])
            r = view.result
        bufs[v] = r
        return r

    funcs: list[Operation] = []
    declared: set[str] = set()
    for i, k in enumerate(o for o in blk.ops if isinstance(o, st.KernelOp)):
        args = [buf(k.result), *(buf(u) for u in k.inputs)]
        if k.kind.data == "gather":
            args.append(status)
        launch = launch_shape(k)
        call: Operation
        if launch is None:
            call = func.CallOp(k.sym.data, args, [])
        else:
            call = LaunchOp.create(
                operands=args,
                properties={
                    "callee": StringAttr(k.sym.data),
                    "extent": IntegerAttr(launch[0], i64),
                    "tasks": IntegerAttr(launch[1], i64),
                },
            )
        call.attributes["kind"] = k.kind
        call.attributes["impl"] = k.impl
        ops.append(call)
        if declare_only:
            if k.sym.data not in declared:
                declared.add(k.sym.data)
                funcs.append(kernel_declaration(k, launch is not None))
            continue
        with in_kernel(k.sym.data):
            funcs.append(kernel_func(k, i, launch is not None))
    ops.append(func.ReturnOp())
    entry.add_ops(ops)
    ftype: tuple[list[Attribute], list[Attribute]] = ([a.type for a in entry.args], [])
    efn = func.FuncOp(fn.sym_name.data, ftype, Region(entry))
    efn.attributes["kinac.entry"] = UnitAttr()
    efn.attributes["kinac.arena_bytes"] = IntegerAttr(plan.arena_bytes, i64)
    return [efn, *funcs], plan


class KinaToLoops(ModulePass):
    """Replace each fused entry by its buffer-level entry and kernel functions (and declare
    the libm functions they call)."""

    name = "kina-to-loops"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        new: list[Operation] = []
        for f in list(op.ops):
            assert isinstance(f, func.FuncOp)
            ops, _ = lower_entry(f)
            new.extend(ops)
            f.detach()
            f.erase(safe_erase=False)
        op.body.block.add_ops(new)
        libm_declarations(op)
