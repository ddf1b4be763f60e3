"""Host lowering below the entry: one query per distinct piece of an entry.

    entry_graph ─► lowered ─┬► host_piece(piece graph)   (once per distinct piece: xDSL, fusion)
                            └► stitch (buffer plan, steps, wrapper LLVM IR: plain Python)
    object_code ─┬► host_piece_object(piece function IR)   (once per distinct piece function)
                 └► host_kernel_object(kernel)              (once per distinct kernel)

An entry's graph is cut at its calls (:mod:`kinac.ir.pieces`); each piece is a Graph of its
own (params in first-use order), so the same call in every layer is one key, lowered and fused
once, and an edit to one layer re-lowers only that layer's piece. Imported by the last line of
:mod:`kinac.pipeline`, which registers it.
"""

from __future__ import annotations

from typing import Any

from kinac.rules import Database, query


@query("host_piece", stage="lower", tools=("xdsl",))
def host_piece(db: Database, piece: Any) -> Any:
    """One piece (a :class:`~kinac.tir.graph.Graph`) fused into kernels, each a canonical
    source (:func:`kinac.ir.host.kernels.lower_piece`); keyed by the piece, not its entry."""
    from kinac.ir.host.kernels import lower_piece

    return lower_piece(piece)


@query("specialise_call", stage="lower")
def specialise_call(db: Database, key: Any) -> Any:
    """One call of an entry's body at concrete types (:mod:`kinac.check.spec_calls`): keyed by
    its callee, dims, dtypes and argument types, so identical layers specialise once and an
    edit to the entry's own body re-specialises none of its calls."""
    from kinac.check.spec_calls import specialise_call as run
    from kinac.pipeline_support import CheckEnv

    return run(key, CheckEnv(db))


@query("host_piece_object", stage="codegen", tools=("llvmlite",))
def host_piece_object(db: Database, text: str) -> bytes:
    """One piece function (:mod:`kinac.ir.host.wrapper_ir`: a piece's kernel calls over its
    buffers) compiled at the wrapper's -O level: keyed by its LLVM IR, so the same layer in
    every position, entry or workspace is compiled once and an edit compiles only the piece
    functions it changed, plus the entry's short wrapper."""
    from kinac.codegen.llvm import compile_object
    from kinac.pipeline import WRAPPER_OPT, host_target

    return compile_object(text, host_target(db, ()), WRAPPER_OPT)
