"""``kinac run WORKSPACE ENTRY``: build an entry, run it on random or given inputs, time it.

Inputs are random (normal floats, small non-negative ints, random bools) from ``--seed``, or
arrays from ``--inputs`` (``.npz`` named after the parameters, or one ``.npy``). Prints each
input's and output's shape and dtype, summary statistics of the outputs, and the median time.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any

from kinac.errors import (
    EXIT_OK,
    KinaCompileError,
    KinaRuntimeError,
    KinaUsageError,
)
from kinac.run_flags import (
    agree_with_entry,
    bind_inputs,
    parse_dims,
    parse_dtypes,
    require_flags,
)
from kinac.run_inputs import load_inputs, random_or_oom


def _to_host(o: Any) -> Any:
    """An output as a numpy array (target cuda returns kinac CUDA tensors; bf16 widened)."""
    if not hasattr(o, "__dlpack_device__") or hasattr(o, "__array__"):
        return o
    from kinac.tir.interp import bf16_to_f32

    a = o.numpy()
    return bf16_to_f32(a) if o.dtype.name == "bfloat16" else a


def _widen_bf16(o: Any) -> Any:
    """A host bf16 output (``uint16`` bit patterns) as the float32 values it holds."""
    import numpy as np

    from kinac.tir.interp import bf16_to_f32

    return bf16_to_f32(o) if getattr(o, "dtype", None) == np.uint16 else o


def _synchronizer(target: str) -> Any:
    """A function that waits for the device (a no-op on the CPU)."""
    if target != "cuda":
        return lambda: None
    from kinac.rt import cuda

    return lambda: cuda.current_device().synchronize()  # the device the last call ran on


def _prepare(args: argparse.Namespace) -> tuple[Any, list[Any], dict[str, Any], list[Any], str]:
    """The compiled defn, its input arrays, its dim arguments, the graph's params and the
    graph's hash (shared by ``kinac run`` and ``kinac profile``)."""
    import numpy as np

    from kinac import pipeline
    from kinac.api import CliDefn
    from kinac.pipeline_support import unknown_bindings

    target = args.target or "cpu"
    given_dims, given_dtypes = parse_dims(args.dims), parse_dtypes(args.dtypes)
    fn = CliDefn(
        args.path, args.entry, target=target, cache_dir=args.cache_dir, no_cache=args.no_cache
    )
    checked = pipeline.check_defn(fn.sess.db, fn.key)
    unknown = unknown_bindings(checked.sig, given_dims, given_dtypes)
    if unknown:
        raise KinaUsageError("--dims/--dtypes: " + "; ".join(unknown))
    arrays: list[Any] | None = None
    if fn.fixed is None and checked.ok and args.inputs:  # dims and dtypes from the arrays
        arrays = load_inputs(args.inputs, fn.tensor_params)
        from_arrays = bind_inputs(fn, arrays, given_dims)
        given_dims = {**from_arrays[0], **given_dims}
        given_dtypes = {**from_arrays[1], **given_dtypes}
    if fn.fixed is None and checked.ok:  # a plain defn: its dims come from the command line
        require_flags(fn.key.name, checked.sig, given_dims, given_dtypes)
    dims: dict[str, Any] = dict(given_dims)
    dtypes = dict(given_dtypes)
    if fn.fixed is not None:
        agree_with_entry(fn, given_dims, given_dtypes)
        dims = {**dict(fn.fixed.dims), **dims}
        dtypes = {**dict(fn.fixed.dtypes), **dtypes}
    key = pipeline.EntryKey(
        fn.key.file, fn.key.name, tuple(sorted(dims.items())), tuple(sorted(dtypes.items())), target
    )
    spec = pipeline.entry_graph(fn.sess.db, key)
    if spec.graph is None:
        raise KinaCompileError(fn._render(list(spec.diagnostics)))
    params = spec.graph.params
    names = [n for n, _ in params]
    if args.inputs and fn.fixed is None:
        # --dims fix the defn's dims as an entry's do: arrays that disagree are named, never
        # silently rebound (the graph's dims include those derived from the where clause)
        from kinac.workspace.model import EntryConfig

        fn.fixed = EntryConfig(
            args.entry, fn.key.name, fn.key.file, spec.dims, tuple(sorted(dtypes.items()))
        )
        fn.fixed_by, fn.fixed_what = f"`{fn.key.name}` at --dims", "--dims"
    if args.inputs:
        arrays = arrays if arrays is not None else load_inputs(args.inputs, names)
    else:
        rng = np.random.default_rng(args.seed)
        bound = min((d for _, t in params for d in t.shape), default=1)
        arrays = [random_or_oom(rng, n, t.dtype, t.shape, bound) for n, t in params]
    call_dims = {k: v for k, v in dims.items() if k in fn.dim_params}
    from kinac.rules.codec import fingerprint

    return fn, arrays, call_dims, list(params), fingerprint(spec.graph)


