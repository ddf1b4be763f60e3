"""The table of ``scripts/before_after.sh``: every number both trees printed, with its ratio.

    python3 scripts/before_after_table.py OUTDIR ROUNDS

Why generic: the benches print markdown tables (``benches/gpu.py``) or aligned text
(``benches/cpu.py``), and the "before" tree may print fewer rows than "after". A line's
*shape* is the line with its numbers blanked (a table row: its text cells); lines of the same
shape (and the same occurrence of that shape) in the two logs are the same row, and their
numbers pair up by column name (a column only one tree printed is left out). A markdown row's column names come from its table's header; a text line's numbers
are named by the word before each, or, in an aligned text table (columns two or more spaces
apart under a header line without numbers), by that header. Rows only one tree printed are listed
after the table. Each value is the median over the rounds (the benches already keep the best
batch inside a run).
"""

from __future__ import annotations

import re
import statistics
import sys
from pathlib import Path

NUM = re.compile(r"(?<![\w.])[-+]?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?(?![\w.])")
CELL_NUM = re.compile(
    r"^\s*\**([-+]?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?)\**\s*(x|%|ms|us|µs|s)?\**\s*$"
)


def rows_of(text: str) -> dict[tuple[str, int], list[tuple[str, float]]]:
    """(row label, occurrence) -> [(column name, value)] for each line that holds numbers."""
    out: dict[tuple[str, int], list[tuple[str, float]]] = {}
    seen: dict[str, int] = {}
    header: list[str] = []
    text_header = ""
    for line in text.splitlines():
        s = line.strip()
        if s.startswith("|") and s.endswith("|"):
            cells = [c.strip() for c in s.strip("|").split("|")]
            if all(set(c) <= set("-: ") for c in cells):
                continue
            nums = [(i, CELL_NUM.match(c)) for i, c in enumerate(cells)]
            vals = [(i, float(m.group(1))) for i, m in nums if m]
            if not vals:
                header = cells
                continue
            label = " | ".join(c for i, c in enumerate(cells) if not CELL_NUM.match(c))
            named = [(header[i] if i < len(header) else f"#{i}", v) for i, v in vals]
        elif text_header and len(cells := list(re.finditer(r"\S+(?: \S+)*", line))) >= 3:
            # an aligned text table under a header line without numbers: the row is its first
            # cell; a number's column is the header's text between the cell before it and its end
            vals = []
            prev_end = cells[0].end()
            for c in cells[1:]:
                m = CELL_NUM.match(c.group())
                if m:
                    above = re.split(r"\s{2,}", text_header[prev_end : c.end()].strip())[-1]
                    vals.append((above or f"col {c.start()}", float(m.group(1))))
                prev_end = c.end()
            if not vals:
                continue
            label = cells[0].group()
            named = vals
        else:
            found = list(NUM.finditer(s))
            if not found:
                header = []
                text_header = line
                continue
            label = re.sub(r"\s+", " ", NUM.sub("#", s))  # aligned columns' widths vary
            named = []
            for k, m in enumerate(found):
                words = re.findall(r"[A-Za-z_][\w/-]*", s[: m.start()])
                named.append((f"{words[-1] if words else ''} #{k}", float(m.group())))
        n = seen.get(label, 0)
        seen[label] = n + 1
        out[(label, n)] = named
    return out


def main() -> int:
    outdir, rounds = Path(sys.argv[1]), int(sys.argv[2])
    runs: dict[str, list[dict[tuple[str, int], list[tuple[str, float]]]]] = {}
    for side in ("before", "after"):
        runs[side] = []
        for i in range(1, rounds + 1):
            log = outdir / f"{side}-{i}" / "log.txt"
            if log.is_file():
                runs[side].append(rows_of(log.read_text(errors="replace")))
    both = (
        [k for k in runs["after"][0] if all(k in r for s in runs.values() for r in s)]
        if all(runs.values())
        else []
    )
    print(
        f"before: {(outdir / 'before.txt').read_text().strip() if (outdir / 'before.txt').is_file() else '?'}"
    )
    after = outdir / "after.txt"
    print(f"after: {after.read_text().strip() if after.is_file() else '?'}")
    print(f"rounds: {rounds}\n")
    print("| row | value | before | after | after / before |")
    print("|---|---|---|---|---|")
    for key in both:
        for name in [n for n, _ in runs["after"][0][key]]:
            # by column name: a newer bench may print other columns (or the same in another order)
            b = [v for r in runs["before"] for n, v in r[key] if n == name][:rounds]
            a = [v for r in runs["after"] for n, v in r[key] if n == name][:rounds]
            if not a or not b:
                continue
            bm, am = statistics.median(b), statistics.median(a)
            ratio = f"{am / bm:.3f}" if bm else "-"
            label = key[0] if key[1] == 0 else f"{key[0]} ({key[1] + 1})"
            print(f"| {label[:90]} | {name} | {bm:.4g} | {am:.4g} | {ratio} |")
    for side in ("before", "after"):
        only = [k for k in (runs[side][0] if runs[side] else {}) if k not in both]
        if only:
            print(f"\nrows only in {side}: " + "; ".join(k[0][:60] for k in only[:20]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
