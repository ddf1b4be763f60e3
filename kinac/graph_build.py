"""Compile one concrete Graph for this machine and load it, without the rule engine.

Why here and not in the runtime: :mod:`kinac.rt` executes artifacts and never imports the
compiler (``tests/test_layers.py``), so the one-call path from a :class:`Graph` to a callable
(tests, benchmarks, tools) sits above both, next to the pipeline. No caching: the pipeline
caches :func:`kinac.ir.lower_graph` and :func:`kinac.codegen.llvm.compile_object` as queries.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from kinac.rt.host import HostEntry
    from kinac.tir.graph import Graph


def compile_graph(graph: Graph) -> HostEntry:
    """Lower ``graph``, compile it for this machine and load it as a :class:`HostEntry`."""
    from kinac.codegen.llvm import compile_object, host_target
    from kinac.ir import lower_graph
    from kinac.rt.host import load_entry

    lowered = lower_graph(graph)
    return load_entry(lowered, compile_object(lowered.llvm_ir, host_target()))
