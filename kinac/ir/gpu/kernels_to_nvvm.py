"""Pass ``gpu-kernels-to-nvvm``: each ``kina.kernel`` becomes GPU code or a library call.

Buffers are planned as on the host (params, outputs, and a liveness-packed scratch arena,
here with 256-byte aligned offsets for cuBLAS). A generated kernel becomes one LLVM function per
launch (:mod:`kinac.ir.gpu.kernels`) in one module for ``nvptx64-nvidia-cuda``; a ``blas``
kernel becomes a :class:`~kinac.artifacts.gpu.GpuGemm` (cuBLAS, or cuBLASLt when it has an
epilogue). The pass records each decision on its ``kina.kernel`` as a ``gpu`` attribute
(``cublas pointers batch=64``, ``kernel k3_row grid=512 block=256 vec=4 T=32 C=8``), so the
IR printed after it shows what runs.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import func
from xdsl.dialects.builtin import ModuleOp, StringAttr
from xdsl.ir import SSAValue
from xdsl.passes import ModulePass

from kinac.artifacts.gpu import GpuLaunch, GpuStep
from kinac.dtypes import ITEMSIZE
from kinac.errors import KinaCompileError
from kinac.ice import in_kernel
from kinac.ir.dialects import kina_struct as st
from kinac.ir.dialects.kina import dtype_name, shape_of
from kinac.ir.gpu.emit import module_text
from kinac.ir.gpu.gemm import plan_gemm
from kinac.ir.gpu.kernels import KernelGen
from kinac.ir.host.kina_to_loops import BufferPlan, pack_arena

ALIGN = 256  # arena offsets: cuBLAS(Lt) and 16-byte vector accesses want aligned operands
STATUS_SLOTS = 8

MAX_GRID = 2**31 - 1  # CUDA's gridDim.x


def plan_buffers(fn: func.FuncOp) -> BufferPlan:
    """Params, outputs (a returned param stays a param), and arena offsets for the rest,
    packed as on the host (:func:`~kinac.ir.host.kina_to_loops.pack_arena`) at ``ALIGN``."""
    blk = fn.body.block
    ret = blk.last_op
    assert isinstance(ret, func.ReturnOp)
    kernels = [o for o in blk.ops if isinstance(o, st.KernelOp)]
    where: dict[SSAValue, tuple[str, int]] = {a: ("param", i) for i, a in enumerate(blk.args)}
    for j, v in enumerate(ret.operands):
        where.setdefault(v, ("out", j))
    return pack_arena(kernels, where, lambda v: max(nbytes(v), 1), ALIGN)


@dataclass
class NvvmModule:
    """What the pass produces for one entry."""

    llvm_ir: str
    steps: tuple[GpuStep, ...]
    arena_bytes: int
    functions: tuple[str, ...]


def nbytes(v: SSAValue) -> int:
    return math.prod(shape_of(v.type)) * ITEMSIZE[dtype_name(v.type)]


def lower_kernels(fn: func.FuncOp, flavour: str = "nvptx") -> NvvmModule:
    """Plan buffers and lower every kernel of the fused entry ``fn``."""
    plan = plan_buffers(fn)
    names: dict[SSAValue, str] = {}
    for v, (where, n) in plan.where.items():
        names[v] = f"{where}{n}" if where != "temp" else f"arena+{n}"
    texts, builders, steps, functions = [], [], [], []
    kernels = [o for o in fn.body.block.ops if isinstance(o, st.KernelOp)]
    for i, k in enumerate(kernels):
        reads = tuple(names[u] for u in k.inputs)
        writes = names[k.result]
        moved = sum(nbytes(u) for u in dict.fromkeys(k.inputs)) + nbytes(k.result)
        kind, dt, shape = k.kind.data, dtype_name(k.result.type), shape_of(k.result.type)
        if k.impl.data == "blas":
            body: dict[SSAValue, str] = dict(zip(k.body.block.args, reads, strict=True))
            with in_kernel(k.sym.data):
                gemm = plan_gemm(k, body, writes)
            impl = "cublasLt" if gemm.epilogue else "cublas"
            epi = f" epilogue={gemm.epilogue}" if gemm.epilogue else ""
            k.attributes["gpu"] = StringAttr(f"{impl} {gemm.mode} batch={gemm.batch}{epi}")
            steps.append(GpuStep(k.sym.data, kind, impl, dt, shape, reads, writes, (), gemm, moved))
            continue
        with in_kernel(k.sym.data):
            gen = KernelGen(k, i, flavour)
            fns = gen.generate()
        for f in fns:
            if f.grid > MAX_GRID:
                raise KinaCompileError(
                    f"kernel {f.name} of this entry needs a GPU launch of {f.grid} blocks, past "
                    f"CUDA's {MAX_GRID}: its tensor {dt}{list(shape)} is too large for the GPU"
                )
        args = (writes, *reads, *(("status",) if gen.has_status else ()))
        launches = tuple(GpuLaunch(f.name, f.grid, f.block, args, f.vec, f.note) for f in fns)
        desc = "; ".join(
            f"{f.name} grid={f.grid} block={f.block} vec={f.vec} {f.note}".rstrip() for f in fns
        )
        k.attributes["gpu"] = StringAttr(f"kernel {desc}")
        aux: tuple[int, ...] = ()
        if kind == "gather":
            g = next(o for o in k.body.block.ops if isinstance(o, st.GatherOp))
            aux = shape_of(g.idx.type)
        steps.append(
            GpuStep(
                k.sym.data, kind, "kernel", dt, shape, reads, writes, launches, None, moved, aux
            )
        )
        for f in fns:
            texts.append(f.text)
            builders.append(f.builder)
            functions.append(f.name)
    return NvvmModule(
        module_text(texts, builders, flavour), tuple(steps), plan.arena_bytes, tuple(functions)
    )


class GpuKernelsToNvvm(ModulePass):
    """Annotate every kernel with what the GPU runs for it (see the module docstring)."""

    name = "gpu-kernels-to-nvvm"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        for f in op.ops:
            if isinstance(f, func.FuncOp) and f.body.blocks:
                lower_kernels(f)
