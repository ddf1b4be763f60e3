"""LLVM IR text from the ``llvm`` dialect, through xDSL's LLVM backend.

xDSL's ``convert_module`` builds an ``llvmlite.ir`` module; it does not carry function
linkage, so internal functions (kernels, math helpers, the entry behind its wrapper) are marked
here: LLVM may then inline them into the wrapper and drop the copies. Everything is also
``nounwind`` (no exceptions cross kinac code), which keeps calls cheap for the optimiser.
Instruction flags (``nsw nuw``, fast-math) are sorted so the text is the same in every process.

Each loop's back edge carries ``llvm.loop.interleave.count 1`` (:data:`INTERLEAVE_ONCE`): the
vectoriser then runs one vector (16 f32 lanes) per iteration instead of four. A causal
softmax row is 16-144 keys long (a multiple of 16): interleaved by four, its vector loop took
64 keys a step and left up to 48 to the scalar remainder loop, so most of a short row ran
scalar. Same process, 2 threads, per-kernel profile (2026-12-02, docs/host.md): the small
block's softmax 99 -> 81-88 us at best, the other maps unchanged or a little faster.
"""

from __future__ import annotations

import re

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
    text = str(ir_mod)
    return once_per_iteration(text) if INTERLEAVE_ONCE else text


INTERLEAVE_ONCE = True  # False: LLVM's own interleaving (as before 2026-12-02d; cpu_ab A/Bs)
_DEFINE = re.compile(r"^define [^@]*@\"?([^\"(]+)\"?\(")
_LABEL = re.compile(r'^"?([^":\s]+)"?:')
_BACK = re.compile(r'^(\s*br label %"?([^"\s,]+)"?)\s*$')


def once_per_iteration(text: str) -> str:
    """``text`` with ``!llvm.loop`` metadata (interleave count 1) on every loop's back edge:
    an unconditional branch to a block defined earlier in the same function (the loops
    :mod:`kinac.ir.host.loopgen` emits close with one)."""
    lines = text.split("\n")
    seen: set[str] = set()
    tags: list[str] = []
    for i, line in enumerate(lines):
        if _DEFINE.match(line):
            seen = set()
            continue
        label = _LABEL.match(line)
        if label:
            seen.add(label.group(1))
            continue
        back = _BACK.match(line)
        if back and back.group(2) in seen:
            n = 1000 + len(tags)
            lines[i] = f"{back.group(1)}, !llvm.loop !{n}"
            tags.append(f"!{n} = distinct !{{!{n}, !999}}")
    if not tags:
        return text
    tags.append('!999 = !{!"llvm.loop.interleave.count", i32 1}')
    return "\n".join(lines).rstrip("\n") + "\n\n" + "\n".join(tags) + "\n"
