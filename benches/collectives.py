# kinac-bench: gpu
"""kinac's NCCL collectives against the same NCCL call made bare and through nccl4py's own API.

    PYTHONPATH=. python3 benches/collectives.py --gpu --out DIR                (one GPU: a world of one)
    PYTHONPATH=. python3 benches/collectives.py --host-overhead                (CPU: kinac's Python)
    kinac launch -n 2 -- python3 benches/collectives.py --gpu --out DIR        (2 GPUs; -n 4: 4)

Every rank joins the rendezvous (alone, one in-process when not launched), builds the world
communicator (:func:`kinac.rt.comm.nccl.world`) on its GPU, and for f32 buffers of 1 MiB to
1 GiB times, on one stream with CUDA events (median of rounds, the variants interleaved):

- ``kinac``: ``NcclComm.all_reduce(x, r, stream=s)`` into a preallocated receive buffer, as
  the bare call does (kinac's checks, cached per call layout, then one NCCL call on the
  buffers' addresses), and its all-gather, reduce-scatter and all-to-all (grouped send/recv)
  moving the same bytes;
- ``kinac (allocating)``: ``NcclComm.all_reduce(x, stream=s)``, the form a program's steps use
  (:mod:`kinac.rt.comm.device_run`): the same call plus a receive buffer from the pool per call,
  which the bare row does not do (so not its like: shown apart, not in the ratio);
- ``bare``: nccl4py's low-level ``all_reduce(ptr, ptr, count, float32, sum, comm, stream)``,
  the NCCL call alone;
- ``nccl4py``: nccl4py's ``nccl.core.Communicator.allreduce`` on the same buffers (resolved
  through cuda-core's DLPack view), when its ``nccl.core`` imports;
- ``kinac (graph)`` / ``bare (graph)``: the same calls captured into one CUDA graph and
  replayed: device time alone, without Python's enqueue cost.

Eager times are CUDA-event time per call over a burst of calls; below ~16 MiB on one GPU the
device finishes each call before the host has queued the next, so they are the host's enqueue
cost, which the table also gives directly (``host us/call``: wall time of the burst's
enqueue loop, kinac and bare): that is where kinac's Python shows (issue 13: 23 vs 7 us per
call before the per-layout cache). Sizes up to 16 MiB get ``--small-iters`` calls per burst.

Bus bandwidth as nccl-tests counts it: algorithm bandwidth (bytes / time) times 2(n-1)/n for
all-reduce, (n-1)/n for the others; with one rank the factor is 0 (nothing crosses a link), so
the table gives the algorithm bandwidth too: on one GPU an out-of-place collective is NCCL's
device copy, and the comparison says whether kinac adds anything to it.

Then the scaling row at this world size (``--no-scaling`` skips it): the Megatron block
(``block_small``, f32, ``(mesh tp [N])``) through ``kinac.compile(target='cuda', mesh=N)``
(NCCL, device-resident) against the unsharded GPU block on the same inputs (wall ms per call,
host arrays in and out, and their largest difference), and a training step of ``decoder_1m``
(``kinac train``'s data parallel under a launch, NCCL on the gradients). Rank 0 writes
``nccl_bench.md`` / ``.json`` under ``--out`` and prints the tables.
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
# run as a script, this file's directory heads sys.path; no bench may be named for a package
# (tests/test_bench_names.py), and the bench directory is dropped all the same
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


def _timed(
    cuda: Any, stream: Any, fn: Callable[[], None], iters: int, rounds: int
) -> list[tuple[float, float]]:
    """``(stream ms, host enqueue ms)`` per call of ``fn`` (which enqueues on ``stream``), one
    pair per round: CUDA-event time over ``iters`` calls, and the wall time of the loop that
    queued them."""
    fn()
    stream.synchronize()
    out = []
    for _ in range(rounds):
        a, b = cuda.Event(), cuda.Event()
        a.record(stream)
        t0 = time.perf_counter()
        for _ in range(iters):
            fn()
        host = (time.perf_counter() - t0) * 1e3 / iters
        b.record(stream)
        b.synchronize()
        out.append((a.elapsed_ms(b) / iters, host))
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
    scale: dict[str, Any] = {}
    if args.scaling:
        scale = scaling(env, n, args)
        print(json.dumps(scale), flush=True)
    client.barrier()
    info = {
        "ranks": n,
        "init_s": init_s,
        "nccl4py_core": None if core is not None else str(core_comm),
        "nccl_version": _version(lib),
        "iters": args.iters,
        "small_iters": args.small_iters,
        "rounds": args.rounds,
        "rows": rows,
        "scaling": scale,
        "host_overhead_us": host_overhead(5000, 5),
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
        "kinac_alloc": lambda: comm.all_reduce(x, stream=stream),
        "all-gather": lambda: comm.all_gather(part, r, stream=stream),
        "reduce-scatter": lambda: comm.reduce_scatter(x, r_part, stream=stream),
        "all-to-all": lambda: comm.all_to_all(x, r, stream=stream),
    }
    mod, core_comm = core
    if mod is not None:
        variants["nccl4py"] = lambda: core_comm.allreduce(x, r, mod.SUM, stream=sh)
    iters = args.small_iters if nbytes <= 16 * MIB else args.iters
    times: dict[str, list[tuple[float, float]]] = {k: [] for k in variants}
    errors: dict[str, str] = {}
    for _ in range(args.rounds):  # interleaved: drift hits every variant alike
        for k, fn in variants.items():
            if k in errors:
                continue
            try:
                times[k] += _timed(cuda, stream, fn, iters, 1)
            except Exception as e:  # noqa: BLE001 - reported in the table
                errors[k] = f"{type(e).__name__}: {e}"
            del comm.log[:]
    row: dict[str, Any] = {"bytes": nbytes, "ranks": n, "iters": iters, "errors": errors}
    for k, v in times.items():
        if v:
            row[f"{k}_ms"] = statistics.median(t for t, _ in v)
            row[f"{k}_host_ms"] = statistics.median(h for _, h in v)
    for k, fn in (("kinac_graph", variants["kinac"]), ("bare_graph", variants["bare"])):
        try:
            got = _graphed(cuda, stream, fn, iters, args.rounds)
            if isinstance(got, str):
                errors[k] = got
            else:
                row[f"{k}_ms"] = statistics.median(got)
        except Exception as e:  # noqa: BLE001
            errors[k] = f"{type(e).__name__}: {e}"
    del comm.log[:]
    return row


COL, ROW = "@sharded(axis=1, mesh=tp)", "@sharded(axis=0, mesh=tp)"
MEGATRON = {"wq": COL, "wk": COL, "wv": COL, "wo": ROW, "wg": COL, "wu": COL, "wd": ROW}
BLOCK_SHAPES = {  # block_small: B=4 S=128 D=256 F=704, H=4 KV=2 (Dh 64)
    "x": (4, 128, 256),
    "wn1": (256,),
    "wq": (256, 256),
    "wk": (256, 128),
    "wv": (256, 128),
    "wo": (256, 256),
    "wn2": (256,),
    "wg": (256, 704),
    "wu": (256, 704),
    "wd": (704, 256),
}
WEIGHT_TYPES = {"wq": "[D D]", "wk": "[D (* KV Dh)]", "wv": "[D (* KV Dh)]", "wo": "[D D]"}
WEIGHT_TYPES |= {"wg": "[D F]", "wu": "[D F]", "wd": "[F D]"}


def block_workspace(where: Path, devices: int | None) -> Path:
    """workspaces/transformer, the block's weights annotated for Megatron over ``devices``
    (None: as it is, unsharded)."""
    import shutil

    ws = where / ("plain" if devices is None else f"tp{devices}")
    shutil.copytree(
        ROOT / "workspaces" / "transformer", ws, ignore=shutil.ignore_patterns(".kinac-*")
    )
    if devices is not None:
        src = ws / "block.kina"
        text = src.read_text().replace(
            '(import "ffn.kina")', f'(import "ffn.kina")\n(mesh tp [{devices}])'
        )
        for name, shape in WEIGHT_TYPES.items():
            old = f"({name} : (tensor T {shape}))"
            text = text.replace(old, f"({name} : (tensor T {shape} {MEGATRON[name]}))")
        src.write_text(text)
    return ws


def _median_ms(fn: Callable[[], Any], repeat: int) -> float:
    fn()
    out = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t0)
    return statistics.median(out) * 1e3


def scaling(env: Any, n: int, args: argparse.Namespace) -> dict[str, Any]:
    """The scaling row at this world size: the Megatron block's forward (``kinac.compile(...,
    target='cuda', mesh=N)``, NCCL, host arrays in and out) against the unsharded GPU block,
    and a data-parallel training step of ``decoder_1m`` (``kinac train``'s path under a
    launch: NCCL on the gradients)."""
    import tempfile

    import numpy as np

    import kinac

    for k, v in {  # a world of one of this process's own: the launch's variables
        "RANK": env.rank,
        "LOCAL_RANK": env.local_rank,
        "WORLD_SIZE": n,
        "MASTER_ADDR": env.master_addr,
        "MASTER_PORT": env.master_port,
    }.items():
        os.environ.setdefault(k, str(v))
    tmp = Path(tempfile.mkdtemp(prefix=f"kinac-nccl-bench-{env.rank}-"))
    cache = str(tmp / "cache")  # one per rank: ranks opening one cold cache at once can fail
    rng = np.random.default_rng(0)
    inputs = [
        (rng.standard_normal(s) * (1.0 if len(s) != 2 else 256**-0.5)).astype(np.float32)
        for s in BLOCK_SHAPES.values()
    ]
    dims = {"H": 4, "KV": 2}
    out: dict[str, Any] = {"ranks": n}
    try:
        t0 = time.perf_counter()
        single = kinac.compile(
            str(block_workspace(tmp, None)), "block_small", target=args.target, cache_dir=cache
        )
        sharded = kinac.compile(
            str(block_workspace(tmp, n)), "block_small", target=args.target, mesh=n, cache_dir=cache
        )

        def one() -> Any:
            got = single(*inputs, **dims)
            return np.asarray(got.numpy() if hasattr(got, "numpy") else got)

        want, got = one(), sharded(*inputs, **dims)
        out["block_compile_s"] = time.perf_counter() - t0
        out["block_backend"] = sharded.backend
        out["block_max_abs_diff"] = float(np.max(np.abs(got - want)))
        out["block_collectives"] = {
            f"{k} over {a}": c for (k, a), c in sharded.last_log.counts().items()
        }
        out["block_single_ms"] = _median_ms(one, args.block_calls)
        out["block_sharded_ms"] = _median_ms(lambda: sharded(*inputs, **dims), args.block_calls)
    except Exception as e:  # noqa: BLE001 - reported in the table
        out["block_error"] = f"{type(e).__name__}: {e}"
    try:
        from kinac.train import Trainer

        tr = Trainer(
            ROOT / "workspaces" / "decoder", "decoder_1m", target=args.target, cache_dir=cache
        )
        steps = tr.run(args.train_steps)
        out["train_parallel"] = type(tr.parallel).__name__
        out["train_losses"] = [r.loss for r in steps]
        out["train_step_ms"] = statistics.median(r.seconds for r in steps[1:]) * 1e3
    except Exception as e:  # noqa: BLE001
        out["train_error"] = f"{type(e).__name__}: {e}"
    return out


class _NoOpLib:
    """NCCL bindings that do nothing: the host cost of kinac's Python around the call alone."""

    def all_reduce(self, *a: Any) -> None: ...
    def all_gather(self, *a: Any) -> None: ...
    def reduce_scatter(self, *a: Any) -> None: ...
    def send(self, *a: Any) -> None: ...
    def recv(self, *a: Any) -> None: ...
    def group_start(self) -> None: ...
    def group_end(self) -> None: ...


