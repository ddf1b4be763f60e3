"""Kernels as content-addressed units: an entry split into its wrapper and canonical kernels.

After fusion every ``kina.kernel`` op is cut out of its entry into a module of its own: one
``func.func @kernel`` whose arguments are the kernel's inputs, printed in xDSL's generic
format. Nothing positional survives (its symbol becomes ``kernel``, values are numbered by
the printer), so the text is a canonical form of the kernel's body: its ops, shapes, dtypes,
layouts and implementation choice. Its BLAKE2b digest names the kernel's function
(``k_<digest>``), so identical kernels of different layers or entries are one symbol and one
compilation, and the pipeline's per-kernel queries (``host_kernel_llvm``,
``host_kernel_object``) are keyed by that text. A gather kernel also records its step number
(its runtime error names the step), which is part of its key.

An entry is lowered piece by piece (:mod:`kinac.ir.pieces`): :func:`lower_piece` fuses one
piece and lists its kernels (the pipeline's ``host_piece`` query, once per distinct piece),
and :func:`kinac.ir.host.stitch.stitch` assembles the entry's buffer plan, steps and wrapper
from them without xDSL; :func:`split_graph` does both for an entry taken whole.
"""

from __future__ import annotations

import re
from collections.abc import Hashable

from xdsl.context import Context
from xdsl.dialects import func, llvm
from xdsl.dialects.builtin import ModuleOp, StringAttr
from xdsl.ir import SSAValue

from kinac.artifacts.host import HostKernel, KernelCode, LoweredEntry
from kinac.ir.dialects import kina_struct as st
from kinac.ir.dialects.kina import dtype_name, shape_of
from kinac.ir.from_graph import graph_to_module
from kinac.ir.host.expand_math import ExpandMath
from kinac.ir.host.kina_to_loops import kernel_func, launch_shape
from kinac.ir.host.llvm_to_text import module_to_llvm_ir
from kinac.ir.host.loops_to_llvm import LoopsToLLVM
from kinac.ir.host.pipeline import KINA_PASSES
from kinac.ir.host.scalar_algebra import libm_declarations
from kinac.ir.host.stitch import LoweredPiece, PieceKernel, kernel_symbol, stitch
from kinac.ir.kernel_structure import kernel_structure
from kinac.ir.kernel_text import CANONICAL_NAME as CANONICAL_NAME
from kinac.ir.kernel_text import PRINTED_MAX, canonical_text, kernel_op
from kinac.ir.pieces import cut
from kinac.tir.graph import Graph

_DECLARE = re.compile(r"^declare [^@]*@\"?([A-Za-z0-9_.$]+)\"?\(", re.M)


def canonical_kernel(k: st.KernelOp, step: int) -> HostKernel:
    """``k`` cut out of its entry: its canonical text and the symbol derived from it."""
    text = canonical_text(k, _OPS)
    status_step = step if k.kind.data == "gather" else 0
    return HostKernel(kernel_symbol(text, status_step), text, status_step)


# The op each canonical text was printed from in this process: lower_kernel clones it rather
# than parsing the text back (a third of lowering a kernel; an edit's new kernel is printed by
# the same process that lowers it). The text is the op's generic form, so parsing it gives
# the same op (tests/test_kernels_incremental.py compares the two lowerings' IR).
_OPS: dict[str, st.KernelOp] = {}


# Canonical kernels printed so far, by structure: xDSL's printer is slow, and a long-lived
# session (``kinac watch``) re-fusing an edited layer finds all but the edited kernel here
# (an L=32 edit's piece: 18 -> 10 ms). A pure function's memo, bounded.
_PRINTED: dict[Hashable, HostKernel] = {}


def _declared(llvm_ir: str) -> tuple[str, ...]:
    return tuple(sorted({n for n in _DECLARE.findall(llvm_ir) if not n.startswith("llvm.")}))


def lower_piece(piece: Graph) -> LoweredPiece:
    """One piece of an entry (:mod:`kinac.ir.pieces`) lowered and fused into its kernels, each
    left as a canonical source: what the entry's :func:`~kinac.ir.host.stitch.stitch` needs
    (not verified: a checked graph's module, as the GPU's pieces, kinac.ir.gpu.pipeline)."""
    m = graph_to_module(piece, verify=False)
    ctx = Context()
    for p in KINA_PASSES:
        p().apply(ctx, m)
    fn = next(o for o in m.ops if isinstance(o, func.FuncOp))
    ret = fn.body.block.last_op
    assert isinstance(ret, func.ReturnOp)
    ref: dict[SSAValue, int] = {a: i for i, a in enumerate(fn.body.block.args)}
    printed = _PRINTED  # identical kernels repeat: print each once (in this process)
    kernels: list[PieceKernel] = []
    for i, k in enumerate(o for o in fn.body.block.ops if isinstance(o, st.KernelOp)):
        shape = kernel_structure(k, i)
        if shape not in printed:
            if len(printed) >= PRINTED_MAX:
                printed.clear()
            printed[shape] = canonical_kernel(k, i)
        aux: tuple[int, ...] = ()
        if k.kind.data == "gather":
            g = next(o for o in k.body.block.ops if isinstance(o, st.GatherOp))
            aux = shape_of(g.idx.type)
        res = k.results[0]
        kernels.append(
            PieceKernel(printed[shape], k.kind.data, k.impl.data, dtype_name(res.type),
                        shape_of(res.type), aux, tuple(ref[u] for u in k.inputs), launch_shape(k))
        )  # fmt: skip
        ref[res] = len(ref)
    return LoweredPiece(
        len(fn.body.block.args), tuple(kernels), tuple(ref[v] for v in ret.operands)
    )


def split_graph(graph: Graph) -> LoweredEntry:
    """Lower ``graph`` as one piece: its wrapper, and its kernels as canonical sources
    (``kernels``). ``library_calls`` holds the wrapper's own external calls: the caller adds
    each kernel's (:func:`lower_kernel`) before loading."""
    (whole,) = cut(graph, ())
    return stitch(graph, [(whole.inputs, whole.outputs)], [lower_piece(whole.graph)])


def lower_kernel(kernel: HostKernel, reuse: bool = True) -> KernelCode:
    """One canonical kernel to LLVM IR defining ``kernel.symbol`` (and its math helpers).
    ``reuse``: clone the op its text was printed from in this process, if any (``_OPS``)."""
    k = kernel_op(kernel.text, _OPS.get(kernel.text) if reuse else None)
    k.properties["sym"] = StringAttr(kernel.symbol)
    kf = kernel_func(k, kernel.status_step, launch_shape(k) is not None, visibility=None)
    m = ModuleOp([kf])
    libm_declarations(m)
    ctx = Context()
    ExpandMath().apply(ctx, m)
    LoopsToLLVM().apply(ctx, m)
    assert not any(
        isinstance(o, llvm.FuncOp) and o.sym_name.data.startswith("kinac_call_") for o in m.ops
    )
    text = module_to_llvm_ir(m)
    return KernelCode(kernel.symbol, text, _declared(text))
