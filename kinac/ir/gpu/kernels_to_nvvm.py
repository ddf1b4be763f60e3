"""Pass ``gpu-kernels-to-nvvm``: each ``kina.kernel`` becomes GPU code or a library call.

Buffers are planned as on the host (params, outputs, and a liveness-packed scratch arena,
here with 256-byte aligned offsets for cuBLAS). A ``blas`` kernel becomes a
:class:`~kinac.artifacts.gpu.GpuGemm` (cuBLAS, or cuBLASLt when it has an epilogue). A
generated kernel is cut out in canonical form (:func:`split_kernels`,
:mod:`kinac.ir.gpu.kernel_split`) and becomes one LLVM function per launch
(:mod:`kinac.ir.gpu.kernels`), named ``k_<digest>`` after its content; identical kernels are
lowered once. :func:`piece_kernels` lists a fused function's kernels with their inputs by
position (a piece of an entry, or a whole one); :mod:`kinac.ir.gpu.stitch` plans the entry's
buffers over them and binds each step's launches. The pipeline lowers each distinct piece and
kernel by its own query; :func:`lower_kernels` does it all in-process.
The pass records each decision on its ``kina.kernel`` as a ``gpu`` attribute
(``cublas pointers batch=64``, ``kernel k_<digest> grid=512 block=256 vec=4 T=32 C=8``), so
the IR printed after it shows what runs.
"""

from __future__ import annotations

import math
from collections.abc import Hashable
from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import func
from xdsl.dialects.builtin import ModuleOp, StringAttr
from xdsl.ir import SSAValue
from xdsl.passes import ModulePass

from kinac.artifacts.gpu import GpuKernel, GpuKernelCode, GpuStep
from kinac.dtypes import ITEMSIZE
from kinac.ice import in_kernel
from kinac.ir.dialects import kina_struct as st
from kinac.ir.dialects.kina import dtype_name, shape_of
from kinac.ir.gpu.gemm import plan_gemm
from kinac.ir.gpu.kernel_split import canonical_gpu_kernel, lower_gpu_kernel, structure
from kinac.ir.gpu.stitch import (
    GpuLoweredPiece,
    GpuPieceKernel,
    SplitEntry,
    kernel_module,
    link_steps,
    stitch_gpu,
)


@dataclass
class NvvmModule:
    """What the pass produces for one entry."""

    llvm_ir: str
    steps: tuple[GpuStep, ...]
    arena_bytes: int
    functions: tuple[str, ...]
    kernels: tuple[GpuKernel, ...]


def nbytes(v: SSAValue) -> int:
    return math.prod(shape_of(v.type)) * ITEMSIZE[dtype_name(v.type)]


# Canonical kernels by structure, in this process (as the host's, kinac.ir.host.kernels): a
# session re-fusing an edited layer's piece prints only its changed kernels (printing was
# ~40% of an L=32 edit's new piece). A pure function's memo, bounded.
_PRINTED: dict[Hashable, GpuKernel] = {}
_PRINTED_MAX = 4096


def piece_kernels(fn: func.FuncOp) -> GpuLoweredPiece:
    """The kernels of the fused function ``fn`` in order, each reading values by position
    (``fn``'s arguments, then earlier kernels' results): a cuBLAS call planned over buffers
    named ``v<position>``, or a generated kernel cut out in canonical form
    (:mod:`kinac.ir.gpu.kernel_split`), each distinct one printed once."""
    blk = fn.body.block
    ret = blk.last_op
    assert isinstance(ret, func.ReturnOp)
    ref: dict[SSAValue, int] = {a: i for i, a in enumerate(blk.args)}
    printed = _PRINTED  # repeats (layers, and the pieces an edit re-fuses) are printed once
    if len(printed) >= _PRINTED_MAX:
        printed.clear()
    kernels: list[GpuPieceKernel] = []
    for i, k in enumerate(o for o in blk.ops if isinstance(o, st.KernelOp)):
        reads = tuple(ref[u] for u in k.inputs)
        me = len(ref)
        moved = sum(nbytes(u) for u in dict.fromkeys(k.inputs)) + nbytes(k.result)
        kind, dt, shape = k.kind.data, dtype_name(k.result.type), shape_of(k.result.type)
        if k.impl.data == "blas":
            body: dict[SSAValue, str] = {
                a: f"v{r}" for a, r in zip(k.body.block.args, reads, strict=True)
            }
            with in_kernel(k.sym.data):
                gemm = plan_gemm(k, body, f"v{me}")
            impl = "cublasLt" if gemm.epilogue else "cublas"
            kernels.append(GpuPieceKernel(None, kind, impl, dt, shape, reads, moved, gemm))
        else:
            key = structure(k, i)
            kernel = printed.get(key)
            if kernel is None:
                kernel = printed[key] = canonical_gpu_kernel(k, i)
            aux: tuple[int, ...] = ()
            if kind == "gather":
                g = next(o for o in k.body.block.ops if isinstance(o, st.GatherOp))
                aux = shape_of(g.idx.type)
            kernels.append(
                GpuPieceKernel(kernel, kind, "kernel", dt, shape, reads, moved, None, aux)
            )
        ref[k.result] = me
    return GpuLoweredPiece(len(blk.args), tuple(kernels), tuple(ref[v] for v in ret.operands))


def split_kernels(fn: func.FuncOp) -> SplitEntry:
    """The fused entry ``fn`` as one piece: its buffer plan, steps and canonical kernels
    (each step keeps its ``kina.kernel`` op, for the pass's annotations)."""
    lp = piece_kernels(fn)
    outs = tuple(-1 - j for j in range(len(lp.outputs)))  # entry nodes only pieces look up
    split = stitch_gpu(lp.inputs, [(tuple(range(lp.inputs)), outs)], [lp])
    ops = [o for o in fn.body.block.ops if isinstance(o, st.KernelOp)]
    assert sum(len(p.members) for p in split.steps) == len(ops)
    for p in split.steps:  # a grouped cuBLAS call computes several kernels
        p.ops = tuple(ops[j] for j in p.members)
        p.op = p.ops[0]
    return split


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
        for op in p.ops or (p.op,):
            op.attributes["gpu"] = StringAttr(describe(s))
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
