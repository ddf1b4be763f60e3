"""Same-process A/B of the host back end's speed settings (issue 14), for a shared machine.

    python benches/cpu_ab.py [--workload block|mlp|attention] [--reps N] [VARIANT ...]

Two runs of ``benches/cpu.py`` on two trees see different load; this one loads the same
entry several times in one process, each bound to a task pool of its own built with other
settings, and alternates calls batch by batch. A ``VARIANT`` is ``name:key=value,...`` with
keys ``spin_ticks`` (how long pool waiters spin before they sleep, in TSC ticks; 0: sleep at
once), ``spin_yield`` (1: the spin yields the core every 64 pauses), ``min_rows`` (the thinnest block of a split BLAS product), ``min_flops`` (below this
``m*n*k`` a product is not split), ``balanced`` (0: the block rule until 2026-12-02, blocks
of at least ``min_rows`` and a thinner last one, instead of equal shares per thread) and ``narrow`` (1: 256-bit vector loops, as before issue 14);
``sides`` (0: every pool thread takes a job's next block from the bottom, as before
2026-12-02d; 1: the caller from the bottom, the workers from the top, ``pool.SIDES``);
``avoid`` (0: a worker stays wherever the scheduler put it, as before 2026-12-02e; 1: a worker
that starts a job on the caller's CPU moves off it, ``pool_place.AVOID``); ``hint`` (0: an
entry call does not tell the pool it is coming, as before 2026-12-02e, ``pool.HINT``);
``hint_wakes`` (1: the hint wakes sleeping workers too, ``pool.HINT_WAKES``);
``causal`` (0: attention's products compute every key, as before 2026-12-02 03:50 UTC),
``causal_rows`` (the rows of a causal product's blocks, ``causal_blocks.CAUSAL_ROWS``),
``par_min`` (kernels with fewer elements run whole, ``kina_to_loops.PAR_MIN_ELEMENTS``);
``interleave`` (1: LLVM interleaves vector loops as it likes, as before 2026-12-02d; 0: one
vector per iteration, ``llvm_to_text.INTERLEAVE_ONCE``); ``fold`` (0: attention's ``P @ V`` is transposed to ``[B, S, H*Dh]`` by a map kernel, as
before 2026-12-02d, ``gemm_out.ENABLED``); ``rowfuse`` (0: a row reduction stays a kernel of its own before the map reading it, as
before 2026-12-02d, ``row_fuse.ENABLED``); ``softmax_keep`` (0: the softmax
computes a scaled/masked input in both passes, as before 2026-12-02d,
``kernel_loops.KEEP_SOFTMAX_INPUT``);
``blas_threads=N`` (N > 1: the products call OpenBLAS directly with its own N threads instead
of splitting them on the pool); a key left out takes this tree's setting. Default: ``before:spin_ticks=0`` (waiters sleep at
once, as until 2026-12-02) against ``now:`` (this tree). Prints the best, 25th-percentile and
median wall time per call, and the CPU time per call (both threads), which load disturbs less.
``--settle S`` pauses S seconds and makes one untimed call before each batch, as
``benches/cpu.py`` does (pool workers asleep at the start of each batch).
"""

from __future__ import annotations

import argparse
import ctypes
import sys
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import numpy as np  # noqa: E402
from cpu import BLOCK, inputs  # noqa: E402

from kinac.codegen.llvm import compile_object, host_target, jit_load  # noqa: E402
from kinac.codegen.target import TargetSpec  # noqa: E402
from kinac.ir import lower_graph  # noqa: E402
from kinac.ir.host import (  # noqa: E402
    causal,
    causal_blocks,
    gemm_out,
    kernel_loops,
    kina_to_loops,
    llvm_to_text,
    row_fuse,
)
from kinac.ir.host.causal_blocks import CAUSAL_ROWS  # noqa: E402
from kinac.ir.host.kina_to_loops import PAR_MIN_ELEMENTS  # noqa: E402
from kinac.ir.testing import attention_graph, block_graph, mlp_graph  # noqa: E402
from kinac.rt.host import pool  # noqa: E402
from kinac.rt.host.blas import _loaded_openblas, _thread_control, raw_gemms  # noqa: E402
from kinac.rt.host.entry import HostEntry  # noqa: E402

_EXPORTS = ("kinac_pool_worker", "kinac_parallel", "kinac_sgemm", "kinac_dgemm")
_POOL_KEYS = (
    "spin_ticks",
    "min_rows",
    "min_flops",
    "spin_yield",
    "balanced",
    "sides",
    "avoid",
    "hint_wakes",
)
_OTHER_KEYS: tuple[str, ...] = (
    "narrow",
    "blas_threads",
    "causal",
    "causal_rows",
    "par_min",
    "interleave",
)
_OTHER_KEYS += ("softmax_keep", "fold", "rowfuse", "hint")


