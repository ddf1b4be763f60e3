"""The determinism gate: ``kinac run --deterministic [--manifest F]`` (host target).

A run records a manifest: the graph hash, every kernel's identity (symbol, kind, impl, dtype,
shape and its cache key {arch, layout, tile}) and a checksum of every kernel's output as it
was written, then of every entry output. Checksums are SHA-256 of the bytes: the host paths
are bit-stable (BLAS products are split into row or column blocks that never share an
output, and thread-pool tasks partition their kernel's output), so any difference is a
change. A second run compares its manifest with a stored one and names the first kernel
whose output differs: the first place the computation diverged, not the last.

Each kernel's output is read between steps through the profiling build of the entry
(:func:`kinac.observe.profile.marked_entry`): an arena buffer is checksummed when its step
ends (later steps reuse the arena), an entry output when the call returns.
"""

from __future__ import annotations

import ctypes
import hashlib
import json
from pathlib import Path
from typing import Any

MANIFEST_VERSION = 1


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


def record_host(entry: Any, arrays: tuple[Any, ...], graph_hash: str) -> dict[str, Any]:
    """Run host ``entry`` once on ``arrays``; its manifest."""
    import numpy as np

    from kinac.codegen.llvm import host_target
    from kinac.observe.profile import MARK_PROTO, marked_entry, step_nbytes

    lw = entry.lowered
    sums: dict[int, str] = {}
    arena_at: list[int] = []

    def mark(which: int) -> None:
        i, end = divmod(which, 2)
        s = lw.steps[i]
        if end and s.writes.startswith("arena+") and arena_at:
            at = arena_at[0] + int(s.writes.removeprefix("arena+"))
            sums[i] = _sha(ctypes.string_at(at, step_nbytes(s.dtype, s.shape)))

    callback = MARK_PROTO(mark)
    marked, launches = marked_entry(entry, ctypes.cast(callback, ctypes.c_void_p).value or 0)
    arena_at.append(marked._scratch()[1])  # this thread's arena, where the steps write
    in_sums = [_sha(np.ascontiguousarray(a).tobytes()) for a in arrays]
    out = marked(*arrays)
    outs = out if isinstance(out, tuple) else (out,)
    out_sums = [_sha(np.ascontiguousarray(o).tobytes()) for o in outs]
    for i, s in enumerate(lw.steps):
        if s.writes.startswith("out") and s.writes[3:].isdigit():
            sums[i] = out_sums[int(s.writes[3:])]
    arch = host_target().cpu
    kernels = [
        {**kernel_identity(s, launch, arch), "checksum": sums.get(i)}
        for i, (s, launch) in enumerate(zip(lw.steps, launches, strict=True))
    ]
    return {
        "version": MANIFEST_VERSION,
        "entry": lw.name,
        "target": "cpu",
        "graph_hash": graph_hash,
        "inputs": in_sums,
        "kernels": kernels,
        "outputs": out_sums,
    }


def first_difference(old: dict[str, Any], new: dict[str, Any]) -> str | None:
    """``None`` if ``new`` reproduces ``old``, else what differs first (a kernel by name)."""
    if old.get("version") != new.get("version"):
        return f"the manifest is version {old.get('version')}, this kinac writes {new['version']}"
    if old.get("graph_hash") != new["graph_hash"]:
        return (
            f"the graph changed (hash {old.get('graph_hash')} recorded, {new['graph_hash']} "
            "now): record a new manifest"
        )
    for i, (a, b) in enumerate(zip(old.get("inputs", []), new["inputs"], strict=False)):
        if a != b:
            return f"input {i} differs from the recorded run's (same --seed or --inputs?)"
    olds, news = old.get("kernels", []), new["kernels"]
    for i, (a, b) in enumerate(zip(olds, news, strict=False)):
        ident_a = {k: v for k, v in a.items() if k != "checksum"}
        ident_b = {k: v for k, v in b.items() if k != "checksum"}
        if ident_a != ident_b:
            changed = sorted(k for k in ident_b if ident_a.get(k) != ident_b[k])
            return f"kernel {i} ({b['sym']}, {b['kind']}) is not the recorded one: {', '.join(changed)} differ"
        if a.get("checksum") != b.get("checksum"):
            return (
                f"kernel {i} ({b['sym']}, {b['kind']} {b['dtype']}{b['shape']}) is the first "
                f"whose output differs (checksum {a.get('checksum')} recorded, "
                f"{b.get('checksum')} now)"
            )
    if len(olds) != len(news):
        return f"{len(olds)} kernels recorded, {len(news)} now"
    for i, (a, b) in enumerate(zip(old.get("outputs", []), new["outputs"], strict=False)):
        if a != b:
            return f"output {i} differs (checksum {a} recorded, {b} now)"
    return None


def read_manifest(path: Path) -> dict[str, Any] | str:
    """The manifest at ``path``, or why it cannot be read (a usage problem, not a bug)."""
    try:
        doc = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        return f"cannot read {path} as a determinism manifest: {e}"
    if not isinstance(doc, dict) or "kernels" not in doc or "graph_hash" not in doc:
        return f"{path} is not a determinism manifest (no graph_hash / kernels)"
    return doc


def write_manifest(path: Path, manifest: dict[str, Any]) -> None:
    path.write_text(json.dumps(manifest, indent=1) + "\n")