def _metrics(
    args: argparse.Namespace, fn: Any, arrays: list[Any], dims: dict[str, Any], target: str
) -> tuple[Any, Any]:
    """``--metrics-port``: the run's metrics and their server on 127.0.0.1 (else two Nones)."""
    if getattr(args, "metrics_port", None) is None:
        return None, None
    from kinac.metrics import MetricsServer, RunMetrics
    from kinac.observe.profile import loaded_entry

    entry, _ = loaded_entry(fn, tuple(arrays), dims)
    metrics = RunMetrics(args.entry, target, entry=entry, db=fn.sess.db)
    try:
        server = MetricsServer(metrics, args.metrics_port)
    except OSError as e:
        raise KinaUsageError(
            f"--metrics-port: cannot listen on 127.0.0.1:{args.metrics_port}: {e.strerror or e}"
        ) from None
    print(f"metrics: {server.url} while the {args.repeat} runs repeat", flush=True)
    return metrics, server


def _determinism_gate(
    args: argparse.Namespace, fn: Any, arrays: list[Any], dims: dict[str, Any], graph_hash: str
) -> None:
    """``--deterministic``: record each kernel's output checksum; compare with ``--manifest``
    (written there when the file does not exist yet) or, without one, with a second run."""
    from kinac.observe.determinism import (
        first_difference,
        read_manifest,
        record_gpu,
        record_host,
        write_manifest,
    )
    from kinac.observe.profile import loaded_entry

    entry, given = loaded_entry(fn, tuple(arrays), dims)
    record = record_gpu if fn.target == "cuda" else record_host
    now = record(entry, given, graph_hash)
    n = len(now["kernels"])
    if args.manifest and not Path(args.manifest).exists():
        try:
            write_manifest(Path(args.manifest), now)
        except OSError as e:
            raise KinaUsageError(
                f"--manifest: cannot write {args.manifest}: {e.strerror or e}"
            ) from None
        print(f"  deterministic: recorded {n} kernels to {args.manifest} (graph {graph_hash[:12]})")
        return
    if args.manifest:
        old = read_manifest(Path(args.manifest))
        if isinstance(old, str):
            raise KinaUsageError(f"--manifest: {old}")
        against = args.manifest
    else:
        old, against = record(entry, given, graph_hash), "a second run"
    why = first_difference(old, now)
    if why is not None:
        raise KinaRuntimeError(f"not deterministic against {against}: {why}")
    print(f"  deterministic: {n} kernels and outputs bit-identical to {against}")


def _simulated(args: argparse.Namespace, fn: Any, target: str) -> Any:
    """``--simulate [MESH]``: the entry's sharded program on simulated devices
    (:mod:`kinac.api_sharded`), or None without the flag."""
    mesh = getattr(args, "simulate", None)
    if mesh is None:
        return None
    clash = [
        flag
        for flag, on in (
            ("--target cuda", target != "cpu"),
            ("--deterministic/--manifest", getattr(args, "deterministic", False)),
            ("--metrics-port", getattr(args, "metrics_port", None) is not None),
        )
        if on
    ]
    if clash:
        raise KinaUsageError(
            f"--simulate runs on host threads and does not combine with {', '.join(clash)}"
        )
    from kinac.api_sharded import ShardedDefn

    return ShardedDefn.wrap(fn, mesh)


def _distributed(args: argparse.Namespace, fn: Any, target: str) -> Any:
    """``--distributed [MESH]``: this process is one rank of a launched group (``kinac
    launch``, torchrun, SLURM); the entry's sharded program runs across the group's processes
    (:mod:`kinac.rt.comm.distributed`: the host's process group, or NCCL for ``--target
    cuda``), or None without the flag."""
    mesh = getattr(args, "distributed", None)
    if mesh is None:
        return None
    clash = [
        flag
        for flag, on in (
            ("--simulate", getattr(args, "simulate", None) is not None),
            ("--deterministic/--manifest", getattr(args, "deterministic", False)),
            ("--metrics-port", getattr(args, "metrics_port", None) is not None),
        )
        if on
    ]
    if clash:
        raise KinaUsageError(
            f"--distributed runs the program in launched processes and does not combine "
            f"with {', '.join(clash)}"
        )
    from kinac.api_sharded import ShardedDefn

    return ShardedDefn.wrap(fn, mesh, backend="nccl" if target == "cuda" else "tcp")


_KINA_DTYPES = {  # numpy's dtype names -> Kina's, for the printed outputs
    "float64": "f64",
    "float32": "f32",
    "float16": "f16",
    "int64": "i64",
    "int32": "i32",
    "bool": "bool",
}


def _check_manifest_path(manifest: str) -> None:
    """A ``--manifest`` that can be neither read nor written is a usage error before the run
    (an empty name was ignored; a missing folder failed only after the whole run)."""
    from kinac.observe.trace import trace_target_problem

    p = Path(manifest)
    if manifest == "":
        raise KinaUsageError("--manifest: an empty file name; give one, e.g. manifest.json")
    if not p.exists() and (why := trace_target_problem(p)):
        raise KinaUsageError(f"--manifest: {why}")
    if p.is_dir():
        raise KinaUsageError(f"--manifest: {manifest} is a directory; give a file name")


