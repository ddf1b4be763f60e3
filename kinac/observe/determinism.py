"""The determinism gate: ``kinac run --deterministic [--manifest F] [--target cpu|cuda]``.

A run records a manifest: the graph hash, every kernel's identity (symbol, kind, impl, dtype,
shape and its cache key {arch, layout, tile}) and a checksum of every kernel's output as it
was written, then of every entry output. Checksums are SHA-256 of the bytes: the host paths
are bit-stable (BLAS products are split into row or column blocks that never share an
output, and thread-pool tasks partition their kernel's output), so any difference is a
change. A second run compares its manifest with a stored one and names the first kernel
whose output differs: the first place the computation diverged, not the last.

Each kernel's output is read between steps through the profiling build of the entry
(:func:`kinac.observe.profile.marked_entry`): an arena buffer is checksummed when its step
ends (later steps reuse the arena), an entry output when the call returns. The arena is
zeroed before the recorded call (host and GPU): a kernel may leave bytes of its output
unwritten (the causal attention product skips the blocks above the diagonal), and those
would otherwise hold whatever the memory held, different from run to run.

On the GPU (:func:`record_gpu`) the steps run eagerly one by one on the entry's stream and
each step's output is copied back when it ends
(:func:`kinac.rt.cuda.entry_support.run_steps_reading`); the cache key is the device's arch,
the layout and the launch (``grid x block`` of each launch, or the cuBLAS call's shape). The
generated kernels reduce in a fixed order (shuffle trees, no atomics on values) and cuBLAS is
bit-reproducible on one GPU model and SM count, so every kernel is declared ``bit`` stable.
A kernel declared ``tolerance`` (none today: a split-K or atomics reduction would be) is
compared by a sketch (its L2 norm and 64 sampled values) within 1e-6 (f32/f64) or 1e-3
(bf16/f16) relative, as the runtime design says.

Both recorders take a ``plant`` hook, called with each step's output (a writable numpy array,
bf16 as uint16 bits) as the step ends; what it writes replaces the output, so a test can run a
different kernel in a step's place (a reduction whose order depends on a seed, as atomics
would make it) and check that the gate names that step.
"""

from __future__ import annotations

import ctypes
import hashlib
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

MANIFEST_VERSION = 1
Plant = Callable[[int, Any], bool]  # (step index, its output as numpy) -> changed?
TOLERANCE = {"f64": 1e-6, "f32": 1e-6, "bf16": 1e-3, "f16": 1e-3}


def _sha(data: bytes | memoryview) -> str:
    return hashlib.sha256(data).hexdigest()[:32]


def kernel_identity(step: Any, launch: str, arch: str) -> dict[str, Any]:
    """What makes a kernel this kernel: its symbol, structure and cache key."""
    return {
        "sym": step.sym,
        "kind": step.kind,
        "impl": step.impl,
        "dtype": step.dtype,
        "shape": list(step.shape),
        "cache_key": {"arch": arch, "layout": "row-major", "tile": launch},
    }


def _sketch(a: Any, dtype: str) -> dict[str, Any]:
    """What a tolerance comparison needs of an output: its L2 norm and 64 values spread
    over it (as float64; bf16 bits widened)."""
    import numpy as np

    flat = np.ascontiguousarray(a).reshape(-1)
    if dtype == "bf16":
        flat = (flat.astype(np.uint32) << 16).view(np.float32)
    v = flat.astype(np.float64)
    idx = np.linspace(0, max(v.size - 1, 0), min(64, v.size)).astype(np.int64)
    return {"l2": float(np.sqrt(np.sum(v * v))), "values": [float(x) for x in v[idx]]}


def _stability(step: Any) -> str:
    """``bit`` for every kernel kinac generates or calls today (see the module docstring)."""
    return "tolerance" if "atomic" in step.impl or "splitk" in step.impl else "bit"


