"""The GPU target's queries: an entry's launch plan, its kernels one by one, and its PTX.

    entry_graph ─► gpu_lowered (cut into pieces; stitch: buffer plan, steps, launches)
                     ├► gpu_piece(piece Graph)   (once per distinct piece: GPU passes, fusion)
                     ├► gpu_kernel_llvm(GpuKernel) ─► gpu_kernel_ptx((GpuKernel, arch))
                     └──────────────────────────────► ptx (the distinct kernels' PTX, linked)

Kernels are content-addressed (issue 19, docs/architecture.md): ``gpu_lowered`` cuts each
generated kernel out of its entry in canonical form (:mod:`kinac.ir.gpu.kernel_split`), and
the per-kernel queries are keyed by that record, so identical kernels of different layers,
entries or workspaces sharing a cache are lowered and compiled once, and an edit re-runs them
only for kernels whose canonical form changed. The entry still loads one PTX module.

Registered by :mod:`kinac.pipeline` (its last line imports this module and re-exports
``gpu_lowered`` and ``ptx``). The pipeline's own queries are imported inside each function:
this module may be imported before or after :mod:`kinac.pipeline`.
"""

from __future__ import annotations

from typing import Any

from kinac.pipeline_support import EntryKey
from kinac.rules import Database, input_query, query

SWITCH_PREFIX = "KINAC_SMALL_GEMM"  # the GPU lowering's measuring switches (docs/gpu.md)


@input_query("gpu_lowering_switches")
def gpu_lowering_switches(db: Database, _: tuple[()]) -> tuple[tuple[str, str], ...]:
    """The environment's ``KINAC_SMALL_GEMM*`` switches, sorted: the GPU passes and the small
    GEMM's emitter read them (:mod:`kinac.ir.gpu.small_gemm_rule`), so the lowering queries
    depend on this input and a changed switch re-lowers instead of reusing a memo made under
    another one (only input queries read the environment)."""
    import os

    return tuple(sorted((k, v) for k, v in os.environ.items() if k.startswith(SWITCH_PREFIX)))


@query("gpu_lowered", stage="lower", tools=("xdsl",))
def gpu_lowered(db: Database, key: EntryKey) -> Any:
    """The entry lowered for the GPU: cuBLAS calls and launch plan, its distinct kernels
    (``kernels``, each lowered by ``gpu_kernel_llvm``) and their LLVM module (``llvm_ir``)."""
    from kinac.pipeline import entry_graph

    spec = entry_graph(db, key)
    if spec.graph is None:
        return None
    return lower_graph(db, spec.graph, key, "GPU lowering", spec.calls)


def lower_graph(
    db: Database, graph: Any, key: EntryKey, stage: str, calls: tuple[Any, ...] = ()
) -> Any:
    """``graph`` lowered for the GPU through the per-piece and per-kernel queries
    (``gpu_lowered``'s body; the gradient queries of :mod:`kinac.pipeline_grad` call it too):
    cut at its ``calls`` (:func:`kinac.ir.gpu.stitch.gpu_cut`), each distinct piece fused by
    ``gpu_piece``, stitched here without xDSL. Failures are internal errors of ``key``'s
    entry at ``stage``."""
    from kinac.ice import in_kernel
    from kinac.ir.gpu.stitch import assemble_entry, gpu_cut, stitch_gpu
    from kinac.ir.pieces import distinct_graphs
    from kinac.pipeline import entry_internal_errors

    with entry_internal_errors(key, stage):
        pieces = gpu_cut(graph, calls)
        distinct, which = distinct_graphs(pieces)
        fused = [gpu_piece(db, g) for g in distinct]
        bounds = [(p.inputs, p.outputs) for p in pieces]
        split = stitch_gpu(len(graph.params), bounds, [fused[i] for i in which])
        codes: dict[str, Any] = {}
        for p in split.steps:  # a kernel's failure is reported as its entry's, at its step
            if p.kernel is not None and p.kernel.symbol not in codes:
                with in_kernel(p.step.sym):
                    codes[p.kernel.symbol] = gpu_kernel_llvm(db, p.kernel)
        from kinac.pipeline_gemm_tune import tuned_gemms

        return tuned_gemms(db, assemble_entry(graph, split, codes))  # cuBLAS calls: timed choices


@query("gpu_piece", stage="lower", tools=("xdsl",))
def gpu_piece(db: Database, piece: Any) -> Any:
    """One piece of an entry (a :class:`~kinac.tir.graph.Graph`) through the GPU passes, its
    kernels listed by position (:func:`kinac.ir.gpu.pipeline.lower_gpu_piece`): keyed by the
    piece, so identical layers are fused once."""
    from kinac.ir.gpu.pipeline import lower_gpu_piece

    gpu_lowering_switches(db, ())  # a dependency: the passes read these switches
    return lower_gpu_piece(piece)


@query("gpu_kernel_llvm", stage="lower", tools=("xdsl",))
def gpu_kernel_llvm(db: Database, kernel: Any) -> Any:
    """One canonical GPU kernel lowered to LLVM IR (NVPTX) and its launch geometry: keyed by
    its body, not by its entry (a failure reaches the entry's query, which reports it)."""
    from kinac.ir.gpu.kernel_split import lower_gpu_kernel
    from kinac.pipeline_autotune import tuned_kernel

    gpu_lowering_switches(db, ())  # a dependency: the small GEMM's emitter reads them
    return lower_gpu_kernel(tuned_kernel(db, kernel))  # fused attention: its tuned variant


@query("gpu_kernel_ptx", stage="codegen", tools=("llvmlite",))
def gpu_kernel_ptx(db: Database, key: tuple[Any, str]) -> str:
    """One canonical kernel's PTX for GPU architecture ``arch`` (-O3), shared by every entry
    using it."""
    from kinac.codegen.ptx import compile_ptx
    from kinac.ir.gpu.attention_lower import for_arch
    from kinac.ir.gpu.kernel_split import kernel_module

    kernel, arch = key
    kernel = for_arch(kernel, arch)  # fused attention: wgmma on sm_90a, else as lowered
    return compile_ptx(kernel_module([gpu_kernel_llvm(db, kernel)]), arch)


@query("ptx", stage="codegen", tools=("llvmlite",))
def ptx(db: Database, key: EntryKey) -> str | None:
    """PTX for the target's GPU architecture: the entry's distinct kernels, each compiled by
    ``gpu_kernel_ptx``, linked into one module (one driver JIT per entry, as before)."""
    lo = gpu_lowered(db, key)
    if lo is None:
        return None
    return link_lowered(db, lo, key, "PTX generation (LLVM NVPTX)")


def link_lowered(db: Database, lo: Any, key: EntryKey, stage: str) -> str:
    """The PTX of a GPU lowering ``lo`` (``ptx``'s body; the gradient queries call it too)."""
    from kinac.codegen.ptx import link_ptx
    from kinac.ice import in_kernel
    from kinac.ir.gpu.attention_lower import entry_arch
    from kinac.pipeline import entry_internal_errors, target

    arch = entry_arch(lo.kernels, target(db, ()).arch)  # sm_90 -> sm_90a with fused attention
    first: dict[str, str] = {}  # each function's first step, which an error names
    for s in lo.steps:
        for ln in s.launches:
            first.setdefault(ln.function, s.sym)
    with entry_internal_errors(key, stage):
        parts = []
        for k in lo.kernels:
            step = first.get(k.symbol) or first.get(f"{k.symbol}_0") or k.symbol  # concat parts
            with in_kernel(step):
                parts.append(gpu_kernel_ptx(db, (k, arch)))
        return link_ptx(parts, arch)
