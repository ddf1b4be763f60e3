"""The dataflow of a one-kernel PTX module as interned expressions, to compare two kernels'
arithmetic value for value (not just opcode counts): every instruction is its opcode over its
operands' expressions, a global load is ``(buffer, lane)`` named by the pointer parameter its
address derives from, a parameter by its name. Two kernels computing a stored lane by the same
instructions over the same inputs give it the same id, whatever their registers, addressing or
instruction order (the fused AdamW kernel against its three defns' kernels)."""

from __future__ import annotations

import re
from typing import Any

_INSN = re.compile(r"^(?:@!?%\w+\s+)?([a-z][\w.]*)\s*(.*);$")


def _split(args: str) -> list[str]:
    """An instruction's operands, split at the commas outside ``{}`` and ``[]``."""
    out, depth, cur = [], 0, ""
    for ch in args:
        if ch in "{[":
            depth += 1
        elif ch in "}]":
            depth -= 1
        if ch == "," and depth == 0:
            out.append(cur.strip())
            cur = ""
        else:
            cur += ch
    if cur.strip():
        out.append(cur.strip())
    return out


def stores(
    ptx: str,
    names: list[str],
    table: dict[Any, int],
    loads: dict[tuple[str, int], int] | None = None,
) -> dict[tuple[str, int], int]:
    """Each stored lane ``(buffer, lane)`` of ``ptx``'s one kernel as an id interned in
    ``table`` (shared by the kernels compared); ``names[i]`` names kernel parameter ``i``;
    ``loads`` gives some loaded lanes' ids (another kernel's stores, for a chain)."""
    reg: dict[str, int] = {}
    root: dict[str, frozenset[str]] = {}
    out: dict[tuple[str, int], int] = {}
    loads = loads or {}

    def intern(key: Any) -> int:
        return table.setdefault(key, len(table))

    def val(a: str) -> int:
        return reg[a] if a in reg else intern(("lit", a))

    def base(addr: str) -> str:
        (r,) = root[addr.strip("[]")]
        return r

    for line in ptx.splitlines():
        m = _INSN.match(line.strip())
        if m is None:
            continue
        op, ops = m.group(1), _split(m.group(2))
        if op in ("bra", "ret") or not ops:
            continue
        if op.startswith("ld.param"):
            k = int(ops[1].strip("[]").rsplit("_", 1)[1])
            reg[ops[0]], root[ops[0]] = intern(("param", names[k])), frozenset([names[k]])
            continue
        if op.startswith("ld.global"):
            b = base(ops[1])
            dsts = ops[0].strip("{}").split(",")
            for j, d in enumerate(dsts):
                reg[d.strip()] = loads.get((b, j)) or intern(("ld", b, j))
                root[d.strip()] = frozenset()
            continue
        if op.startswith("st.global"):
            b = base(ops[0])
            for j, s in enumerate(ops[1].strip("{}").split(",")):
                out[(b, j)] = val(s.strip())
            continue
        args = tuple(val(a) for a in ops[1:])
        rts = frozenset().union(*(root.get(a, frozenset()) for a in ops[1:]))
        dsts = [d.strip() for d in ops[0].strip("{}").split(",")]
        for j, d in enumerate(dsts):
            reg[d] = intern((op, args, j))
            root[d] = rts
    return out