def record_host(
    entry: Any, arrays: tuple[Any, ...], graph_hash: str, plant: Plant | None = None
) -> dict[str, Any]:
    """Run host ``entry`` once on ``arrays``; its manifest. ``plant`` sees (and may change) the
    output of each step that writes the arena (an entry output is checksummed, not planted)."""
    import numpy as np

    from kinac.codegen.llvm import host_target
    from kinac.observe.profile import MARK_PROTO, marked_entry, step_nbytes

    lw = entry.lowered
    sums: dict[int, str] = {}
    sketches: dict[int, dict[str, Any]] = {}
    arena_at: list[int] = []

    def mark(which: int) -> None:
        i, end = divmod(which, 2)
        s = lw.steps[i]
        if end and s.writes.startswith("arena+") and arena_at:
            at = arena_at[0] + int(s.writes.removeprefix("arena+"))
            nbytes = step_nbytes(s.dtype, s.shape)
            if nbytes:
                raw = (ctypes.c_uint8 * nbytes).from_address(at)
                view = np.frombuffer(memoryview(raw), dtype=NP_DTYPES.get(s.dtype, s.dtype))
                if plant is not None:
                    plant(i, view.reshape(s.shape))
                sketches[i] = _sketch(view, s.dtype)
            sums[i] = _sha(ctypes.string_at(at, nbytes))

    callback = MARK_PROTO(mark)
    marked, launches = marked_entry(entry, ctypes.cast(callback, ctypes.c_void_p).value or 0)
    arena_at.append(marked._scratch()[1])  # this thread's arena, where the steps write
    # A kernel may leave part of its output unwritten (a causal product skips the blocks its
    # mask hides, and nothing reads them): zeroed, so those bytes are the same in every run
    # instead of whatever the fresh arena held.
    ctypes.memset(arena_at[0], 0, lw.arena_bytes)
    in_sums = [_sha(np.ascontiguousarray(a).tobytes()) for a in arrays]
    out = marked(*arrays)
    outs = out if isinstance(out, tuple) else (out,)
    out_sums = [_sha(np.ascontiguousarray(o).tobytes()) for o in outs]
    for i, s in enumerate(lw.steps):
        if s.writes.startswith("out") and s.writes[3:].isdigit():
            sums[i] = out_sums[int(s.writes[3:])]
            sketches[i] = _sketch(np.asarray(outs[int(s.writes[3:])]), s.dtype)
    arch = host_target().cpu
    kernels = [
        {
            **kernel_identity(s, launch, arch),
            "stability": "bit",
            "checksum": sums.get(i),
            "sketch": sketches.get(i),
        }  # fmt: skip
        for i, (s, launch) in enumerate(zip(lw.steps, launches, strict=True))
    ]
    return {
        "version": MANIFEST_VERSION,
        "entry": lw.name,
        "target": "cpu",
        "graph_hash": graph_hash,
        "input_names": [p.name for p in lw.params],
        "inputs": in_sums,
        "kernels": kernels,
        "outputs": out_sums,
    }


NP_DTYPES = {"f64": "float64", "f32": "float32", "f16": "float16", "bf16": "uint16",
             "i64": "int64", "i32": "int32", "bool": "bool"}  # fmt: skip


def gpu_launch_key(step: Any) -> str:
    """The ``tile`` of a GPU step's cache key: each launch's grid x block, or the library
    call's shape."""
    if step.launches:
        return " ".join(f"{la.grid}x{la.block}" for la in step.launches)
    g = step.gemm
    if g is None:
        return step.impl
    epi = f" +{g.epilogue}" if g.epilogue else ""
    return f"{step.impl} m{g.m} n{g.n} k{g.k} batch{g.batch} {g.mode}{epi}"


