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

from kinac.dtypes import FLOAT_DTYPES
from kinac.errors import (
    EXIT_OK,
    KinaCompileError,
    KinaRuntimeError,
    KinaUsageError,
)


class _Bf16Name:
    """The dtype of :class:`Bf16Bits`: named ``bfloat16`` as torch's and ml_dtypes' are."""

    name = "bfloat16"

    def __str__(self) -> str:
        return self.name


class Bf16Bits:
    """A bf16 array for the API: numpy has no bf16, so ``kinac run`` holds bf16 values as
    ``uint16`` bit patterns (the host runtime's convention) and hands them over with a dtype
    named ``bfloat16`` (typed bf16 by :func:`kinac.api._arg_type`) through DLPack."""

    dtype = _Bf16Name()

    def __init__(self, bits: Any) -> None:
        self.bits = bits
        self.shape = tuple(bits.shape)

    def __dlpack__(self, **kw: Any) -> Any:
        return self.bits.__dlpack__(**kw)

    def __dlpack_device__(self) -> Any:
        return self.bits.__dlpack_device__()

    def __array__(self, dtype: Any = None, copy: Any = None) -> Any:
        return self.bits if dtype is None else self.bits.astype(dtype)


def as_bf16(a: Any) -> Any:
    """A ``uint16`` array read from ``--inputs`` as the bf16 bit patterns it holds (Kina has no
    16-bit integer dtype, so the reading is unambiguous); any other array unchanged."""
    import numpy as np

    return Bf16Bits(np.ascontiguousarray(a)) if getattr(a, "dtype", None) == np.uint16 else a


def _random_input(rng: Any, dtype: str, shape: tuple[int, ...], bound: int) -> Any:
    import numpy as np

    if dtype == "bf16":  # the entry's dtype, not f32 (bf16 values as their bit patterns)
        from kinac.tir.interp import f32_to_bf16

        return Bf16Bits(f32_to_bf16(rng.standard_normal(shape).astype(np.float32)))
    if dtype in FLOAT_DTYPES:
        np_dt = {"f64": np.float64, "f32": np.float32, "f16": np.float16}[dtype]
        return rng.standard_normal(shape).astype(np_dt)
    if dtype in ("i64", "i32"):
        return rng.integers(0, max(bound, 1), size=shape).astype(
            np.int64 if dtype == "i64" else np.int32
        )
    return rng.random(shape) < 0.5


def _size(nbytes: int) -> str:
    """A byte count as a person reads it (``7.28 TiB``)."""
    size, unit = float(nbytes), "bytes"
    for u in ("KiB", "MiB", "GiB", "TiB", "PiB", "EiB"):
        if size < 1024:
            break
        size, unit = size / 1024, u
    return f"{nbytes} bytes" if unit == "bytes" else f"{size:.2f} {unit}"


def _random_or_oom(rng: Any, name: str, dtype: str, shape: tuple[int, ...], bound: int) -> Any:
    """:func:`_random_input`, or a ``MemoryError`` (the CLI's "out of memory", exit 1) that
    names the input, its dtype and its size: numpy's said "Unable to allocate 7.28 TiB for an
    array with shape (...) and data type float64", the random draw's dtype, not the entry's."""
    try:
        return _random_input(rng, dtype, shape, bound)
    except MemoryError:
        from kinac.dtypes import ITEMSIZE

        count = 1
        for d in shape:
            count *= d
        each = ITEMSIZE.get(dtype, 1)
        raise MemoryError(
            f"the random input `{name}` is {dtype}{list(shape)}: {count} elements of {each} "
            f"byte{'s' * (each != 1)}, {_size(count * each)}, more than the host can allocate "
            "(the random values are drawn at 8 bytes each first); run with smaller --dims"
        ) from None


def _load_inputs(path: str, names: list[str]) -> list[Any]:
    """The arrays of an ``.npz`` (named after the parameters) or one ``.npy``, in ``names``
    order; a missing, extra or unreadable array is a usage error (never silently ignored)."""
    import numpy as np

    p = Path(path)
    if not p.exists():
        raise KinaUsageError(f"no such inputs file: {path}")
    if not p.is_file():
        raise KinaUsageError(f"--inputs {path} is not a regular file; give a .npz or .npy file")
    try:
        with open(p, "rb") as f:
            magic = f.read(6)
    except OSError as e:
        raise KinaUsageError(f"cannot read {path}: {e.strerror or e}") from None
    if not magic.startswith((b"\x93NUMPY", b"PK")):  # .npy's magic; .npz is a zip
        # numpy would try it as a pickle and advise `allow_pickle=`: kinac never unpickles
        raise KinaUsageError(
            f"cannot read {path}: it is not a .npy or .npz file (numpy.save and numpy.savez "
            "write them)"
        )
    try:
        data = np.load(p, allow_pickle=False)
    except Exception as e:  # noqa: BLE001 - any failure to read a user's file is the file's fault
        raise KinaUsageError(f"cannot read {path} as .npy/.npz: {_numpy_why(e)}") from None
    if isinstance(data, np.ndarray):
        if len(names) != 1:
            raise KinaUsageError(
                f"a .npy file holds one array but the entry takes {len(names)} "
                f"({', '.join(names)}): use a .npz with arrays named after them"
            )
        return [as_bf16(data)]
    if not hasattr(data, "files"):
        raise KinaUsageError(f"{path} holds no arrays (a pickled object?); use .npz or .npy")
    missing = [n for n in names if n not in data.files]
    extra = [n for n in data.files if n not in names]
    if missing or extra:
        said = []
        if missing:
            said.append(f"lacks arrays named {', '.join(missing)}")
        if extra:
            said.append(f"has arrays the entry does not take: {', '.join(extra)}")
        raise KinaUsageError(
            f"{path} {' and '.join(said)} (the entry takes {', '.join(names) or 'none'}; "
            f"the file has {', '.join(data.files) or 'none'})"
        )
    try:
        return [as_bf16(data[n]) for n in names]
    except Exception as e:  # noqa: BLE001 - any failure to read a user's file is the file's fault
        raise KinaUsageError(f"cannot read {path}: {_numpy_why(e)}") from None


