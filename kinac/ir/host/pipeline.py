"""The lowering pipeline: Graph -> ``kina`` -> kernels -> loops -> ``llvm`` -> LLVM IR text.

:func:`lower_graph` is pure (a Graph in, a :class:`LoweredEntry` out): the lead registers it
as a query. :func:`lower_stages` returns the IR text after each pass, for golden tests and for
``kinac`` users who want to see what their entry became.
"""

from __future__ import annotations

import io
from collections.abc import Callable

from xdsl.context import Context
from xdsl.dialects import func, llvm
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass
from xdsl.printer import Printer

from kinac.artifacts.host import BufferSpec, LoweredEntry, Step
from kinac.ir.dialects import kina_struct as st
from kinac.ir.dialects.kina import dtype_name, shape_of
from kinac.ir.from_graph import graph_to_module, symbol_name
from kinac.ir.host.causal import FuseKernelsHost
from kinac.ir.host.expand_math import ExpandMath
from kinac.ir.host.kina_to_loops import KinaToLoops, plan_buffers
from kinac.ir.host.legalize_dtypes import LegalizeDtypes
from kinac.ir.host.llvm_to_text import module_to_llvm_ir
from kinac.ir.host.loops_to_llvm import LoopsToLLVM
from kinac.ir.host.select_impl import SelectImpl
from kinac.ir.host.stitch import STATUS_SLOTS, wrapper_name
from kinac.tir.graph import Graph

# Past this many kernels an entry keeps them out of line (``noinline``): inlined, they form one
# function whose -O3 time grows faster than its size (800 chained matmuls: 39 s, not 7 s).
MANY_KERNELS = 64
KINA_PASSES: tuple[Callable[[], ModulePass], ...] = (LegalizeDtypes, SelectImpl, FuseKernelsHost)
LOW_PASSES: tuple[Callable[[], ModulePass], ...] = (KinaToLoops, ExpandMath, LoopsToLLVM)


def print_ir(module: ModuleOp) -> str:
    s = io.StringIO()
    Printer(stream=s).print_op(module)
    return s.getvalue() + "\n"


def steps_of(fused: ModuleOp) -> tuple[tuple[Step, ...], int]:
    fn = next(o for o in fused.ops if isinstance(o, func.FuncOp))
    plan = plan_buffers(fn)
    names: dict[object, str] = {}
    for v, (where, n) in plan.where.items():
        names[v] = f"{where}{n}" if where != "temp" else f"arena+{n}"
    steps = []
    for k in fn.body.block.ops:
        if not isinstance(k, st.KernelOp):
            continue
        res = k.results[0]
        aux: tuple[int, ...] = ()
        if k.kind.data == "gather":
            g = next(o for o in k.body.block.ops if isinstance(o, st.GatherOp))
            aux = shape_of(g.idx.type)
        steps.append(
            Step(
                k.sym.data,
                k.kind.data,
                k.impl.data,
                dtype_name(res.type),
                shape_of(res.type),
                tuple(names[u] for u in k.inputs),
                names[res],
                aux,
            )
        )
    return tuple(steps), plan.arena_bytes


def _out_of_line(steps: tuple[Step, ...]) -> frozenset[str]:
    return frozenset(s.sym for s in steps) if len(steps) > MANY_KERNELS else frozenset()


def lower_stages(graph: Graph) -> dict[str, str]:
    """IR text after each pass, keyed by pass name (``graph`` first, ``llvm-ir`` last)."""
    out: dict[str, str] = {}
    m = graph_to_module(graph)
    out["graph"] = print_ir(m)
    ctx = Context()
    for p in (*KINA_PASSES, *LOW_PASSES):
        pas = p()
        pas.apply(ctx, m)
        m.verify()
        out[pas.name] = print_ir(m)
    out["llvm-ir"] = module_to_llvm_ir(m)
    return out


def lower_graph(graph: Graph) -> LoweredEntry:
    """Lower one concrete entry to LLVM IR plus its calling metadata."""
    m = graph_to_module(graph)
    ctx = Context()
    for p in KINA_PASSES:
        p().apply(ctx, m)
    steps, arena = steps_of(m)
    for p in LOW_PASSES:
        p().apply(ctx, m)
    calls = sorted(
        o.sym_name.data for o in m.ops if isinstance(o, llvm.FuncOp) and not o.body.blocks
    )
    params = tuple(BufferSpec(n, t.dtype, t.shape) for n, t in graph.params)
    outputs = tuple(
        BufferSpec(f"out{j}", graph.nodes[o].type.dtype, graph.nodes[o].type.shape)
        for j, o in enumerate(graph.outputs)
    )
    return LoweredEntry(
        name=graph.name,
        symbol=wrapper_name(symbol_name(graph.name)),
        llvm_ir=module_to_llvm_ir(m, out_of_line=_out_of_line(steps)),
        params=params,
        outputs=outputs,
        arena_bytes=arena,
        status_slots=STATUS_SLOTS,
        steps=steps,
        library_calls=tuple(calls),
    )