def record_gpu(
    entry: Any, arrays: tuple[Any, ...], graph_hash: str, plant: Plant | None = None
) -> dict[str, Any]:
    """Run GPU ``entry`` once on ``arrays``, step by step; its manifest (``plant``: as
    :func:`record_host`, for every step)."""
    from kinac.rt.cuda.entry_support import run_steps_reading

    lw = entry.lowered
    sums: list[str] = []
    sketches: list[dict[str, Any]] = []

    def after(i: int, step: Any, buf: Any) -> bool:
        changed = bool(plant(i, buf)) if plant is not None else False
        sums.append(_sha(buf.tobytes()))
        sketches.append(_sketch(buf, step.dtype))
        return changed

    pushed = entry.device.enter()
    try:
        if entry.arena and lw.arena_bytes:  # unwritten bytes the same in every run, as on the host
            from kinac.rt.cuda import driver

            zero = driver.api().cuMemsetD8Async(entry.arena, 0, lw.arena_bytes, entry.stream.cu)
            driver.check("cuMemsetD8Async", zero)
        ins, outs = run_steps_reading(entry, arrays, after)
    finally:
        entry.device.leave(pushed)
    arch = entry.device.arch
    kernels = []
    for i, s in enumerate(lw.steps):
        k = {**kernel_identity(s, gpu_launch_key(s), arch), "stability": _stability(s)}
        k["checksum"] = sums[i]
        k["sketch"] = sketches[i]
        kernels.append(k)
    return {
        "version": MANIFEST_VERSION,
        "entry": lw.name,
        "target": f"cuda:{entry.ordinal}",
        "graph_hash": graph_hash,
        "input_names": [p.name for p in lw.params],
        "inputs": [_sha(a.tobytes()) for a in ins],
        "kernels": kernels,
        "outputs": [_sha(o.tobytes()) for o in outs],
    }


def _within_tolerance(a: dict[str, Any], b: dict[str, Any]) -> bool:
    """Two records of a ``tolerance`` kernel agree within its dtype's bound."""
    sa, sb = a.get("sketch"), b.get("sketch")
    if not sa or not sb or len(sa["values"]) != len(sb["values"]):
        return False
    tol = TOLERANCE.get(b.get("dtype", ""), 0.0)
    scale = max(abs(sa["l2"]), 1e-30)
    if abs(sa["l2"] - sb["l2"]) > tol * scale:
        return False
    top = max((abs(v) for v in sa["values"]), default=0.0) or 1.0
    return all(abs(x - y) <= tol * top for x, y in zip(sa["values"], sb["values"], strict=True))


def first_difference(old: dict[str, Any], new: dict[str, Any]) -> str | None:
    """``None`` if ``new`` reproduces ``old``, else what differs first (a kernel by name)."""
    if old.get("version") != new.get("version"):
        return f"the manifest is version {old.get('version')!r}, this kinac writes {new['version']}"
    was, now = str(old.get("target", "?")), str(new.get("target", "?"))
    if was.split(":")[0] != now.split(":")[0]:
        return f"it was recorded on target {was}, this run is on {now}: record one per target"
    if old.get("graph_hash") != new["graph_hash"] and old.get("entry") != new.get("entry"):
        return (
            f"it was recorded for `{old.get('entry')}`, this run is `{new.get('entry')}` "
            "(another defn or workspace): record a new manifest for it"
        )
    if old.get("graph_hash") != new["graph_hash"]:
        return (
            f"the graph changed (hash {old.get('graph_hash')} recorded, {new['graph_hash']} "
            "now): record a new manifest"
        )
    if len(old.get("inputs", [])) != len(new["inputs"]):
        return f"{len(old.get('inputs', []))} inputs recorded, {len(new['inputs'])} now"
    names = new.get("input_names") or []
    for i, (a, b) in enumerate(zip(old.get("inputs", []), new["inputs"], strict=True)):
        if a != b:
            name = f" ({names[i]})" if i < len(names) else ""
            return f"input {i}{name} differs from the recorded run's (same --seed or --inputs?)"
    olds, news = old.get("kernels", []), new["kernels"]
    tolerated = False  # a kernel differed within its bound: later ones compare by sketch too
    for i, (a, b) in enumerate(zip(olds, news, strict=False)):
        ident_a = {k: v for k, v in a.items() if k not in ("checksum", "sketch")}
        ident_b = {k: v for k, v in b.items() if k not in ("checksum", "sketch")}
        if ident_a != ident_b:
            keys = ident_a.keys() | ident_b.keys()  # a field only one of them has, too
            changed = sorted(k for k in keys if ident_a.get(k) != ident_b.get(k))
            return f"kernel {i} ({b['sym']}, {b['kind']}) is not the recorded one: {', '.join(changed)} differ"
        if a.get("checksum") != b.get("checksum"):
            if (b.get("stability") == "tolerance" or tolerated) and _within_tolerance(a, b):
                tolerated = True  # declared not bit-stable (or fed by one), within its bound
                continue
            return (
                f"kernel {i} ({b['sym']}, {b['kind']} {b['dtype']}{b['shape']}) is the first "
                f"whose output differs (checksum {a.get('checksum')} recorded, "
                f"{b.get('checksum')} now)"
            )
    if len(olds) != len(news):
        return f"{len(olds)} kernels recorded, {len(news)} now"
    if len(old.get("outputs", [])) != len(new["outputs"]):
        return f"{len(old.get('outputs', []))} outputs recorded, {len(new['outputs'])} now"
    for i, (a, b) in enumerate(zip(old.get("outputs", []), new["outputs"], strict=True)):
        if a != b and not tolerated:
            return f"output {i} differs (checksum {a} recorded, {b} now)"
    return None


