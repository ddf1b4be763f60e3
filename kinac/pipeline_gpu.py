"""The GPU target's queries: an entry's launch plan, its kernels one by one, and its PTX.

    entry_graph ─► gpu_lowered ─► ptx ─► CUDA runtime (target cuda)

Registered by :mod:`kinac.pipeline` (its last line imports this module, and re-exports
``gpu_lowered`` and ``ptx``). The pipeline's own queries are imported inside each function:
this module may be imported before or after :mod:`kinac.pipeline`.
"""

from __future__ import annotations

from typing import Any

from kinac.pipeline_support import EntryKey
from kinac.rules import Database, query


@query("gpu_lowered", stage="lower", tools=("xdsl",))
def gpu_lowered(db: Database, key: EntryKey) -> Any:
    """The entry lowered for the GPU: LLVM IR for NVPTX, cuBLAS calls and launch plan."""
    from kinac.ir.gpu.pipeline import lower_graph_gpu
    from kinac.pipeline import _internal_errors, entry_graph

    spec = entry_graph(db, key)
    if spec.graph is None:
        return None
    with _internal_errors(key, "GPU lowering"):
        return lower_graph_gpu(spec.graph)


@query("ptx", stage="codegen", tools=("llvmlite",))
def ptx(db: Database, key: EntryKey) -> str | None:
    """PTX for the target's GPU architecture (llvmlite's NVPTX back end, -O3)."""
    from kinac.codegen.ptx import compile_ptx
    from kinac.pipeline import _internal_errors, target

    lo = gpu_lowered(db, key)
    if lo is None:
        return None
    arch = target(db, ()).arch
    with _internal_errors(key, "PTX generation (LLVM NVPTX)"):
        return compile_ptx(lo.llvm_ir, arch)
