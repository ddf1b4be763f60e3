"""Same-process A/B of the host back end's speed settings (issue 14), for a loaded machine.

    python benches/cpu_ab.py [--workload block|mlp] [--reps N]

Two runs of ``benches/cpu.py`` on two trees see different load; this one loads the same
entry twice in one process and alternates calls batch by batch: ``before`` is compiled with
256-bit vector loops and calls a second task pool whose split products use blocks of 8 rows
and up (the settings before issue 14), ``now`` with this tree's settings (512-bit loops on
AVX-512, blocks of at least ``MIN_BLOCK_ROWS``). Prints the best, 25th-percentile and median
wall time per call, and the CPU time per call (both threads), which load disturbs less.
"""

from __future__ import annotations

import argparse
import ctypes
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from cpu import BLOCK, inputs  # noqa: E402

from kinac.codegen.llvm import compile_object, host_target, jit_load  # noqa: E402
from kinac.codegen.target import TargetSpec  # noqa: E402
from kinac.ir import lower_graph  # noqa: E402
from kinac.ir.testing import block_graph, mlp_graph  # noqa: E402
from kinac.rt.host import pool  # noqa: E402
from kinac.rt.host.blas import raw_gemms  # noqa: E402
from kinac.rt.host.entry import HostEntry  # noqa: E402

_EXPORTS = ("kinac_pool_worker", "kinac_parallel", "kinac_sgemm", "kinac_dgemm")


def old_pool() -> dict[str, int]:
    """A second pool (one worker) whose products split as before issue 14."""
    raw = raw_gemms()
    blas = {"kinac_blas_sgemm": raw["kinac_sgemm"], "kinac_blas_dgemm": raw["kinac_dgemm"]}
    keep, pool.MIN_BLOCK_ROWS = pool.MIN_BLOCK_ROWS, 8
    try:
        ir = pool.pool_ir(202)
    finally:
        pool.MIN_BLOCK_ROWS = keep
    image = jit_load(compile_object(ir, host_target()), blas, _EXPORTS)
    pool._IMAGES.append(image)
    worker = ctypes.CFUNCTYPE(None)(image.addresses["kinac_pool_worker"])
    for _ in range(pool.thread_count() - 1):
        threading.Thread(target=worker, daemon=True).start()
    return {n: image.addresses[n] for n in _EXPORTS}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workload", choices=("block", "mlp"), default="block")
    ap.add_argument("--reps", type=int, default=60)
    args = ap.parse_args()
    now = host_target()
    narrow = TargetSpec(now.triple, now.cpu, now.features.replace(",-prefer-256-bit", ""))
    g = block_graph(**BLOCK) if args.workload == "block" else mlp_graph(4, 128, 256, 1024)
    lw = lower_graph(g)
    configs = {"before": (old_pool(), narrow), "now": (pool.runtime_symbols(), now)}
    entries = {}
    for name, (syms, target) in configs.items():
        bound = {n: a for n, a in syms.items() if n in lw.library_calls}
        image = jit_load(compile_object(lw.llvm_ir, target), bound, (lw.symbol,))
        entries[name] = HostEntry(lw, image)
    ins = inputs(g)
    times: dict[str, list[tuple[float, float]]] = {k: [] for k in entries}
    for _ in range(args.reps):
        for name, e in entries.items():
            e(*ins)
            t, c = time.perf_counter(), time.process_time()
            for _ in range(3):
                e(*ins)
            times[name].append(((time.perf_counter() - t) / 3, (time.process_time() - c) / 3))
    print(f"{args.workload}, {args.reps} alternations, ms per call")
    for name, ts in times.items():
        w = sorted(x[0] * 1e3 for x in ts)
        c = sorted(x[1] * 1e3 for x in ts)
        q = len(w) // 4
        print(
            f"{name:7} wall best {w[0]:.3f} p25 {w[q]:.3f} median {w[len(w) // 2]:.3f}   "
            f"cpu best {c[0]:.3f} p25 {c[q]:.3f}"
        )


if __name__ == "__main__":
    main()
