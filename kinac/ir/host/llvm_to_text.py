"""LLVM IR text from the ``llvm`` dialect, through xDSL's LLVM backend.

xDSL's ``convert_module`` builds an ``llvmlite.ir`` module; it does not carry function
linkage, so internal functions (kernels, math helpers, the entry behind its wrapper) are marked
here: LLVM may then inline them into the wrapper and drop the copies. Everything is also
``nounwind`` (no exceptions cross kinac code), which keeps calls cheap for the optimiser.
Instruction flags (``nsw nuw``, fast-math) are sorted so the text is the same in every process.
"""

from __future__ import annotations

from xdsl.backend.llvm.convert import convert_module
from xdsl.dialects import llvm
from xdsl.dialects.builtin import ModuleOp


def module_to_llvm_ir(
    module: ModuleOp, triple: str = "", out_of_line: frozenset[str] = frozenset()
) -> str:
    """The textual LLVM IR of an ``llvm``-dialect module (target-independent if no triple);
    the functions named in ``out_of_line`` are ``noinline``."""
    ir_mod = convert_module(module, fallback_target_triple=triple or "")
    for op in module.ops:
        if not isinstance(op, llvm.FuncOp):
            continue
        fn = ir_mod.get_global(op.sym_name.data)
        if op.body.blocks:
            fn.attributes.add("nounwind")
            if op.linkage.linkage.data == "internal":
                fn.linkage = "internal"
            if op.sym_name.data in out_of_line:
                fn.attributes.add("noinline")
    for fn in ir_mod.functions:
        for block in fn.blocks:
            for instr in block.instructions:
                flags = getattr(instr, "flags", None)
                if flags:  # xDSL keeps them in a frozenset: make the text deterministic
                    instr.flags = sorted(flags)
    return str(ir_mod)