def host_overhead(calls: int = 20000, repeat: int = 9) -> dict[str, float]:
    """Microseconds per call on the CPU, no GPU needed: kinac's collectives on kinac tensors
    (addresses only: the no-op bindings read nothing) against the same bindings call made bare
    (min of ``repeat`` runs of ``calls`` calls; a world of one, a kinac ``Stream`` handle)."""
    import timeit

    from kinac.rt.comm import nccl
    from kinac.rt.cuda.device import Stream
    from kinac.rt.cuda.tensor import Tensor

    lib, n = _NoOpLib(), 1 << 18
    comm = nccl.NcclComm(lib, object(), (1,), ("x",), ("x",), 0)
    x, r = Tensor(1 << 32, (n,), "float32"), Tensor(2 << 32, (n,), "float32")
    s = Stream.__new__(Stream)  # a handle, no CUDA stream behind it
    s.handle = 7
    h = comm.handle

    def a2a() -> None:
        lib.group_start()
        lib.send(x.ptr, n, 7, 0, h, s.handle)
        lib.recv(r.ptr, n, 7, 0, h, s.handle)
        lib.group_end()

    fns: dict[str, Callable[[], Any]] = {
        "bare all-reduce": lambda: lib.all_reduce(x.ptr, r.ptr, n, 7, 0, h, s.handle),
        "kinac all-reduce": lambda: comm.all_reduce(x, r, stream=s),
        "kinac all-reduce in place": lambda: comm.all_reduce(x, x, stream=s),
        "kinac all-gather": lambda: comm.all_gather(x, r, stream=s),
        "kinac reduce-scatter": lambda: comm.reduce_scatter(x, r, stream=s),
        "bare all-to-all (group of 1 peer)": a2a,
        "kinac all-to-all": lambda: comm.all_to_all(x, r, stream=s),
    }
    out = {}
    for k, fn in fns.items():
        fn()
        out[k] = min(timeit.repeat(fn, number=calls, repeat=repeat)) / calls * 1e6
        del comm.log[:]
    return out


