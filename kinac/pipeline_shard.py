"""Sharded lowering as queries: one per-device program per entry, each segment compiled once.

    entry_graph ─► shard_propagate ─► device_program ─┬► segment_lowered ─► segment_object (host)
    shard_spans (firewall) ───────────┘               └► segment_gpu_lowered ─► segment_ptx (GPU)

``device_program`` is keyed by the entry; the segment queries by the segment's Graph (its
value, not its entry), so two entries, layers or meshes that produce the same local segment
share its code, and an annotation edit that leaves a segment unchanged recompiles nothing.
They call the host path's own per-kernel queries (``host_kernel_llvm``,
``host_kernel_object``) and the GPU path's functions (``lower_graph_gpu``, ``compile_ptx``):
a segment is compiled exactly like an entry. Registered by the import at the end of
:mod:`kinac.pipeline`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kinac import pipeline
from kinac.pipeline_support import DefnKey, EntryKey
from kinac.rules import Database, query

if TYPE_CHECKING:
    from kinac.artifacts.sharded import DeviceProgram
    from kinac.diag.model import NodeRef
    from kinac.tir.graph import Graph


@query("shard_spans", stage="shard")
def shard_spans(db: Database, refs: tuple[NodeRef, ...]) -> tuple[str, ...]:
    """Firewall: ``file:line:col`` of each annotation the collectives cite. It re-runs on an
    edit of the file, but its value changes only when one of those spans moves, so an edit
    elsewhere does not rebuild the per-device program."""
    out = []
    for r in refs:
        span = pipeline.resolve_span(db, r)
        out.append(f"{span.file}:{span.line}:{span.col}" if span is not None else "")
    return tuple(out)


@query("device_program", stage="shard")
def device_program(db: Database, key: EntryKey) -> DeviceProgram | None:
    """The entry's SPMD program (:mod:`kinac.shard.device`): None when the entry does not
    specialise, its sharding has errors, or no annotation names a mesh."""
    from kinac.diag.model import Label
    from kinac.shard.device import device_program as build

    spec = pipeline.entry_graph(db, key)
    plan = pipeline.shard_propagate(db, key)
    if spec.graph is None or plan is None or plan.mesh is None:
        return None
    if any(d.is_error for d in plan.diagnostics):
        return None
    refs = tuple(dict.fromkeys(c.cause.loc for c in plan.collectives if c.cause is not None))
    spans = dict(zip(refs, shard_spans(db, refs), strict=True))

    def span_of(label: Label | None) -> str:
        return spans.get(label.loc, "") if label is not None else ""

    with pipeline.entry_internal_errors(key, "sharded lowering (per-device program)"):
        return build(spec.graph, plan, span_of)


@query("segment_lowered", stage="lower", tools=("xdsl",))
def segment_lowered(db: Database, segment: Graph) -> Any:
    """One local segment lowered for the host, as ``lowered`` lowers an entry: its wrapper and
    canonical kernels, each kernel lowered by the shared ``host_kernel_llvm`` query."""
    from dataclasses import replace

    from kinac.ice import in_kernel, internal_errors
    from kinac.ir.host.kernels import split_graph

    with internal_errors(segment.name, "host lowering (segment)"):
        lo = split_graph(segment)
        calls = set(lo.library_calls)
        for step, k in zip(lo.steps, lo.kernels, strict=True):
            with in_kernel(step.sym):
                calls.update(pipeline.host_kernel_llvm(db, k).library_calls)
    return replace(lo, library_calls=tuple(sorted(calls)))


@query("segment_object", stage="codegen", tools=("llvmlite",))
def segment_object(db: Database, segment: Graph) -> tuple[bytes, ...]:
    """Native objects of one segment: its wrapper's, then each kernel's (shared with every
    entry and segment using the same kernel)."""
    from kinac.codegen.llvm import compile_object
    from kinac.ice import in_kernel, internal_errors

    lo = segment_lowered(db, segment)
    with internal_errors(segment.name, "host code generation (segment)"):
        objects = [compile_object(lo.llvm_ir, pipeline.host_target(db, ()))]
        for step, k in zip(lo.steps, lo.kernels, strict=True):
            with in_kernel(step.sym):
                objects.append(pipeline.host_kernel_object(db, k))
    return tuple(dict.fromkeys(objects))


@query("segment_gpu_lowered", stage="lower", tools=("xdsl",))
def segment_gpu_lowered(db: Database, segment: Graph) -> Any:
    """One local segment lowered for the GPU (the function ``gpu_lowered`` uses)."""
    from kinac.ice import internal_errors
    from kinac.ir.gpu.pipeline import lower_graph_gpu

    with internal_errors(segment.name, "GPU lowering (segment)"):
        return lower_graph_gpu(segment)


@query("segment_ptx", stage="codegen", tools=("llvmlite",))
def segment_ptx(db: Database, segment: Graph) -> str:
    """PTX of one segment for the target's architecture."""
    from kinac.codegen.ptx import compile_ptx
    from kinac.ice import internal_errors

    lo = segment_gpu_lowered(db, segment)
    with internal_errors(segment.name, "PTX generation (segment)"):
        return compile_ptx(lo.llvm_ir, pipeline.target(db, ()).arch)


def entry_shard_artifacts(
    db: Database, name: str, key: EntryKey
) -> tuple[tuple[str, str, str], ...]:
    """The build's artifacts of a sharded entry: its per-device program and each segment's
    object code (host) or PTX (GPU), so ``kinac build`` lowers what ``--simulate`` runs and
    reports its failures (none for an entry without a mesh)."""
    from kinac.rules.codec import fingerprint

    program = device_program(db, key)
    if program is None:
        return ()
    arts = [(name, "device-program", fingerprint(program))]
    for k, s in enumerate(program.segments):
        if key.target == "cpu":
            arts.append((name, f"segment{k}-object", fingerprint(segment_object(db, s))))
        else:
            arts.append((name, f"segment{k}-ptx", fingerprint(segment_ptx(db, s))))
    return tuple(arts)


def host_segments(db: Database, program: DeviceProgram) -> list[Any]:
    """Each segment of ``program`` compiled and loaded for the host (callables taking the
    segment's input arrays, returning its output array or a tuple of them)."""
    from kinac.rt.host import load_entry

    return [load_entry(segment_lowered(db, s), segment_object(db, s)) for s in program.segments]


def gpu_segments(db: Database, program: DeviceProgram) -> list[tuple[Any, str]]:
    """Each segment's GPU lowering and PTX (loaded by the CUDA runtime: the NCCL issue)."""
    return [(segment_gpu_lowered(db, s), segment_ptx(db, s)) for s in program.segments]


__all__ = [
    "DefnKey",
    "EntryKey",
    "device_program",
    "entry_shard_artifacts",
    "gpu_segments",
    "host_segments",
    "segment_gpu_lowered",
    "segment_lowered",
    "segment_object",
    "segment_ptx",
    "shard_spans",
]
