"""The GPU lowering: Graph -> ``kina`` -> kernels -> fused rows and epilogues -> LLVM (NVPTX).

The same front half as the host (:mod:`kinac.ir.host.pipeline`): ``graph_to_module`` and the host's
``fuse-kernels``, between GPU passes: ``gpu-select-impl`` (cuBLAS or generated kernel, per
matmul), ``gpu-fuse-epilogues`` (bias and residual adds into cuBLASLt calls) and
``gpu-fuse-rows`` (norms and softmaxes into one row kernel), then ``gpu-kernels-to-nvvm``.
``legalize-dtypes`` is not run: cuBLAS reads bf16 and f16 directly (f32 accumulation), and the
generated kernels compute in f32 registers. :func:`lower_graph_gpu` is pure (a Graph in, a
:class:`GpuLoweredEntry` out); :func:`lower_stages_gpu` shows the IR after each pass.
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

from kinac.artifacts.gpu import GpuLoweredEntry
from kinac.artifacts.host import BufferSpec
from kinac.ir.from_graph import graph_to_module
from kinac.ir.fuse_kernels import FuseKernels
from kinac.ir.gpu.fuse_epilogues import GpuFuseEpilogues
from kinac.ir.gpu.fuse_rows import GpuFuseRows
from kinac.ir.gpu.kernels_to_nvvm import STATUS_SLOTS, GpuKernelsToNvvm, lower_kernels
from kinac.ir.gpu.select_impl import GpuSelectImpl
from kinac.tir.graph import Graph

GPU_PASSES: tuple[Callable[[], ModulePass], ...] = (
    GpuSelectImpl,
    FuseKernels,
    GpuFuseEpilogues,
    GpuFuseRows,
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


def gpu_module(graph: Graph) -> ModuleOp:
    """The entry's module after the GPU passes up to (not including) code generation."""
    m = graph_to_module(one_device(graph))
    ctx = Context()
    for p in GPU_PASSES:
        p().apply(ctx, m)
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


def lower_graph_gpu(graph: Graph, flavour: str = "nvptx") -> GpuLoweredEntry:
    """Lower one concrete entry for the GPU (``flavour="emu"``: the host-emulation variant)."""
    m = gpu_module(graph)
    fn = next(o for o in m.ops if isinstance(o, func.FuncOp))
    nv = lower_kernels(fn, flavour)
    params = tuple(BufferSpec(n, t.dtype, t.shape) for n, t in graph.params)
    outs = [graph.nodes[o].type for o in graph.outputs]
    # an output stays on the GPU unless the program moves it (to-host): on its own GPU, or the
    # entry's (that of its GPU params, else 0); params from the host are copied in by the
    # runtime whatever their declared placement
    gpu = next((t.device for _, t in graph.params if t.device.startswith("cuda:")), "cuda:0")
    odev = tuple(
        "cpu" if graph.nodes[o].op == "to_host" else (t.device if t.device != "cpu" else gpu)
        for o, t in zip(graph.outputs, outs, strict=True)
    )
    outputs = tuple(BufferSpec(f"out{j}", t.dtype, t.shape) for j, t in enumerate(outs))
    return GpuLoweredEntry(
        name=graph.name,
        llvm_ir=nv.llvm_ir,
        params=params,
        outputs=outputs,
        param_devices=tuple(t.device for _, t in graph.params),
        output_devices=odev,
        arena_bytes=nv.arena_bytes,
        status_slots=STATUS_SLOTS,
        steps=nv.steps,
        functions=nv.functions,
    )