def _version(lib: Any) -> Any:
    try:
        return int(lib.get_version())
    except Exception as e:  # noqa: BLE001
        return str(e)


def _bw(nbytes: int, ms: float | None) -> str:
    return "-" if not ms else f"{nbytes / ms / 1e6:.1f}"


def _line(row: dict[str, Any]) -> str:
    keys = [k for k in row if k.endswith("_ms") and not k.endswith("_host_ms")]
    return f"{row['bytes'] // MIB} MiB: " + ", ".join(
        f"{k[:-3]} {row[k] * 1e3:.1f} us" for k in keys
    )


def _table(info: dict[str, Any]) -> str:
    n = info["ranks"]
    lines = [
        f"NCCL f32, {n} rank(s), NCCL {info['nccl_version']}, init {info['init_s']:.2f} s; "
        f"us per call (median of {info['rounds']} rounds x {info['iters']} calls, "
        f"{info.get('small_iters', info['iters'])} up to 16 MiB); "
        f"algbw GB/s in brackets; busbw = algbw x {2 * (n - 1) / n:g} (all-reduce). "
        "kinac and bare: into a preallocated receive buffer (like for like); kinac (allocating): "
        "kinac's call that allocates its receive buffer from the pool (not in the ratio); "
        "host us/call: the enqueue loop's wall time per call, kinac / bare",
        "",
        "| size | kinac all-reduce | bare NCCL | kinac (allocating) | nccl4py core | kinac (graph) "
        "| bare (graph) | all-gather | reduce-scatter | all-to-all | host us/call kinac / bare "
        "| kinac / bare (eager, graph) |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for row in info["rows"]:
        b = row["bytes"]
        cells = []
        for k in ("kinac", "bare", "kinac_alloc", "nccl4py", "kinac_graph", "bare_graph"):
            ms = row.get(f"{k}_ms")
            cells.append("-" if ms is None else f"{ms * 1e3:.1f} ({_bw(b, ms)})")
        for k in ("all-gather", "reduce-scatter", "all-to-all"):
            ms = row.get(f"{k}_ms")
            cells.append("-" if ms is None else f"{ms * 1e3:.1f} ({_bw(b, ms)})")
        hk, hb = row.get("kinac_host_ms"), row.get("bare_host_ms")
        cells.append("-" if hk is None or hb is None else f"{hk * 1e3:.1f} / {hb * 1e3:.1f}")
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
    host = info.get("host_overhead_us") or {}
    if host:
        lines += [
            "",
            "Host Python per call, no-op bindings (`--host-overhead`; min of 5 x 5000):",
            "",
        ]
        lines += [f"- {k}: {us:.2f} us" for k, us in host.items()]
    sc = info.get("scaling") or {}
    if sc:
        lines += [
            "",
            f"Scaling row, {n} rank(s) (wall ms per call, host arrays in and out; medians):",
            "",
            f"| ranks | block fwd sharded ({sc.get('block_backend', '-')}) | block fwd unsharded "
            "| max abs diff | collectives "
            "| decoder_1m train step | losses |",
            "|---|---|---|---|---|---|---|",
            f"| {n} | {_ms(sc.get('block_sharded_ms'))} | {_ms(sc.get('block_single_ms'))} "
            f"| {sc.get('block_max_abs_diff', '-')} | {sc.get('block_collectives', '-')} "
            f"| {_ms(sc.get('train_step_ms'))} ({sc.get('train_parallel', '-')}) "
            f"| {sc.get('train_losses', '-')} |",
        ]
        lines += [f"- {k}: {sc[k]}" for k in ("block_error", "train_error") if k in sc]
    return "\n".join(lines) + "\n"


def _ms(v: Any) -> str:
    return "-" if v is None else f"{v:.3f}"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--gpu", action="store_true", help="run on the GPU (required)")
    p.add_argument("--out", default=os.environ.get("OUT", ""), help="directory for the results")
    p.add_argument("--iters", type=int, default=20)
    p.add_argument("--small-iters", type=int, default=100, help="calls per burst up to 16 MiB")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--max-mib", type=int, default=1024)
    p.add_argument(
        "--no-scaling", dest="scaling", action="store_false", help="skip the block/train row"
    )
    p.add_argument("--block-calls", type=int, default=10)
    p.add_argument("--train-steps", type=int, default=5)
    p.add_argument("--target", default="cuda", help="the scaling row's target (cpu: a dry run)")
    p.add_argument(
        "--host-overhead",
        action="store_true",
        help="no GPU: kinac's Python per collective call against the bare bindings call",
    )
    args = p.parse_args(argv)
    if args.host_overhead:
        for k, us in host_overhead().items():
            print(f"{k:36s} {us:6.2f} us per call")
        return 0
    if not args.gpu:
        print("benches/collectives.py measures NCCL on GPUs: pass --gpu", file=sys.stderr)
        return 2
    return run(args)


if __name__ == "__main__":
    raise SystemExit(main())
