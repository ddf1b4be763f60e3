"""Lowering of concrete Graphs through xDSL dialects to LLVM IR (host target).

Dialects: ``kina`` (typed primitives, :mod:`kinac.ir.dialect`, :mod:`kinac.ir.dialect_struct`)
and ``kbuf`` (library calls on buffers, :mod:`kinac.ir.kbuf`), with xDSL's builtin, func, arith,
math, memref, scf, cf and llvm dialects. Passes, one per module: ``legalize_dtypes``,
``select_impl``, ``fuse_kernels``, ``kina_to_loops``, ``expand_math``, ``loops_to_llvm``, then
``llvm_to_text``. xDSL is imported only inside this package, and lazily from here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kinac.artifacts.host import BufferSpec, LoweredEntry, Step

if TYPE_CHECKING:
    from kinac.tir.graph import Graph

__all__ = ["BufferSpec", "LoweredEntry", "Step", "lower_graph", "lower_stages"]


def lower_graph(graph: Graph) -> LoweredEntry:
    """Lower ``graph`` to a :class:`LoweredEntry` (LLVM IR text and calling metadata)."""
    from kinac.ir.pipeline import lower_graph as impl

    return impl(graph)


def lower_stages(graph: Graph) -> dict[str, str]:
    """The IR text after each pass (for golden tests and inspection)."""
    from kinac.ir.pipeline import lower_stages as impl

    return impl(graph)
