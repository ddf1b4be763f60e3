# kinac-bench: gpu
"""kinac's NCCL collectives against the same NCCL call made bare and through nccl4py's own API.

    PYTHONPATH=. python3 benches/nccl.py --gpu --out DIR                (one GPU: a world of one)
    kinac launch -n 2 -- python3 benches/nccl.py --gpu --out DIR        (2 GPUs; -n 4: 4)

Every rank joins the rendezvous (alone, one in-process when not launched), builds the world
communicator (:func:`kinac.rt.comm.nccl.world`) on its GPU, and for f32 buffers of 1 MiB to
1 GiB times, on one stream with CUDA events (median of rounds, the variants interleaved):

- ``kinac``: ``NcclComm.all_reduce(x, r, stream=s)`` (kinac's checks, then one NCCL call on the
  buffers' addresses), and its all-gather, reduce-scatter and all-to-all (grouped send/recv)
  moving the same bytes;
- ``bare``: nccl4py's low-level ``all_reduce(ptr, ptr, count, float32, sum, comm, stream)``,
  the NCCL call alone;
- ``nccl4py``: nccl4py's ``nccl.core.Communicator.allreduce`` on the same buffers (resolved
  through cuda-core's DLPack view), when its ``nccl.core`` imports;
- ``kinac (graph)`` / ``bare (graph)``: the same calls captured into one CUDA graph and
  replayed: device time alone, without Python's enqueue cost.

Bus bandwidth as nccl-tests counts it: algorithm bandwidth (bytes / time) times 2(n-1)/n for
all-reduce, (n-1)/n for the others; with one rank the factor is 0 (nothing crosses a link), so
the table gives the algorithm bandwidth too: on one GPU an out-of-place collective is NCCL's
device copy, and the comparison says whether kinac adds anything to it. Rank 0 writes
``nccl_bench.md`` / ``.json`` under ``--out`` and prints the table.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
# run as a script, this file's directory heads sys.path, and this file would then be the
# `nccl` that kinac imports nccl4py's bindings from: drop it
sys.path[:] = [str(ROOT)] + [p for p in sys.path if Path(p or ".").resolve() != ROOT / "benches"]

MIB = 1 << 20
SIZES = (1 * MIB, 4 * MIB, 16 * MIB, 64 * MIB, 256 * MIB, 1024 * MIB)
FACTORS = {"all-reduce": 2.0, "all-gather": 1.0, "reduce-scatter": 1.0, "all-to-all": 1.0}


def _env() -> Any:
    """The launch's environment, or a world of one of this process's own."""
    from kinac.rt.comm.launch import free_port
    from kinac.rt.comm.rendezvous import DistEnv

    env = DistEnv.from_env()
    if env is None:
        env = DistEnv(0, 1, 0, "127.0.0.1", free_port(), 60.0)
    return env


def _timed(cuda: Any, stream: Any, fn: Callable[[], None], iters: int, rounds: int) -> list[float]:
    """Milliseconds per call of ``fn`` (which enqueues on ``stream``), one value per round."""
    fn()
    stream.synchronize()
    out = []
    for _ in range(rounds):
        a, b = cuda.Event(), cuda.Event()
        a.record(stream)
        for _ in range(iters):
            fn()
        b.record(stream)
        b.synchronize()
        out.append(a.elapsed_ms(b) / iters)
    return out


def _graphed(cuda: Any, stream: Any, fn: Callable[[], None], iters: int, rounds: int) -> Any:
    """Per-call milliseconds of ``iters`` calls of ``fn`` captured into one CUDA graph."""
    fn()
    stream.synchronize()

    def seq(_: Any) -> None:
        for _ in range(iters):
            fn()

    graph = cuda.capture(seq, stream, name="nccl-bench")
    if not graph.captured:
        return f"capture failed: {graph.fallback_reason}"
    out = []
    for _ in range(rounds + 1):
        a, b = cuda.Event(), cuda.Event()
        a.record(stream)
        graph.replay()
        b.record(stream)
        b.synchronize()
        out.append(a.elapsed_ms(b) / iters)
    graph.close()
    return out[1:]


def _core_comm(comm: Any) -> Any:
    """nccl4py's own ``Communicator`` over kinac's communicator handle, or why not."""
    try:
        from kinac.rt.comm.nccl import nccl_core

        core = nccl_core()
        h = comm.handle
        ptr = getattr(h, "handle", None)  # the binding's Comm: its ncclComm_t as an int
        ptr = int(ptr if ptr is not None else h)
        return core, core.Communicator(ptr)
    except Exception as e:  # noqa: BLE001 - reported in the table
        return None, f"{type(e).__name__}: {e}"


def run(args: argparse.Namespace) -> int:
    from kinac.rt import cuda
    from kinac.rt.comm import nccl, tcp
    from kinac.rt.comm.device_run import CudaOps

    env = _env()
    cuda.get_device(0)  # kinac launch gives each rank one GPU
    ops = CudaOps()
    client = tcp.process_client(env)
    n = env.world_size
    t0 = time.perf_counter()
    comm = nccl.world((n,), ("x",), client, alloc=ops.empty)
    lib = comm._lib  # nccl4py's bindings, as kinac loaded them
    init_s = time.perf_counter() - t0
    stream = cuda.Stream()
    core, core_comm = _core_comm(comm)
    rows: list[dict[str, Any]] = []
    sizes = [s for s in SIZES if s <= args.max_mib * MIB]
    for nbytes in sizes:
        row = _one_size(nbytes, comm, ops, stream, (core, core_comm), args)
        rows.append(row)
        print(_line(row), flush=True)
    client.barrier()
    info = {
        "ranks": n,
        "init_s": init_s,
        "nccl4py_core": None if core is not None else str(core_comm),
        "nccl_version": _version(lib),
        "iters": args.iters,
        "rounds": args.rounds,
        "rows": rows,
    }
    if env.rank == 0 and args.out:
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        (out / "nccl_bench.json").write_text(json.dumps(info, indent=1))
        (out / "nccl_bench.md").write_text(_table(info))
        print(_table(info))
    nccl.forget_worlds()
    tcp.close_process_client()
    return 0


def _one_size(
    nbytes: int, comm: Any, ops: Any, stream: Any, core: tuple[Any, Any], args: Any
) -> dict[str, Any]:
    """One row of the table: every variant at ``nbytes`` (f32), interleaved over rounds."""
    from kinac.rt import cuda
    from kinac.rt.cuda import driver

    n, lib, d = comm.size, comm._lib, driver.api()
    count = nbytes // 4
    x, r = ops.empty((count,), "float32"), ops.empty((count,), "float32")
    for t in (x, r):
        driver.check("cuMemsetD8", d.cuMemsetD8(t.ptr, 0, nbytes))
    part, r_part = ops.view(x, (count // n,)), ops.view(r, (count // n,))
    h, sh = comm.handle, stream.handle
    variants: dict[str, Callable[[], None]] = {
        "kinac": lambda: comm.all_reduce(x, r, stream=stream),
        "bare": lambda: lib.all_reduce(x.ptr, r.ptr, count, 7, 0, h, sh),
        "all-gather": lambda: comm.all_gather(part, r, stream=stream),
        "reduce-scatter": lambda: comm.reduce_scatter(x, r_part, stream=stream),
        "all-to-all": lambda: comm.all_to_all(x, r, stream=stream),
    }
    mod, core_comm = core
    if mod is not None:
        variants["nccl4py"] = lambda: core_comm.allreduce(x, r, mod.SUM, stream=sh)
    times: dict[str, list[float]] = {k: [] for k in variants}
    errors: dict[str, str] = {}
    for _ in range(args.rounds):  # interleaved: drift hits every variant alike
        for k, fn in variants.items():
            if k in errors:
                continue
            try:
                times[k] += _timed(cuda, stream, fn, args.iters, 1)
            except Exception as e:  # noqa: BLE001 - reported in the table
                errors[k] = f"{type(e).__name__}: {e}"
    del comm.log[:]
    row: dict[str, Any] = {"bytes": nbytes, "ranks": n, "errors": errors}
    for k, v in times.items():
        if v:
            row[f"{k}_ms"] = statistics.median(v)
    for k, fn in (("kinac_graph", variants["kinac"]), ("bare_graph", variants["bare"])):
        try:
            got = _graphed(cuda, stream, fn, args.iters, args.rounds)
            if isinstance(got, str):
                errors[k] = got
            else:
                row[f"{k}_ms"] = statistics.median(got)
        except Exception as e:  # noqa: BLE001
            errors[k] = f"{type(e).__name__}: {e}"
    del comm.log[:]
    return row


def _version(lib: Any) -> Any:
    try:
        return int(lib.get_version())
    except Exception as e:  # noqa: BLE001
        return str(e)


def _bw(nbytes: int, ms: float | None) -> str:
    return "-" if not ms else f"{nbytes / ms / 1e6:.1f}"


def _line(row: dict[str, Any]) -> str:
    keys = [k for k in row if k.endswith("_ms")]
    return f"{row['bytes'] // MIB} MiB: " + ", ".join(
        f"{k[:-3]} {row[k] * 1e3:.1f} us" for k in keys
    )


def _table(info: dict[str, Any]) -> str:
    n = info["ranks"]
    lines = [
        f"NCCL f32, {n} rank(s), NCCL {info['nccl_version']}, init {info['init_s']:.2f} s; "
        f"us per call (median of {info['rounds']} rounds x {info['iters']} calls); "
        f"algbw GB/s in brackets; busbw = algbw x {2 * (n - 1) / n:g} (all-reduce)",
        "",
        "| size | kinac all-reduce | bare NCCL | nccl4py core | kinac (graph) | bare (graph) "
        "| all-gather | reduce-scatter | all-to-all | kinac / bare (eager, graph) |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for row in info["rows"]:
        b = row["bytes"]
        cells = []
        for k in ("kinac", "bare", "nccl4py", "kinac_graph", "bare_graph"):
            ms = row.get(f"{k}_ms")
            cells.append("-" if ms is None else f"{ms * 1e3:.1f} ({_bw(b, ms)})")
        for k in ("all-gather", "reduce-scatter", "all-to-all"):
            ms = row.get(f"{k}_ms")
            cells.append("-" if ms is None else f"{ms * 1e3:.1f} ({_bw(b, ms)})")
        ratios = []
        for k, ref in (("kinac", "bare"), ("kinac_graph", "bare_graph")):
            a, c = row.get(f"{k}_ms"), row.get(f"{ref}_ms")
            ratios.append(f"{a / c:.2f}" if a and c else "-")
        cells.append(", ".join(ratios))
        lines.append(f"| {b // MIB} MiB | " + " | ".join(cells) + " |")
    errs = {k: v for row in info["rows"] for k, v in row["errors"].items()}
    if info.get("nccl4py_core"):
        errs["nccl4py"] = info["nccl4py_core"]
    lines += [""] + [f"- {k}: {v}" for k, v in errs.items()]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--gpu", action="store_true", help="run on the GPU (required)")
    p.add_argument("--out", default=os.environ.get("OUT", ""), help="directory for the results")
    p.add_argument("--iters", type=int, default=20)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--max-mib", type=int, default=1024)
    args = p.parse_args(argv)
    if not args.gpu:
        print("benches/nccl.py measures NCCL on GPUs: pass --gpu", file=sys.stderr)
        return 2
    return run(args)


if __name__ == "__main__":
    raise SystemExit(main())
