"""A kernel's canonical text and the op it was printed from, shared by the host and GPU kernel
splits (``kinac/ir/host/kernels.py``, ``kinac/ir/gpu/kernel_split.py``).

Why one module: both splits key a kernel by the generic-form text of the kernel op cut out of
its entry (inputs as block arguments, ``sym`` set to :data:`CANONICAL_NAME`), and both lower a
kernel printed in this process by cloning the op it was printed from rather than parsing the
text back (parsing was a third of lowering a host kernel and ~85% of a GPU kernel). The text is
the op's generic form, so parsing it gives the same op (tests compare the two lowerings)."""

from __future__ import annotations

import io

from xdsl.context import Context
from xdsl.dialects import arith, builtin, func
from xdsl.dialects.builtin import ModuleOp, StringAttr
from xdsl.ir import Block, Region
from xdsl.parser import Parser
from xdsl.printer import Printer

from kinac.ir.dialects import kbuf, kina_struct
from kinac.ir.dialects import kina_struct as st

CANONICAL_NAME = "kernel"
# how many printed ops a split remembers before it starts over (a pure function's memo)
PRINTED_MAX = 4096


def canonical_text(
    k: st.KernelOp, printed: dict[str, st.KernelOp], *, drop_attr: str | None = None
) -> str:
    """``k`` cut out of its entry, printed in generic form; the printed copy is remembered in
    ``printed`` (bounded by :data:`PRINTED_MAX`) under its text. ``drop_attr``: an attribute
    that is a decision of a later pass, not an input (the GPU split's launch notes)."""
    block = Block(arg_types=[u.type for u in k.inputs])
    copy = k.clone(value_mapper=dict(zip(k.inputs, block.args, strict=True)))
    copy.properties["sym"] = StringAttr(CANONICAL_NAME)
    if drop_attr is not None:
        copy.attributes.pop(drop_attr, None)
    block.add_ops([copy, func.ReturnOp(copy.results[0])])
    ftype = ([u.type for u in k.inputs], [copy.results[0].type])
    s = io.StringIO()
    Printer(stream=s, print_generic_format=True).print_op(
        ModuleOp([func.FuncOp(CANONICAL_NAME, ftype, Region(block))])
    )
    text = s.getvalue() + "\n"
    if len(printed) >= PRINTED_MAX:
        printed.clear()
    printed[text] = copy
    return text


def kernel_op(text: str, printed: st.KernelOp | None) -> st.KernelOp:
    """The kernel op of a canonical ``text``: a clone of the op it was printed from in this
    process (``printed``, its inputs mapped to fresh values so no use is added to the original),
    else parsed back from the text."""
    if printed is not None:
        args = Block(arg_types=[u.type for u in printed.inputs]).args
        return printed.clone(value_mapper=dict(zip(printed.inputs, args, strict=True)))
    ctx = Context()
    for d in (builtin.Builtin, func.Func, arith.Arith, kina_struct.Kina, kbuf.KBuf):
        ctx.load_dialect(d)
    parsed = Parser(ctx, text).parse_module()
    outer = next(o for o in parsed.ops if isinstance(o, func.FuncOp))
    return next(o for o in outer.body.block.ops if isinstance(o, st.KernelOp))
