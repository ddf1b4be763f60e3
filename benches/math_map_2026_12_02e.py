"""Host micro-run: one f32 elementwise map (``sin``, ``cos``, ``exp``) over 1M floats, CPU only.

Why: the large-argument sin/cos branch and the subnormal ``exp`` tail (2026-12-02e) must not
slow the ordinary range. Prints the best and median of ``--repeat`` timed calls (after warm-up)
per primitive and input range, in ms. Run before and after a change on the same machine:
``python3 benches/math_map_2026_12_02e.py [--prims sin,cos,exp] [--fused sum_cos_rows,sin_mul]
[--repeat 200] [--root TREE]``
(``--root``: the kinac tree to import, e.g. a ``git archive`` of the commit before).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np

N = 1 << 20
RANGES = {
    "sin": {"ordinary [-100, 100]": (-100.0, 100.0)},
    "cos": {"ordinary [-100, 100]": (-100.0, 100.0)},
    "exp": {"ordinary [-80, 80]": (-80.0, 80.0)},
}


def _time(fn: object, x: np.ndarray, repeat: int) -> tuple[float, float]:
    for _ in range(10):
        fn(x)  # type: ignore[operator]
    ts = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn(x)  # type: ignore[operator]
        ts.append((time.perf_counter() - t0) * 1e3)
    return min(ts), statistics.median(ts)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--prims", default="sin,cos,exp")
    ap.add_argument("--repeat", type=int, default=200)
    ap.add_argument("--fused", default="", help="also sum_cos_rows,sin_mul over 1024x1024")
    ap.add_argument("--root", default=str(Path(__file__).resolve().parents[1]), help="kinac tree")
    args = ap.parse_args()
    sys.path.insert(0, args.root)
    from kinac.graph_build import compile_graph
    from kinac.ir.testing import GraphBuilder

    rng = np.random.default_rng(0)
    x2 = rng.uniform(-100, 100, (1024, 1024)).astype(np.float32)
    y2 = rng.uniform(-1, 1, (1024, 1024)).astype(np.float32)
    for name in args.fused.split(",") if args.fused else []:
        g = GraphBuilder(name)
        xs, ys = g.param("x", "f32", (1024, 1024)), g.param("y", "f32", (1024, 1024))
        if name == "sum_cos_rows":
            out = g.reduce("reduce_sum", g.unary("cos", xs), 1)
        else:  # sin_mul
            out = g.binary("mul", g.unary("sin", xs), ys)
        fn2 = compile_graph(g.build(out))
        best, med = _time(lambda x, f=fn2: f(x, y2), x2, args.repeat)
        print(f"{name:27s} best {best:7.3f} ms  median {med:7.3f} ms")
    for prim in args.prims.split(","):
        g = GraphBuilder(f"{prim}_map")
        fn = compile_graph(g.build(g.unary(prim, g.param("x", "f32", (N,)))))
        for label, (lo, hi) in RANGES[prim].items():
            x = rng.uniform(lo, hi, N).astype(np.float32)
            best, med = _time(fn, x, args.repeat)
            print(f"{prim:4s} {label:22s} best {best:7.3f} ms  median {med:7.3f} ms")


if __name__ == "__main__":
    main()
