"""Pass ``gpu-kernels-to-nvvm``: each ``kina.kernel`` becomes GPU code or a library call.

Buffers are planned as on the host (params, outputs, and a liveness-packed scratch arena,
here with 256-byte aligned offsets for cuBLAS). A ``blas`` kernel becomes a
:class:`~kinac.artifacts.gpu.GpuGemm` (cuBLAS, or cuBLASLt when it has an epilogue). A
generated kernel is cut out in canonical form (:func:`split_kernels`,
:mod:`kinac.ir.gpu.kernel_split`) and becomes one LLVM function per launch
(:mod:`kinac.ir.gpu.kernels`), named ``k_<digest>`` after its content; identical kernels are
lowered once. The pipeline lowers each distinct kernel by its own query and binds the launches
to each step's buffers with :func:`link_steps`; :func:`lower_kernels` does it all in-process.
The pass records each decision on its ``kina.kernel`` as a ``gpu`` attribute
(``cublas pointers batch=64``, ``kernel k_<digest> grid=512 block=256 vec=4 T=32 C=8``), so
the IR printed after it shows what runs.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Mapping
from dataclasses import dataclass, replace

from xdsl.context import Context
from xdsl.dialects import func
from xdsl.dialects.builtin import ModuleOp, StringAttr
from xdsl.ir import SSAValue
from xdsl.passes import ModulePass

from kinac.artifacts.gpu import GpuKernel, GpuKernelCode, GpuStep
from kinac.dtypes import ITEMSIZE
from kinac.errors import KinaCompileError
from kinac.ice import in_kernel
from kinac.ir.dialects import kina_struct as st
from kinac.ir.dialects.kina import dtype_name, shape_of
from kinac.ir.gpu.gemm import plan_gemm
from kinac.ir.gpu.kernel_split import (
    canonical_gpu_kernel,
    kernel_module,
    lower_gpu_kernel,
    structure,
)
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
    kernels: tuple[GpuKernel, ...]


@dataclass
class PendingStep:
    """A step of the entry; a generated kernel's launches wait for its lowering."""

    op: st.KernelOp
    step: GpuStep
    kernel: GpuKernel | None  # None: a library call (``step.gemm``)


@dataclass
class SplitEntry:
    """An entry's steps, buffer plan and canonical kernels, before any kernel is lowered."""

    steps: list[PendingStep]
    arena_bytes: int

    @property
    def kernels(self) -> tuple[GpuKernel, ...]:
        """The distinct generated kernels, in order of first use."""
        return tuple(dict.fromkeys(p.kernel for p in self.steps if p.kernel is not None))


def nbytes(v: SSAValue) -> int:
    return math.prod(shape_of(v.type)) * ITEMSIZE[dtype_name(v.type)]


def split_kernels(fn: func.FuncOp) -> SplitEntry:
    """Plan buffers, plan every library call and cut every generated kernel of the fused
    entry ``fn`` out in canonical form (:mod:`kinac.ir.gpu.kernel_split`)."""
    plan = plan_buffers(fn)
    names: dict[SSAValue, str] = {}
    for v, (where, n) in plan.where.items():
        names[v] = f"{where}{n}" if where != "temp" else f"arena+{n}"
    pending: list[PendingStep] = []
    printed: dict[Hashable, GpuKernel] = {}  # repeats (layers) are printed once
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
            step = GpuStep(k.sym.data, kind, impl, dt, shape, reads, writes, (), gemm, moved)
            pending.append(PendingStep(k, step, None))
            continue
        key = structure(k, i)
        kernel = printed.get(key)
        if kernel is None:
            kernel = printed[key] = canonical_gpu_kernel(k, i)
        aux: tuple[int, ...] = ()
        if kind == "gather":
            g = next(o for o in k.body.block.ops if isinstance(o, st.GatherOp))
            aux = shape_of(g.idx.type)
        step = GpuStep(k.sym.data, kind, "kernel", dt, shape, reads, writes, (), None, moved, aux)
        pending.append(PendingStep(k, step, kernel))
    return SplitEntry(pending, plan.arena_bytes)


def link_steps(split: SplitEntry, codes: Mapping[str, GpuKernelCode]) -> tuple[GpuStep, ...]:
    """Each step with its kernel's launches bound to the step's buffers."""
    out: list[GpuStep] = []
    for p in split.steps:
        if p.kernel is None:
            out.append(p.step)
            continue
        code, s = codes[p.kernel.symbol], p.step
        for f in code.launches:
            if f.grid > MAX_GRID:
                raise KinaCompileError(
                    f"kernel {s.sym} of this entry needs a GPU launch of {f.grid} blocks, past "
                    f"CUDA's {MAX_GRID}: its tensor {s.dtype}{list(s.shape)} is too large for "
                    "the GPU"
                )
        args = (s.writes, *s.reads, *(("status",) if code.has_status else ()))
        out.append(replace(s, launches=tuple(replace(f, args=args) for f in code.launches)))
    return tuple(out)


def describe(step: GpuStep) -> str:
    """What the GPU runs for ``step``, as the pass prints it on its ``kina.kernel``."""
    if step.gemm is not None:
        epi = f" epilogue={step.gemm.epilogue}" if step.gemm.epilogue else ""
        return f"{step.impl} {step.gemm.mode} batch={step.gemm.batch}{epi}"
    desc = "; ".join(
        f"{f.function} grid={f.grid} block={f.block} vec={f.vec} {f.note}".rstrip()
        for f in step.launches
    )
    return f"kernel {desc}"


def lower_kernels(fn: func.FuncOp, flavour: str = "nvptx") -> NvvmModule:
    """Plan buffers and lower every kernel of the fused entry ``fn``, in this process (the
    pipeline lowers each distinct kernel by its own query instead; ``kinac.pipeline_gpu``)."""
    split = split_kernels(fn)
    codes: dict[str, GpuKernelCode] = {}
    for p in split.steps:
        if p.kernel is not None and p.kernel.symbol not in codes:
            with in_kernel(p.step.sym):
                codes[p.kernel.symbol] = lower_gpu_kernel(p.kernel, flavour)
    steps = link_steps(split, codes)
    for p, s in zip(split.steps, steps, strict=True):
        p.op.attributes["gpu"] = StringAttr(describe(s))
    functions = tuple(f.function for c in codes.values() for f in c.launches)
    module = kernel_module(list(codes.values()), flavour)
    return NvvmModule(module, steps, split.arena_bytes, functions, split.kernels)


class GpuKernelsToNvvm(ModulePass):
    """Annotate every kernel with what the GPU runs for it (see the module docstring)."""

    name = "gpu-kernels-to-nvvm"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        for f in op.ops:
            if isinstance(f, func.FuncOp) and f.body.blocks:
                lower_kernels(f)
