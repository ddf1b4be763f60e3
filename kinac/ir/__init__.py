"""Lowering of concrete Graphs through xDSL dialects to LLVM IR.

Layout: ``dialects/`` (the ``kina`` and ``kbuf`` dialects), ``host/`` (the CPU lowering's
passes, one per module), ``gpu/`` (the GPU lowering's passes); here, what both share: building
a ``kina`` module from a Graph (``from_graph``), partitioning it into kernels
(``fuse_kernels``), the layout algebra of views (``layout``, ``views``), demand-driven
evaluation (``trampoline``) and hand-built test graphs (``testing``). What leaves this package
is an artifact (:mod:`kinac.artifacts`). xDSL is imported only inside this package, and lazily
from here."""

from __future__ import annotations

from typing import TYPE_CHECKING

from kinac.artifacts.host import BufferSpec, LoweredEntry, Step
from kinac.ir.lazy_formats import install as _lazy_formats

_lazy_formats()  # xDSL's assembly formats parsed on first use (imports nothing now)

if TYPE_CHECKING:
    from kinac.tir.graph import Graph

__all__ = ["BufferSpec", "LoweredEntry", "Step", "lower_graph", "lower_stages"]


def lower_graph(graph: Graph) -> LoweredEntry:
    """Lower ``graph`` to a :class:`LoweredEntry` (LLVM IR text and calling metadata)."""
    from kinac.ir.host.pipeline import lower_graph as impl

    return impl(graph)


def lower_stages(graph: Graph) -> dict[str, str]:
    """The IR text after each pass (for golden tests and inspection)."""
    from kinac.ir.host.pipeline import lower_stages as impl

    return impl(graph)