def _numpy_why(e: Exception) -> str:
    """numpy's reason, without its advice to unpickle (kinac never loads pickles)."""
    text = str(e)
    if "allow_pickle" in text:
        return "it holds an object (pickled) array; kinac reads numeric arrays only"
    return text


def _parse_pairs(flag: str, text: str | None) -> dict[str, str]:
    """``K=V,K=V`` (``--dims``, ``--dtypes``) as a dict of stripped strings."""
    out: dict[str, str] = {}
    if text is None:
        return out
    for part in text.split(","):
        if not part.strip():  # `,,,`, `N=2,,D=3`, a trailing comma: a slip, not "no pairs"
            raise KinaUsageError(
                f"{flag} takes NAME=VALUE pairs separated by single commas, got {text!r} "
                "(an empty pair)"
            )
        k, eq, v = (x.strip() for x in part.partition("="))
        if not eq or not k or not v:
            raise KinaUsageError(
                f"{flag} takes NAME=VALUE pairs separated by commas, got {part.strip()!r}"
            )
        if k in out:
            raise KinaUsageError(f"{flag} gives `{k}` twice")
        out[k] = v
    return out


def _parse_dims(text: str | None) -> dict[str, Any]:
    """``--dims``: positive ints; a variadic group ``..b`` takes ``..b=4x128``."""
    out: dict[str, Any] = {}
    for k, v in _parse_pairs("--dims", text).items():
        parts = v.split("x") if k.startswith("..") else [v]
        if not all(x.isascii() and x.isdigit() and int(x) >= 1 for x in parts):  # not "４"
            raise KinaUsageError(
                f"--dims takes NAME=POSITIVE_INT pairs (a group: ..b=4x128), got {f'{k}={v}'!r}"
            )
        out[k] = tuple(int(x) for x in parts) if k.startswith("..") else int(v)
    return out


def _parse_dtypes(text: str | None) -> dict[str, str]:
    from kinac.workspace.schema import DTYPE_NAMES

    pairs = _parse_pairs("--dtypes", text)
    for k, v in pairs.items():
        if v not in DTYPE_NAMES:
            raise KinaUsageError(
                f"--dtypes: `{k}={v}`: {v!r} is not a Kina dtype (one of {' '.join(DTYPE_NAMES)})"
            )
    return pairs


def _agree_with_entry(fn: Any, dims: dict[str, Any], dtypes: dict[str, str]) -> None:
    """``--dims``/``--dtypes`` for a kina.toml entry may repeat what the entry fixes, not
    contradict it: the inputs were drawn at the flag's dims and then refused as arguments
    ("argument `x` has shape [1, ...]"), naming an argument the user never gave."""
    fixed = {**dict(fn.fixed.dims), **dict(fn.fixed.dtypes)}
    said = {**dims, **dtypes}
    clash = [k for k in sorted(said) if k in fixed and said[k] != fixed[k]]
    if clash:
        flag = "--dims" if clash[0] in dims else "--dtypes"
        shown = lambda v: "x".join(map(str, v)) if isinstance(v, tuple) else v  # noqa: E731
        raise KinaUsageError(
            f"{flag} {','.join(f'{k}={shown(said[k])}' for k in clash)}: kina.toml's entry "
            f"`{fn.fixed.name}` fixes {', '.join(f'{k} = {shown(fixed[k])}' for k in clash)}; "
            f"change it there, or add another [[entry]] of `{fn.fixed.defn}` at these values"
        )