def run_entry(args: argparse.Namespace) -> int:
    """Build and run one entry; bad flags or inputs raise :class:`KinaUsageError` (exit 2),
    a program that does not build or a failed call raises another ``KinaError`` (exit 1)."""
    import numpy as np

    target = args.target or "cpu"
    save = save_path(args.save) if args.save else None  # before the run: a bad path fails fast
    manifest = getattr(args, "manifest", None)
    if manifest is not None:
        _check_manifest_path(manifest)  # before the run, as --save
        if not args.deterministic:
            args.deterministic = True  # --manifest alone asks for the gate too
    fn, arrays, call_dims, params, graph_hash = _prepare(args)
    sim = _distributed(args, fn, target) or _simulated(args, fn, target)
    if sim is not None:
        fn = sim  # same inputs, same printout: global outputs assembled from the shards
    sync = _synchronizer(target)
    t0 = time.perf_counter()
    out = fn(*arrays, **call_dims)
    sync()
    first = time.perf_counter() - t0
    metrics, server = _metrics(args, fn, arrays, call_dims, target)
    if metrics is not None:
        metrics.observe_call(first)
    times = []
    try:
        for _ in range(args.repeat):
            t0 = time.perf_counter()
            out = fn(*arrays, **call_dims)
            sync()  # device work is asynchronous: time it to completion
            times.append(time.perf_counter() - t0)
            if metrics is not None:
                metrics.observe_call(times[-1])
    finally:
        if server is not None:
            server.close()
    if sim is not None and sim.dist is not None and sim.dist.rank != 0:
        return EXIT_OK  # rank 0 prints (and saves) the global outputs every rank holds
    raw = out if isinstance(out, tuple) else (out,)
    bf16 = [getattr(o.dtype, "name", str(o.dtype)) in ("uint16", "bfloat16") for o in raw]
    outs = tuple(_to_host(o) for o in raw)
    labels = [  # Kina's spelling, as the inputs are printed (f32, not float32)
        "bf16" if b else _KINA_DTYPES.get(str(o.dtype), str(o.dtype))
        for b, o in zip(bf16, outs, strict=True)
    ]
    outs = tuple(_widen_bf16(o) for o in outs)
    print(f"{args.entry}: {fn.key.name} from {fn.key.file}, target {target}")
    for n, t in params:
        print(f"  in  {n:<6} {t.dtype}{list(t.shape)}")
    for i, o in enumerate(outs):
        a = np.asarray(o, dtype=np.float64)
        print(
            f"  out {i:<6} {labels[i]}{list(o.shape)}  mean {a.mean():+.6g}  std {a.std():.6g}  "
            f"min {a.min():+.6g}  max {a.max():+.6g}  finite {bool(np.isfinite(a).all())}"
        )
    times.sort()
    print(
        f"  time: first call {first * 1000:.1f} ms (build or cache load), then median "
        f"{times[len(times) // 2] * 1000:.3f} ms over {len(times)} run{'s' * (len(times) != 1)}"
    )
    if sim is not None:
        print(f"  {sim.describe()}")
    if getattr(args, "deterministic", False):
        _determinism_gate(args, fn, arrays, call_dims, graph_hash)
    if save is not None:
        try:
            np.savez(save, *outs)
        except OSError as e:
            raise KinaUsageError(f"--save: cannot write {save}: {e.strerror or e}") from None
        print(f"  saved {len(outs)} output{'s' * (len(outs) != 1)} to {save} (arr_0, ...)")
    return EXIT_OK


def save_path(text: str) -> Path:
    """Where ``--save`` writes: numpy adds ``.npz`` to a name without it (``out.txt`` becomes
    ``out.txt.npz``, a directory ``/tmp`` became ``/tmp.npz`` beside it), so the name is
    decided here, said when written, and a directory refused before anything runs."""
    p = Path(text)
    if p.is_dir():
        raise KinaUsageError(
            f"--save {text} is a directory; give a file name, e.g. {p / 'out.npz'}"
        )
    return p if p.suffix == ".npz" else p.with_name(p.name + ".npz")


def profile_command(args: argparse.Namespace) -> int:
    """``kinac profile``: every kernel's time as a table, and optionally a trace file."""
    from rich.console import Console

    from kinac.observe.profile import profile_call
    from kinac.observe.trace import trace_target_problem

    if args.trace is not None and (why := trace_target_problem(args.trace)):
        raise KinaUsageError(f"--trace: {why}")  # before the build and the profile, not after
    fn, arrays, call_dims, _, _ = _prepare(args)
    prof = profile_call(fn, arrays, call_dims, repeat=args.repeat)  # a dim may be called repeat
    console = Console()
    if not console.is_terminal:  # piped or captured: whole names, not an 80-column squeeze
        console = Console(width=160)
    console.print(prof.table())
    if args.trace is not None:
        try:
            prof.write_trace(args.trace)
        except OSError as e:
            raise KinaUsageError(f"--trace: cannot write {args.trace}: {e.strerror or e}") from None
        print(f"trace: {args.trace} ({len(prof.events)} events; open in ui.perfetto.dev)")
    return EXIT_OK