def read_manifest(path: Path) -> dict[str, Any] | str:
    """The manifest at ``path``, or why it cannot be read (a usage problem, not a bug)."""
    try:
        text = path.read_text()
    except (OSError, UnicodeDecodeError) as e:
        return f"cannot read {path} as a determinism manifest: {e}"
    if not text.strip():
        return f"{path} is empty (a run stopped while writing it?): delete it to record a new one"
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as e:
        return (
            f"cannot read {path} as a determinism manifest: not whole JSON ({e}); "
            "cut short or edited by hand? delete it to record a new one"
        )
    if not isinstance(doc, dict) or "kernels" not in doc or "graph_hash" not in doc:
        return f"{path} is not a determinism manifest (no graph_hash / kernels)"
    why = manifest_problem(doc)
    return f"{path} is not a determinism manifest kinac wrote: {why}" if why else doc


def manifest_problem(doc: dict[str, Any]) -> str | None:
    """What in a (hand-edited or damaged) manifest is not as :func:`record_host` writes it,
    or None: so a comparison never meets a field of the wrong type."""
    version = doc.get("version")
    if isinstance(version, bool) or not isinstance(version, int):
        return f"its version is {version!r}, not a whole number"
    for key in ("graph_hash", "entry", "target"):
        if not isinstance(doc.get(key), str):
            return f"its {key} is {json_brief(doc.get(key))}, not text"
    for key in ("inputs", "outputs"):
        sums = doc.get(key)
        if not isinstance(sums, list) or not all(isinstance(c, str) for c in sums):
            return f"its {key} is {json_brief(sums)}, not a list of checksums"
    kernels = doc["kernels"]
    if not isinstance(kernels, list):
        return f"its kernels is {json_brief(kernels)}, not a list"
    for i, k in enumerate(kernels):
        if not isinstance(k, dict):
            return f"its kernel {i} is {json_brief(k)}, not an object"
        for key in ("sym", "kind", "impl", "dtype"):
            if not isinstance(k.get(key), str):
                return f"its kernel {i} has {key} {json_brief(k.get(key))}, not text"
        if not isinstance(k.get("shape"), list):
            return f"its kernel {i} has shape {json_brief(k.get('shape'))}, not a list"
        if k.get("checksum") is not None and not isinstance(k["checksum"], str):
            return f"its kernel {i} has checksum {json_brief(k['checksum'])}, not text"
        sketch = k.get("sketch")
        if sketch is not None and not (
            isinstance(sketch, dict)
            and isinstance(sketch.get("l2"), int | float)
            and isinstance(sketch.get("values"), list)
            and all(isinstance(v, int | float) for v in sketch["values"])
        ):
            return f"its kernel {i} has a sketch that is not {{l2, values}} numbers"
    return None


def json_brief(v: Any) -> str:
    """A value as a manifest check shows it: its JSON, cut to 40 characters (also used by
    :mod:`kinac.train.observe` for the train part of a manifest)."""
    text = json.dumps(v)
    return text if len(text) <= 40 else text[:37] + "..."


def write_manifest(path: Path, manifest: dict[str, Any]) -> None:
    """Written whole or not at all (as a trace is): never a manifest cut short."""
    from kinac.observe.trace import write_trace_file

    write_trace_file(path, manifest)
