# kinac-bench: gpu
"""Each NCCL collective through kinac against NCCL's own call, 1 MiB-1 GiB, same run, any N.

    PYTHONPATH=. python3 benches/collectives.py --gpu --out DIR                (one GPU: a world of one)
    kinac launch -n 2 -- python3 benches/collectives.py --gpu --out DIR        (2 GPUs; -n 4: 4)
    PYTHONPATH=. python3 benches/collectives.py --host-overhead                (CPU: kinac's Python)

The same script, unchanged, for any world size: every rank joins the rendezvous (alone and
in-process when not launched), builds the world communicator (:func:`kinac.rt.comm.nccl.world`)
on its GPU (``kinac launch`` gives each rank one), and for f32 buffers of 1 MiB to 1 GiB times,
on one stream with CUDA events (median of rounds, the variants interleaved), each of
all-reduce, all-gather, reduce-scatter and all-to-all (and the barrier, once):

- ``kinac``: the prepared collective (``comm.prepare(kind, send, recv, stream=s)``, every check
  done at bind time: :mod:`kinac.rt.comm.nccl_prepared`), called in the loop: kinac's eager
  path for a caller with its buffers, and what a program step's collective does after its
  first run;
- ``NCCL``: nccl4py's low-level binding called bare with the same integers (addresses, count,
  type and op codes, communicator, stream handle): NCCL's own call, the reference;
- ``(graph)``: the same calls captured into one CUDA graph and replayed: device time alone;
- the all-reduce also through kinac's checked eager API (``comm.all_reduce(x, r, stream=s)``:
  checks cached per call layout, one log entry per call), shown apart.

Sizes are the bytes nccl-tests calls the size: each buffer of all-reduce and all-to-all, the
gathered (receive) buffer of all-gather, the scattered (send) buffer of reduce-scatter. Bus
bandwidth as nccl-tests counts it: algorithm bandwidth (size / time) times 2(n-1)/n for
all-reduce, (n-1)/n for the others; with one rank that factor is 0 (nothing crosses a link),
so the table gives the algorithm bandwidth too (on one GPU an out-of-place collective is
NCCL's device copy). Eager times are CUDA-event time per call over a burst of calls; below
~16 MiB on one GPU the device finishes each call before the host has queued the next, so they
are the host's enqueue cost, which the table also gives directly (``host us``: wall time of
the burst's enqueue loop per call). Sizes up to 16 MiB get ``--small-iters`` calls per burst.

Then the scaling row at this world size (``--no-scaling`` skips it): the Megatron block
(``block_small``, f32, ``(mesh tp [N])``) through ``kinac.compile(target='cuda', mesh=N)``
(NCCL, device-resident) against the unsharded GPU block on the same inputs (wall ms per call,
host arrays in and out, and their largest difference), and a training step of ``decoder_1m``
(``kinac train``'s data parallel under a launch, NCCL on the gradients). Rank 0 writes
``nccl_bench.md`` / ``.json`` under ``--out`` and prints the tables; ``scripts/multi_gpu.sh``
runs it at 1, 2 and 4 ranks and joins the rows. Under ~40 s of device time on one H200.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
# run as a script, this file's directory heads sys.path; no bench may be named for a package
# (tests/test_bench_names.py), and the bench directory is dropped all the same
sys.path[:] = [str(ROOT)] + [p for p in sys.path if Path(p or ".").resolve() != ROOT / "benches"]

MIB = 1 << 20
SIZES = (1 * MIB, 4 * MIB, 16 * MIB, 64 * MIB, 256 * MIB, 1024 * MIB)
KINDS = ("all-reduce", "all-gather", "reduce-scatter", "all-to-all")
F32 = 7  # ncclFloat32
SUM = 0  # ncclSum
I32 = 2  # ncclInt32


def bus_factor(kind: str, n: int) -> float:
    """nccl-tests' bus bandwidth factor: what each rank's link carries per byte of size."""
    if kind == "all-reduce":
        return 2.0 * (n - 1) / n
    return (n - 1) / n


@dataclass
class Rig:
    """What a rank measures with: the launch, the rendezvous client, the NCCL bindings, the
    device (``CudaOps``), kinac's CUDA module (events, capture) and the timed stream. A test
    gives fakes (threads as ranks, host memory, a fake binding over the simulator)."""

    env: Any
    client: Any
    lib: Any
    ops: Any
    cuda: Any
    stream: Any
    memset: Callable[[Any, int], None]
    comm: Any = None  # the world communicator (None: nccl.world makes it)


def _env() -> Any:
    """The launch's environment, or a world of one of this process's own."""
    from kinac.rt.comm.launch import free_port
    from kinac.rt.comm.rendezvous import DistEnv

    env = DistEnv.from_env()
    if env is None:
        env = DistEnv(0, 1, 0, "127.0.0.1", free_port(), 60.0)
    return env


def gpu_rig() -> Rig:
    """This rank's real rig: its GPU (device 0: ``kinac launch`` gives each rank one)."""
    from kinac.rt import cuda
    from kinac.rt.comm import tcp
    from kinac.rt.comm.device_run import CudaOps
    from kinac.rt.cuda import driver

    env = _env()
    cuda.get_device(0)
    d = driver.api()

    def memset(t: Any, nbytes: int) -> None:
        driver.check("cuMemsetD8", d.cuMemsetD8(t.ptr, 0, nbytes))

    return Rig(env, tcp.process_client(env), None, CudaOps(), cuda, cuda.Stream(), memset)


