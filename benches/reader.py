"""Reader throughput: 100 files x 10 spec-sized defns (the spec's mlp and attention).

Usage: python benches/reader.py   (prints CPU time, best of five)
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from test_reader_units import corpus  # noqa: E402

from kinac.reader import parse_file  # noqa: E402


def main() -> None:
    texts = corpus(100, 10)
    best = float("inf")
    for _ in range(5):
        start = time.process_time()
        results = [parse_file(f"f{i}.kina", t) for i, t in enumerate(texts)]
        best = min(best, time.process_time() - start)
        assert all(len(r.defns) == 10 and not r.diagnostics for r in results)
    kb = sum(map(len, texts)) / 1e3
    print(
        f"reader: 100 files x 10 defns ({kb:.0f} kB): {best * 1e3:.0f} ms CPU (best of 5), "
        f"{kb / best / 1e3:.2f} MB/s"
    )


if __name__ == "__main__":
    main()
