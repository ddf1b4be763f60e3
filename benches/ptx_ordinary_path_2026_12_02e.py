#!/usr/bin/env python3
"""Instructions of a PTX kernel on its ordinary path: a forward branch over a block holding
f64 code (the rare slow path) counts as taken, so that block's lines are not counted.

Usage: ``python3 benches/ptx_ordinary_path_2026_12_02e.py KERNEL.ptx`` (f32 sin/cos, task M).
"""

from __future__ import annotations

import re
import sys


def is_instr(line: str) -> bool:
    return bool(line) and not line.startswith(("//", ".", "{", "}", "$")) and not line.endswith(":")


def main(path: str) -> None:
    with open(path) as f:
        lines = [s.strip() for s in f.read().splitlines()]
    total = sum(1 for s in lines if is_instr(s))
    fast, i = 0, 0
    while i < len(lines):
        line = lines[i]
        if is_instr(line):
            fast += 1
            m = re.match(r"@%p\d+ bra\s+(\$\S+);", line)
            if m:
                end = lines.index(m.group(1) + ":", i)
                if any(".f64" in s for s in lines[i:end]):
                    i = end
        i += 1
    print("total", total, "ordinary path", fast)


if __name__ == "__main__":
    main(sys.argv[1])