def _timed(
    cuda: Any, stream: Any, fn: Callable[[], Any], iters: int, rounds: int
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


def _graphed(cuda: Any, stream: Any, fn: Callable[[], Any], iters: int, rounds: int) -> Any:
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


def run(args: argparse.Namespace, rig: Rig | None = None) -> int:
    """This rank's measurements; rank 0 writes the tables after every size (a run cut short by
    its time cap still leaves what it measured)."""
    from kinac.rt.comm import nccl

    own = rig is None
    rig = rig or gpu_rig()
    env, n = rig.env, rig.env.world_size
    t0 = time.perf_counter()
    comm = rig.comm or nccl.world((n,), ("x",), rig.client, alloc=rig.ops.empty, lib=rig.lib)
    rows: list[dict[str, Any]] = []
    info = {
        "ranks": n,
        "init_s": time.perf_counter() - t0,
        "nccl_version": _version(comm._lib),
        "iters": args.iters,
        "small_iters": args.small_iters,
        "rounds": args.rounds,
        "rows": rows,
        "scaling": {},
        "seconds": {},
        "host_overhead_us": host_overhead(args.host_calls, 5),
    }
    for nbytes in [s for s in SIZES if s <= args.max_mib * MIB]:
        for row in one_size(nbytes, comm, rig, args):
            rows.append(row)
            print(_line(row), flush=True)
        _write(info, env.rank, args.out)
    rows.append(barrier_row(comm, rig, args))
    print(_line(rows[-1]), flush=True)
    info["seconds"] = {"collectives": time.perf_counter() - t0}
    _write(info, env.rank, args.out)
    if args.scaling:
        info["scaling"] = scaling(env, n, args)
        print(json.dumps(info["scaling"]), flush=True)
    info["seconds"]["total"] = time.perf_counter() - t0
    rig.client.barrier()
    if _write(info, env.rank, args.out):
        print(table(info))
    if own:
        from kinac.rt.comm import tcp

        nccl.forget_worlds()
        tcp.close_process_client()
    return 0


def _write(info: dict[str, Any], rank: int, out: str) -> bool:
    """Rank 0's ``nccl_bench.json`` / ``.md`` under ``out`` (whether it wrote them)."""
    if rank != 0 or not out:
        return False
    where = Path(out)
    where.mkdir(parents=True, exist_ok=True)
    (where / "nccl_bench.json").write_text(json.dumps(info, indent=1))
    (where / "nccl_bench.md").write_text(table(info))
    return True


def _bare(lib: Any, kind: str, comm: Any, s: int, r: int, count: int, sh: int) -> Any:
    """NCCL's own call for ``kind``: nccl4py's binding with the integers written out."""
    n, h = comm.size, comm.handle
    if kind == "all-reduce":
        ar = lib.all_reduce
        return lambda: ar(s, r, count, F32, SUM, h, sh)
    if kind == "all-gather":
        ag, c = lib.all_gather, count // n
        return lambda: ag(s, r, c, F32, h, sh)
    if kind == "reduce-scatter":
        rs, c = lib.reduce_scatter, count // n
        return lambda: rs(s, r, c, F32, SUM, h, sh)
    c, step = count // n, count // n * 4
    gs, ge, send, recv = lib.group_start, lib.group_end, lib.send, lib.recv

    def a2a() -> None:
        gs()
        for j in range(n):
            send(s + j * step, c, F32, j, h, sh)
            recv(r + j * step, c, F32, j, h, sh)
        ge()

    return a2a


def _measure(
    variants: dict[str, Callable[[], Any]], comm: Any, rig: Rig, iters: int, args: Any
) -> tuple[dict[str, Any], dict[str, str]]:
    """Eager (interleaved over rounds) and graph-captured medians of each variant."""
    times: dict[str, list[tuple[float, float]]] = {k: [] for k in variants}
    errors: dict[str, str] = {}
    for _ in range(args.rounds):  # interleaved: drift hits every variant alike
        for k, fn in variants.items():
            if k in errors:
                continue
            try:
                times[k] += _timed(rig.cuda, rig.stream, fn, iters, 1)
            except Exception as e:  # noqa: BLE001 - reported in the table
                errors[k] = f"{type(e).__name__}: {e}"
            del comm.log[:]
    got: dict[str, Any] = {}
    for k, v in times.items():
        if v:
            got[f"{k}_ms"] = statistics.median(t for t, _ in v)
            got[f"{k}_host_ms"] = statistics.median(h for _, h in v)
    for k in ("kinac", "nccl"):  # a graph of at most 20 calls: its device time is the point
        try:
            g = _graphed(rig.cuda, rig.stream, variants[k], min(iters, 20), args.rounds)
            if isinstance(g, str):
                errors[f"{k}_graph"] = g
            else:
                got[f"{k}_graph_ms"] = statistics.median(g)
        except Exception as e:  # noqa: BLE001
            errors[f"{k}_graph"] = f"{type(e).__name__}: {e}"
    del comm.log[:]
    return got, errors


def one_size(nbytes: int, comm: Any, rig: Rig, args: Any) -> list[dict[str, Any]]:
    """Every collective at ``nbytes`` (f32): one row each, kinac prepared against NCCL."""
    n, lib, ops, st = comm.size, comm._lib, rig.ops, rig.stream
    count = nbytes // 4
    x, r = ops.empty((count,), "float32"), ops.empty((count,), "float32")
    for t in (x, r):
        rig.memset(t, nbytes)
    part, r_part = ops.view(x, (count // n,)), ops.view(r, (count // n,))
    buffers = {
        "all-reduce": (x, r),
        "all-gather": (part, r),
        "reduce-scatter": (x, r_part),
        "all-to-all": (x, r),
    }
    iters = args.small_iters if nbytes <= 16 * MIB else args.iters
    rows = []
    for kind in KINDS:
        send, recv = buffers[kind]
        variants: dict[str, Callable[[], Any]] = {
            "kinac": comm.prepare(kind, send, recv, stream=st),
            "nccl": _bare(lib, kind, comm, send.ptr, recv.ptr, count, st.handle),
        }
        if kind == "all-reduce":  # the checked eager API, for the record
            variants["api"] = lambda: comm.all_reduce(x, r, stream=st)
        got, errors = _measure(variants, comm, rig, iters, args)
        rows.append({"kind": kind, "bytes": nbytes, "ranks": n, "iters": iters, **got})
        rows[-1]["errors"] = errors
    return rows


def barrier_row(comm: Any, rig: Rig, args: Any) -> dict[str, Any]:
    """The device barrier (a one-element all-reduce): kinac's prepared one against NCCL's
    call on a token of its own."""
    token = rig.ops.empty((1,), "int32")
    tp, h, sh, ar = token.ptr, comm.handle, rig.stream.handle, comm._lib.all_reduce
    variants: dict[str, Callable[[], Any]] = {
        "kinac": comm.prepare("barrier", stream=rig.stream),
        "nccl": lambda: ar(tp, tp, 1, I32, SUM, h, sh),
    }
    got, errors = _measure(variants, comm, rig, args.small_iters, args)
    return {"kind": "barrier", "bytes": 4, "ranks": comm.size, **got, "errors": errors}


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
        out["block_graph"] = _graphed_program(sharded)
        if args.target == "cuda":  # the same program step by step (before the one graph)
            from kinac.rt.comm import program_graph

            os.environ[program_graph.ENV] = "0"
            try:
                steps = _median_ms(lambda: sharded(*inputs, **dims), args.block_calls)
                out["block_sharded_steps_ms"] = steps
            finally:
                del os.environ[program_graph.ENV]
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


def _graphed_program(sharded: Any) -> str:
    """How the sharded block's last program ran: ``graph`` (one CUDA graph replayed),
    ``eager`` (bound, capture failed: the bound calls each call) or ``steps`` (with
    :data:`~kinac.rt.comm.program_graph.last_fallback_reason`: why)."""
    from kinac.rt.comm import program_graph

    for _, pg in program_graph._GRAPHS.values():
        if pg is not None and pg.program is sharded.last_program and pg.graph is not None:
            return "graph" if getattr(pg.graph, "captured", False) else "eager"
    why = getattr(program_graph, "last_fallback_reason", "")
    return f"steps: {why.replace('|', '/')}" if why else "steps"


def _noop(*a: Any) -> None:
    """A binding function that does nothing (module-level, as nccl4py's are: no bound method)."""


def _noop_lib() -> Any:
    """NCCL bindings that do nothing: the host cost of kinac's Python around the call alone."""
    import types

    names = ("all_reduce", "all_gather", "reduce_scatter", "send", "recv")
    return types.SimpleNamespace(**dict.fromkeys((*names, "group_start", "group_end"), _noop))


def host_overhead(calls: int = 20000, repeat: int = 9) -> dict[str, float]:
    """Microseconds per call on the CPU, no GPU needed: kinac's collectives on kinac tensors
    (addresses only: the no-op bindings read nothing), prepared and through the checked API,
    against the same bindings call made bare (min of ``repeat`` runs of ``calls`` calls; a
    world of one, a kinac ``Stream`` handle)."""
    import timeit

    from kinac.rt.comm import nccl
    from kinac.rt.cuda.device import Stream
    from kinac.rt.cuda.tensor import Tensor

    lib, n = _noop_lib(), 1 << 18
    comm = nccl.NcclComm(lib, object(), (1,), ("x",), ("x",), 0)
    x, r = Tensor(1 << 32, (n,), "float32"), Tensor(2 << 32, (n,), "float32")
    s = Stream.__new__(Stream)  # a handle, no CUDA stream behind it
    s.handle = 7
    h, xp, rp, sh = comm.handle, x.ptr, r.ptr, s.handle
    ar, ag = lib.all_reduce, lib.all_gather

    def a2a() -> None:
        lib.group_start()
        lib.send(xp, n, F32, 0, h, sh)
        lib.recv(rp, n, F32, 0, h, sh)
        lib.group_end()

    fns: dict[str, Callable[[], Any]] = {
        "NCCL all-reduce (bare binding call)": lambda: ar(xp, rp, n, F32, SUM, h, sh),
        "kinac prepared all-reduce": comm.prepare("all-reduce", x, r, stream=s),
        "kinac all-reduce (checked API)": lambda: comm.all_reduce(x, r, stream=s),
        "NCCL all-gather (bare binding call)": lambda: ag(xp, rp, n, F32, h, sh),
        "kinac prepared all-gather": comm.prepare("all-gather", x, r, stream=s),
        "kinac prepared reduce-scatter": comm.prepare("reduce-scatter", x, r, stream=s),
        "NCCL all-to-all (group of 1 peer)": a2a,
        "kinac prepared all-to-all": comm.prepare("all-to-all", x, r, stream=s),
        "kinac all-to-all (checked API)": lambda: comm.all_to_all(x, r, stream=s),
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


def _us(ms: float | None) -> str:
    return "-" if ms is None else f"{ms * 1e3:.1f}"


def _gbs(nbytes: int, ms: float | None, factor: float = 1.0) -> str:
    return "-" if not ms else f"{nbytes / ms / 1e6 * factor:.1f}"


def _ratio(a: float | None, b: float | None) -> str:
    return f"{a / b:.2f}" if a and b else "-"


def _size(nbytes: int) -> str:
    return f"{nbytes // MIB} MiB" if nbytes >= MIB else f"{nbytes} B"


def _line(row: dict[str, Any]) -> str:
    keys = [k for k in row if k.endswith("_ms") and not k.endswith("_host_ms")]
    return f"{row['kind']} {_size(row['bytes'])}: " + ", ".join(
        f"{k[:-3]} {row[k] * 1e3:.1f} us" for k in keys
    )


def table(info: dict[str, Any]) -> str:
    """The markdown tables of one run (rank 0's)."""
    n = info["ranks"]
    lines = [
        f"NCCL f32, {n} rank(s), NCCL {info['nccl_version']}, init {info['init_s']:.2f} s; "
        f"us per call (median of {info['rounds']} rounds x {info['iters']} calls, "
        f"{info.get('small_iters', info['iters'])} up to 16 MiB). kinac: the prepared call "
        "(checks at bind time); NCCL: nccl4py's binding called bare, same buffers and stream, "
        "same run. busbw = algbw x 2(n-1)/n (all-reduce), (n-1)/n (others): 0 on one rank, so "
        "algbw is given too. host us: the enqueue loop's wall time per call. Graphs: at most "
        f"20 calls captured. Wall s: {json.dumps(info.get('seconds', {}))}.",
        "",
        "| collective | size | kinac eager us | NCCL eager us | eager kinac/NCCL "
        "| kinac graph us | NCCL graph us | graph kinac/NCCL | busbw GB/s kinac / NCCL "
        "| algbw GB/s kinac / NCCL | host us kinac / NCCL |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    api = []
    for row in info["rows"]:
        b, kind = row["bytes"], row["kind"]
        k, c = row.get("kinac_ms"), row.get("nccl_ms")
        kg, cg = row.get("kinac_graph_ms"), row.get("nccl_graph_ms")
        f = bus_factor(kind, n) if kind != "barrier" else 0.0
        cells = [
            kind,
            _size(b),
            _us(k),
            _us(c),
            _ratio(k, c),
            _us(kg),
            _us(cg),
            _ratio(kg, cg),
            f"{_gbs(b, k, f)} / {_gbs(b, c, f)}",
            f"{_gbs(b, k)} / {_gbs(b, c)}",
            f"{_us(row.get('kinac_host_ms'))} / {_us(row.get('nccl_host_ms'))}",
        ]
        lines.append("| " + " | ".join(cells) + " |")
        if "api_ms" in row:
            api.append(
                f"| {_size(b)} | {_us(row['api_ms'])} | {_us(c)} | {_ratio(row['api_ms'], c)} "
                f"| {_us(row.get('api_host_ms'))} |"
            )
    if api:
        lines += [
            "",
            "All-reduce through kinac's checked eager API (`comm.all_reduce(x, r, stream=s)`: "
            "checks cached per call layout, a log entry per call) against the same NCCL call:",
            "",
            "| size | kinac API us | NCCL us | ratio | host us |",
            "|---|---|---|---|---|",
            *api,
        ]
    errs = {
        f"{r['kind']} {_size(r['bytes'])} {k}": v
        for r in info["rows"]
        for k, v in r["errors"].items()
    }
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
            SCALING_HEAD,
            "|---|---|---|---|---|---|---|",
            scaling_line(n, sc),
        ]
        lines += [f"- {k}: {sc[k]}" for k in ("block_error", "train_error") if k in sc]
    return "\n".join(lines) + "\n"


SCALING_HEAD = (
    "| ranks | block fwd sharded | block fwd unsharded | max abs diff | collectives "
    "| decoder_1m train step | losses |"
)


def scaling_line(n: int, sc: dict[str, Any]) -> str:
    """One row of the scaling table (``scripts/multi_gpu.sh`` joins the rows of 1, 2, 4)."""
    return (
        f"| {n} | {_ms(sc.get('block_sharded_ms'))} ({sc.get('block_backend', '-')}"
        + (f", {sc['block_graph']}" if "block_graph" in sc else "")
        + (
            f"; step by step {_ms(sc['block_sharded_steps_ms'])}"
            if "block_sharded_steps_ms" in sc
            else ""
        )
        + ") "
        f"| {_ms(sc.get('block_single_ms'))} | {sc.get('block_max_abs_diff', '-')} "
        f"| {sc.get('block_collectives', '-')} "
        f"| {_ms(sc.get('train_step_ms'))} ({sc.get('train_parallel', '-')}) "
        f"| {sc.get('train_losses', '-')} |"
    )


def join(dirs: list[str]) -> str:
    """The scaling table and each collective's bus bandwidth across world sizes, from the
    ``nccl_bench.json`` of runs at 1, 2, 4 ranks (``scripts/multi_gpu.sh``)."""
    infos = sorted(
        (json.loads((Path(d) / "nccl_bench.json").read_text()) for d in dirs),
        key=lambda i: i["ranks"],
    )
    ns = [i["ranks"] for i in infos]
    lines = [
        f"Scaling, {', '.join(map(str, ns))} rank(s) (one GPU each; wall ms per call, host "
        "arrays in and out; medians):",
        "",
        SCALING_HEAD,
        "|---|---|---|---|---|---|---|",
        *(scaling_line(i["ranks"], i.get("scaling") or {}) for i in infos),
        "",
        "Bus bandwidth GB/s, kinac prepared / NCCL's own call, eager (ratio of times):",
        "",
        "| collective | size | " + " | ".join(f"{n} rank(s)" for n in ns) + " |",
        "|---|---|" + "---|" * len(ns),
    ]
    rows: dict[tuple[str, int], dict[int, dict[str, Any]]] = {}
    for info in infos:
        for row in info["rows"]:
            rows.setdefault((row["kind"], row["bytes"]), {})[info["ranks"]] = row
    for (kind, nbytes), by_n in rows.items():
        cells = []
        for n in ns:
            row = by_n.get(n)
            if row is None:
                cells.append("-")
                continue
            k, c = row.get("kinac_ms"), row.get("nccl_ms")
            f = bus_factor(kind, n) if kind != "barrier" else 0.0
            cells.append(f"{_gbs(nbytes, k, f)} / {_gbs(nbytes, c, f)} ({_ratio(k, c)})")
        lines.append(f"| {kind} | {_size(nbytes)} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def _ms(v: Any) -> str:
    return "-" if v is None else f"{v:.3f}"


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
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
    p.add_argument("--host-calls", type=int, default=5000, help="calls per --host-overhead run")
    p.add_argument("--train-steps", type=int, default=5)
    p.add_argument("--target", default="cuda", help="the scaling row's target (cpu: a dry run)")
    p.add_argument(
        "--join",
        nargs="+",
        metavar="DIR",
        help="no GPU: join the nccl_bench.json of runs at several world sizes into one table",
    )
    p.add_argument(
        "--host-overhead",
        action="store_true",
        help="no GPU: kinac's Python per collective call against the bare bindings call",
    )
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.join:
        text = join(args.join)
        print(text)
        if args.out:
            Path(args.out).mkdir(parents=True, exist_ok=True)
            (Path(args.out) / "nccl_scaling.md").write_text(text)
        return 0
    if args.host_overhead:
        for k, us in host_overhead().items():
            print(f"{k:40s} {us:6.2f} us per call")
        return 0
    if not args.gpu:
        print("benches/collectives.py measures NCCL on GPUs: pass --gpu", file=sys.stderr)
        return 2
    from kinac.errors import KinaError

    try:
        return run(args)
    except KinaError as e:  # a launch or NCCL problem: one line, as kinac's commands say it
        print(f"kinac: error: {e}", file=sys.stderr)
        return e.exit_code


if __name__ == "__main__":
    raise SystemExit(main())
