"""``kinac run WORKSPACE ENTRY``: build an entry, run it on random or given inputs, time it.

Inputs are random (normal floats, small non-negative ints, random bools) from ``--seed``, or
arrays from ``--inputs`` (``.npz`` named after the parameters, or one ``.npy``). Prints each
input's and output's shape and dtype, summary statistics of the outputs, and the median time.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

EXIT_OK, EXIT_PROGRAM_ERRORS, EXIT_USAGE = 0, 1, 2


def _random_input(rng: Any, dtype: str, shape: tuple[int, ...], bound: int) -> Any:
    import numpy as np

    if dtype in ("f64", "f32", "f16", "bf16"):
        np_dt = {"f64": np.float64, "f32": np.float32, "f16": np.float16, "bf16": np.float32}[dtype]
        return rng.standard_normal(shape).astype(np_dt)
    if dtype in ("i64", "i32"):
        return rng.integers(0, max(bound, 1), size=shape).astype(np.int64 if dtype == "i64" else np.int32)
    return rng.random(shape) < 0.5


def _load_inputs(path: str, names: list[str]) -> list[Any]:
    import numpy as np

    p = Path(path)
    if not p.is_file():
        raise ValueError(f"no such inputs file: {path}")
    try:
        data = np.load(p, allow_pickle=False)
    except (OSError, ValueError) as e:
        raise ValueError(f"cannot read {path} as .npy/.npz: {e}") from None
    if isinstance(data, np.ndarray):
        if len(names) != 1:
            raise ValueError(f"a .npy file holds one array but the entry takes {len(names)}: use a .npz")
        return [data]
    missing = [n for n in names if n not in data.files]
    if missing:
        raise ValueError(f"{path} lacks arrays named {', '.join(missing)} (it has {', '.join(data.files)})")
    return [data[n] for n in names]


def _parse_pairs(text: str | None) -> dict[str, str]:
    """``K=V,K=V`` (``--dims``, ``--dtypes``) as a dict of stripped strings."""
    pairs = (part.partition("=") for part in (text or "").split(",") if part.strip())
    return {k.strip(): v.strip() for k, _, v in pairs}


def _parse_dims(text: str | None) -> dict[str, int]:
    out: dict[str, int] = {}
    for k, v in _parse_pairs(text).items():
        if not v.isdigit() or int(v) < 1:
            raise ValueError(f"--dims takes NAME=POSITIVE_INT pairs, got {f'{k}={v}'!r}")
        out[k] = int(v)
    return out


def _to_host(o: Any) -> Any:
    """An output as a numpy array (target cuda returns kinac CUDA tensors; bf16 widened)."""
    if not hasattr(o, "__dlpack_device__") or hasattr(o, "__array__"):
        return o
    from kinac.tir.interp import bf16_to_f32

    a = o.numpy()
    return bf16_to_f32(a) if o.dtype.name == "bfloat16" else a


def _synchronizer(target: str) -> Any:
    """A function that waits for the device (a no-op on the CPU)."""
    if target != "cuda":
        return lambda: None
    from kinac.rt import cuda

    return lambda: cuda.current_device().synchronize()  # the device the last call ran on


def run_entry(args: argparse.Namespace) -> int:
    import numpy as np

    from kinac import pipeline
    from kinac.api import CompiledDefn
    from kinac.errors import KinaError

    target = args.target or "cpu"
    try:
        fn = CompiledDefn(args.path, args.entry, target=target, cache_dir=args.cache_dir, no_cache=args.no_cache)
    except KinaError as e:
        print(str(e), file=sys.stderr)
        return EXIT_PROGRAM_ERRORS
    dims: dict[str, Any]
    try:
        dims = dict(_parse_dims(args.dims))
    except ValueError as e:
        print(f"kinac: error: {e}", file=sys.stderr)
        return EXIT_USAGE
    dtypes = _parse_pairs(args.dtypes)
    if fn.fixed is not None:
        dims = {**dict(fn.fixed.dims), **dims}
        dtypes = {**dict(fn.fixed.dtypes), **dtypes}
    key = pipeline.EntryKey(fn.key.file, fn.key.name, tuple(sorted(dims.items())), tuple(sorted(dtypes.items())), target)
    spec = pipeline.entry_graph(fn.sess.db, key)
    if spec.graph is None:
        print(fn._render(list(spec.diagnostics)), file=sys.stderr)
        return EXIT_PROGRAM_ERRORS
    params = spec.graph.params
    names = [n for n, _ in params]
    if args.inputs:
        try:
            arrays = _load_inputs(args.inputs, names)
        except ValueError as e:
            print(f"kinac: error: {e}", file=sys.stderr)
            return EXIT_USAGE
    else:
        rng = np.random.default_rng(args.seed)
        bound = min((d for _, t in params for d in t.shape), default=1)
        arrays = [_random_input(rng, t.dtype, t.shape, bound) for _, t in params]
    call_dims = {k: v for k, v in dims.items() if k in fn.dim_params}
    sync = _synchronizer(target)
    try:
        t0 = time.perf_counter()
        out = fn(*arrays, **call_dims)
        sync()
        first = time.perf_counter() - t0
        times = []
        for _ in range(max(args.repeat, 1)):
            t0 = time.perf_counter()
            out = fn(*arrays, **call_dims)
            sync()  # device work is asynchronous: time it to completion
            times.append(time.perf_counter() - t0)
    except KinaError as e:
        print(str(e), file=sys.stderr)
        return EXIT_PROGRAM_ERRORS
    outs = tuple(_to_host(o) for o in (out if isinstance(out, tuple) else (out,)))
    print(f"{args.entry}: {fn.key.name} from {fn.key.file}, target {target}")
    for n, t in params:
        print(f"  in  {n:<6} {t.dtype}{list(t.shape)}")
    for i, o in enumerate(outs):
        a = np.asarray(o, dtype=np.float64)
        print(f"  out {i:<6} {o.dtype}{list(o.shape)}  mean {a.mean():+.6g}  std {a.std():.6g}  "
              f"min {a.min():+.6g}  max {a.max():+.6g}  finite {bool(np.isfinite(a).all())}")
    times.sort()
    print(f"  time: first call {first * 1000:.1f} ms (build or cache load), then median "
          f"{times[len(times) // 2] * 1000:.3f} ms over {len(times)} runs")
    if args.save:
        np.savez(args.save, *outs)
    return EXIT_OK