def _require_flags(name: str, sig: Any, dims: dict[str, Any], dtypes: dict[str, str]) -> None:
    """A plain defn (not a ``kina.toml`` entry) run without a value for one of its dims or
    dtype variables: a usage error that says which flag to pass (the checker's K0802 help
    speaks of ``kina.toml``'s entry dims, which is not where a command-line run gets them)."""
    from kinac.check.bind import unbound

    no_dims, no_dtypes = unbound(sig, dims, dtypes)
    said = []
    if no_dims:
        group = (
            " (a variadic group as ..b=4x128)" if any(d.startswith("..") for d in no_dims) else ""
        )
        said.append("pass --dims " + ",".join(f"{d}=..." for d in no_dims) + group)
    if no_dtypes:
        said.append("pass --dtypes " + ",".join(f"{t}=..." for t in no_dtypes) + " (e.g. f32)")
    if said:
        missing = ", ".join(f"`{x}`" for x in (*no_dims, *no_dtypes))
        raise KinaUsageError(
            f"`{name}` is not a kina.toml entry and {missing} "
            f"{'has' if len(no_dims) + len(no_dtypes) == 1 else 'have'} no value: {'; '.join(said)}"
        )


def _bind_inputs(
    fn: Any, arrays: list[Any], given_dims: dict[str, Any]
) -> tuple[dict[str, Any], dict[str, str]]:
    """The dims and dtype variables a plain defn's ``--inputs`` arrays fix, as
    ``kinac.compile`` takes them from its arguments, so ``--dims`` is needed only for what the
    arrays do not determine (dim parameters, dims only a ``where`` clause or the result
    names). Arrays that disagree with each other are a call error naming the dissenters."""
    from kinac.api import _arg_type
    from kinac.check import bind_call_types

    missing = [p.name for p in fn.signature.params if p.is_dim and p.name not in given_dims]
    types = tuple(_arg_type(a, n) for a, n in zip(arrays, fn.tensor_params, strict=True))
    if missing:
        # The dim parameters come from --dims only, and _require_flags asks for them; what the
        # arrays fix whatever the missing ones are (the same at two placeholders) is not asked.
        seen: list[dict[str, Any]] = []
        dtypes: dict[str, str] = {}
        for placeholder in (1, 2):
            b = bind_call_types(
                fn.key.file,
                fn.signature,
                types,
                {**given_dims, **dict.fromkeys(missing, placeholder)},
            )
            if isinstance(b, tuple):
                return {}, {}
            seen.append(dict(b.dims))
            dtypes = dict(b.dtypes)
        fixed = {k: v for k, v in seen[0].items() if k not in missing and seen[1].get(k) == v}
        return fixed, dtypes
    bound = fn._bind(types, given_dims)
    return dict(bound.dims), dict(bound.dtypes)


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
    given_dims, given_dtypes = _parse_dims(args.dims), _parse_dtypes(args.dtypes)
    fn = CliDefn(
        args.path, args.entry, target=target, cache_dir=args.cache_dir, no_cache=args.no_cache
    )
    checked = pipeline.check_defn(fn.sess.db, fn.key)
    unknown = unknown_bindings(checked.sig, given_dims, given_dtypes)
    if unknown:
        raise KinaUsageError("--dims/--dtypes: " + "; ".join(unknown))
    arrays: list[Any] | None = None
    if fn.fixed is None and checked.ok and args.inputs:  # dims and dtypes from the arrays
        arrays = _load_inputs(args.inputs, fn.tensor_params)
        from_arrays = _bind_inputs(fn, arrays, given_dims)
        given_dims = {**from_arrays[0], **given_dims}
        given_dtypes = {**from_arrays[1], **given_dtypes}
    if fn.fixed is None and checked.ok:  # a plain defn: its dims come from the command line
        _require_flags(fn.key.name, checked.sig, given_dims, given_dtypes)
    dims: dict[str, Any] = dict(given_dims)
    dtypes = dict(given_dtypes)
    if fn.fixed is not None:
        _agree_with_entry(fn, given_dims, given_dtypes)
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
        arrays = arrays if arrays is not None else _load_inputs(args.inputs, names)
    else:
        rng = np.random.default_rng(args.seed)
        bound = min((d for _, t in params for d in t.shape), default=1)
        arrays = [_random_or_oom(rng, n, t.dtype, t.shape, bound) for n, t in params]
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


def run_entry(args: argparse.Namespace) -> int:
    """Build and run one entry; bad flags or inputs raise :class:`KinaUsageError` (exit 2),
    a program that does not build or a failed call raises another ``KinaError`` (exit 1)."""
    import numpy as np

    target = args.target or "cpu"
    save = _save_path(args.save) if args.save else None  # before the run: a bad path fails fast
    if getattr(args, "manifest", None) and not args.deterministic:
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


def _save_path(text: str) -> Path:
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

    from kinac.observe.profile import profile

    fn, arrays, call_dims, _, _ = _prepare(args)
    prof = profile(fn, *arrays, repeat=args.repeat, **call_dims)
    console = Console()
    if not console.is_terminal:  # piped or captured: whole names, not an 80-column squeeze
        console = Console(width=160)
    console.print(prof.table())
    if args.trace:
        try:
            prof.write_trace(args.trace)
        except OSError as e:
            raise KinaUsageError(f"--trace: cannot write {args.trace}: {e.strerror or e}") from None
        print(f"trace: {args.trace} ({len(prof.events)} events; open in ui.perfetto.dev)")
    return EXIT_OK
