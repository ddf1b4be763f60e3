"""A kernel's structure: a hashable stand-in for its canonical text, shared by the host and GPU
kernel splits (``kinac/ir/host/kernels.py``, ``kinac/ir/gpu/kernel_split.py``).

Why: layers repeat kernels, and xDSL's printer is slow, so each split prints one canonical text
per distinct structure. Two kernels have equal structures exactly when their canonical texts are
equal (same ops, properties, attributes, types and wiring)."""

from __future__ import annotations

from collections.abc import Hashable

from xdsl.ir import Operation, SSAValue

from kinac.ir.dialects import kina_struct as st


def kernel_structure(k: st.KernelOp, step: int, *, ignored_attr: str | None = None) -> Hashable:
    """The structure of ``k`` at ``step`` (a gather's step is part of it: it writes its step
    number into the status buffer). The kernel op's ``sym`` property, and its attribute
    ``ignored_attr`` if given (the GPU split's launch notes), are not part of the canonical text."""
    number: dict[SSAValue, int] = {v: i for i, v in enumerate(k.inputs)}
    out: list[Hashable] = [step if k.kind.data == "gather" else 0]

    def visit(op: Operation) -> None:
        props = tuple(sorted((n, v) for n, v in op.properties.items() if op is not k or n != "sym"))
        attrs = tuple(
            sorted((n, v) for n, v in op.attributes.items() if op is not k or n != ignored_attr)
        )
        out.append((op.name, props, attrs))
        out.append(tuple(number[o] for o in op.operands))
        for r in op.results:
            number[r] = len(number)
            out.append(r.type)
        for region in op.regions:
            out.append("region")
            for block in region.blocks:
                out.append(("block", tuple(a.type for a in block.args)))
                for a in block.args:
                    number[a] = len(number)
                for inner in block.ops:
                    visit(inner)

    visit(k)
    return (tuple(u.type for u in k.inputs), tuple(out))
