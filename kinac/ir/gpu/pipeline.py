"""The GPU lowering: Graph -> ``kina`` -> kernels -> fused rows and epilogues -> LLVM (NVPTX).

The same front half as the host (:mod:`kinac.ir.host.pipeline`): ``graph_to_module`` and the host's
``fuse-kernels``, between GPU passes: ``gpu-select-impl`` (cuBLAS or generated kernel, per
matmul), ``gpu-split-reductions`` (a serial reduction in two parallel stages), ``gpu-fuse-epilogues`` (bias and residual adds into cuBLASLt calls) and
``gpu-fuse-rows`` (norms and softmaxes into one row kernel), ``gpu-fuse-attention``,
``gpu-small-gemm`` (small bf16/f16 products to a generated tensor-core GEMM with the norm, the
residual and ``silu * mul`` fused in), then ``gpu-kernels-to-nvvm``.
``legalize-dtypes`` is not run: cuBLAS reads bf16 and f16 directly (f32 accumulation), and the
generated kernels compute in f32 registers. :func:`lower_graph_gpu` is pure (a Graph in, a
:class:`GpuLoweredEntry` out); :func:`lower_stages_gpu` shows the IR after each pass. The
pipeline splits the work (issue 19): :func:`split_graph_gpu` per entry, then each distinct
kernel by its own queries, then :func:`assemble_entry`.
"""

from __future__ import annotations

import io
from collections.abc import Callable
from dataclasses import replace

from xdsl.context import Context
from xdsl.dialects import func
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass
from xdsl.printer import Printer

from kinac.artifacts.gpu import GpuKernelCode, GpuLoweredEntry
from kinac.ice import in_kernel
from kinac.ir.from_graph import graph_to_module
from kinac.ir.fuse_kernels import FuseKernels
from kinac.ir.gpu.attention import GpuFuseAttention
from kinac.ir.gpu.fuse_epilogues import GpuFuseEpilogues
from kinac.ir.gpu.fuse_rows import GpuFuseRows
from kinac.ir.gpu.kernel_split import lower_gpu_kernel
from kinac.ir.gpu.kernels_to_nvvm import GpuKernelsToNvvm, piece_kernels, split_kernels
from kinac.ir.gpu.select_impl import GpuSelectImpl
from kinac.ir.gpu.small_gemm import GpuSmallGemm
from kinac.ir.gpu.split_reduce import GpuSplitReductions
from kinac.ir.gpu.stitch import GpuLoweredPiece, SplitEntry
from kinac.ir.gpu.stitch import assemble_entry as assemble_entry
from kinac.tir.graph import Graph

GPU_PASSES: tuple[Callable[[], ModulePass], ...] = (
    GpuSelectImpl,
    GpuSplitReductions,
    FuseKernels,
    GpuFuseEpilogues,
    GpuFuseRows,
    GpuFuseAttention,
    GpuSmallGemm,
)


def print_ir(module: ModuleOp) -> str:
    s = io.StringIO()
    Printer(stream=s).print_op(module)
    return s.getvalue() + "\n"


def one_device(graph: Graph) -> Graph:
    """``graph`` with every placement erased: all of an entry's arithmetic runs on its GPU
    (``to-device``/``to-host`` inside it are views; params and outputs keep their placement
    in :class:`GpuLoweredEntry`, where the runtime copies them)."""
    nodes = tuple(replace(n, type=replace(n.type, device="cpu")) for n in graph.nodes)
    params = tuple((name, replace(t, device="cpu")) for name, t in graph.params)
    return replace(graph, nodes=nodes, params=params)


def gpu_module(graph: Graph, verify: bool = True) -> ModuleOp:
    """The entry's module after the GPU passes up to (not including) code generation
    (``verify``: run xDSL's verifier after each pass; the pipeline skips it, as the host's
    lowering does: it was two thirds of the passes' time on a 32-layer model)."""
    m = graph_to_module(one_device(graph), verify)
    ctx = Context()
    for p in GPU_PASSES:
        p().apply(ctx, m)
        if verify:
            m.verify()
    return m


def lower_stages_gpu(graph: Graph) -> dict[str, str]:
    """IR text after each pass, keyed by pass name (``graph`` first, ``llvm-ir`` last)."""
    out: dict[str, str] = {}
    m = graph_to_module(one_device(graph))
    out["graph"] = print_ir(m)
    ctx = Context()
    for p in (*GPU_PASSES, GpuKernelsToNvvm):
        pas = p()
        pas.apply(ctx, m)
        m.verify()
        out[pas.name] = print_ir(m)
    out["llvm-ir"] = lower_graph_gpu(graph).llvm_ir
    return out


def split_graph_gpu(graph: Graph, verify: bool = False) -> SplitEntry:
    """Lower ``graph`` up to its kernels: the launch plan, cuBLAS calls and each generated
    kernel in canonical form, none lowered yet (the pipeline's ``gpu_lowered``)."""
    m = gpu_module(graph, verify)
    fn = next(o for o in m.ops if isinstance(o, func.FuncOp))
    return split_kernels(fn)


def lower_gpu_piece(piece: Graph) -> GpuLoweredPiece:
    """One piece of an entry (:mod:`kinac.ir.pieces`) through the GPU passes, its kernels
    listed by position (the pipeline's ``gpu_piece``; :mod:`kinac.ir.gpu.stitch`)."""
    m = gpu_module(piece, verify=False)
    return piece_kernels(next(o for o in m.ops if isinstance(o, func.FuncOp)))


def lower_graph_gpu(graph: Graph, flavour: str = "nvptx") -> GpuLoweredEntry:
    """Lower one concrete entry for the GPU in this process, every kernel included
    (``flavour="emu"``: the host-emulation variant)."""
    split = split_graph_gpu(graph, verify=True)
    codes: dict[str, GpuKernelCode] = {}
    for p in split.steps:
        if p.kernel is not None and p.kernel.symbol not in codes:
            with in_kernel(p.step.sym):
                codes[p.kernel.symbol] = lower_gpu_kernel(p.kernel, flavour)
    return assemble_entry(graph, split, codes, flavour)