def parse_variant(spec: str) -> tuple[str, dict[str, int]]:
    """``name:key=value,...`` -> (name, settings)."""
    name, _, rest = spec.partition(":")
    out: dict[str, int] = {}
    for part in filter(None, rest.split(",")):
        key, _, value = part.partition("=")
        if key not in (*_POOL_KEYS, *_OTHER_KEYS):
            raise SystemExit(f"cpu_ab: unknown setting {key!r} in {spec!r}")
        out[key] = int(value)
    return name, out


def make_pool(settings: dict[str, int]) -> dict[str, int]:
    """A pool of its own (``thread_count() - 1`` workers) built with ``settings``."""
    raw = raw_gemms()
    blas = {"kinac_blas_sgemm": raw["kinac_sgemm"], "kinac_blas_dgemm": raw["kinac_dgemm"]}
    ir = pool.pool_ir(202, **{k: v for k, v in settings.items() if k in _POOL_KEYS})
    image = jit_load(compile_object(ir, host_target()), blas, (*_EXPORTS, "kinac_pool_hint"))
    pool._IMAGES.append(image)
    worker = ctypes.CFUNCTYPE(None)(image.addresses["kinac_pool_worker"])
    for _ in range(pool.thread_count() - 1):
        threading.Thread(target=worker, daemon=True).start()
    return {n: image.addresses[n] for n in (*_EXPORTS, "kinac_pool_hint")}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workload", choices=("block", "mlp", "attention"), default="block")
    ap.add_argument("--reps", type=int, default=60)
    ap.add_argument(
        "--settle",
        type=float,
        default=0.0,
        help="seconds of pause, then one untimed call, before each batch (as benches/cpu.py)",
    )
    ap.add_argument("variants", nargs="*", default=["before:spin_ticks=0", "now:"])
    args = ap.parse_args()
    pool.runtime_symbols()  # OpenBLAS single-threaded, as in a kinac call
    now = host_target()
    narrow = TargetSpec(now.triple, now.cpu, now.features.replace(",-prefer-256-bit", ""))
    if args.workload == "attention":
        g = attention_graph(*(BLOCK[k] for k in ("b", "s", "d", "h", "kv")))
    else:
        g = block_graph(**BLOCK) if args.workload == "block" else mlp_graph(4, 128, 256, 1024)
    lowered: dict[tuple[bool, int, int, bool, bool, bool, bool], Any] = {}
    entries: dict[str, Any] = {}
    blas_threads: dict[str, int] = {}
    for spec in args.variants:
        name, settings = parse_variant(spec)
        key = (
            bool(settings.get("causal", 1)),
            settings.get("causal_rows", CAUSAL_ROWS),
            settings.get("par_min", PAR_MIN_ELEMENTS),
            not settings.get("interleave", 0),
            bool(settings.get("softmax_keep", 1)),
            bool(settings.get("fold", 1)),
            bool(settings.get("rowfuse", 1)),
        )
        if key not in lowered:
            causal.ENABLED, causal_blocks.CAUSAL_ROWS, kina_to_loops.PAR_MIN_ELEMENTS = key[:3]
            llvm_to_text.INTERLEAVE_ONCE, kernel_loops.KEEP_SOFTMAX_INPUT = key[3:5]
            gemm_out.ENABLED, row_fuse.ENABLED = key[5:]
            lowered[key] = lower_graph(g)
            causal.ENABLED, causal_blocks.CAUSAL_ROWS = True, CAUSAL_ROWS
            kina_to_loops.PAR_MIN_ELEMENTS = PAR_MIN_ELEMENTS
            llvm_to_text.INTERLEAVE_ONCE = kernel_loops.KEEP_SOFTMAX_INPUT = True
            gemm_out.ENABLED = row_fuse.ENABLED = True
        lw = lowered[key]
        syms = make_pool(settings)
        if settings.get("blas_threads", 1) > 1:
            syms = dict(syms, kinac_sgemm=raw_gemms()["kinac_sgemm"])
            blas_threads[name] = settings["blas_threads"]
        bound = {n: a for n, a in syms.items() if n in lw.library_calls}
        target = narrow if settings.get("narrow") else now
        image = jit_load(compile_object(lw.llvm_ir, target), bound, (lw.symbol,))
        hint = pool.hint_function(syms["kinac_pool_hint"]) if settings.get("hint", 1) else None
        entries[name] = HostEntry(lw, image, hint=hint)
        if name in blas_threads:
            entries[name]._blas = False  # not inside single_threaded_blas: its own threads
    control = _thread_control(_loaded_openblas())  # type: ignore[arg-type]
    ins = inputs(g)
    first = None
    times: dict[str, list[tuple[float, float]]] = {k: [] for k in entries}
    for _ in range(args.reps):
        for name, e in entries.items():
            if control is not None:
                control[1](blas_threads.get(name, 1))
            got = e(*ins)
            if first is None:
                first = got
            assert np.allclose(got, first, rtol=1e-4, atol=1e-4), name
            if args.settle > 0:
                time.sleep(args.settle)
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
            f"{name:10} wall best {w[0]:.3f} p25 {w[q]:.3f} median {w[len(w) // 2]:.3f}   "
            f"cpu best {c[0]:.3f} p25 {c[q]:.3f}"
        )


if __name__ == "__main__":
    main()
