"""The gradient queries: ``grad_graph`` and the compile path of the gradient graph.

Why a module of its own: :mod:`kinac.pipeline` registers the forward stages; differentiation is
one more stage on top of ``entry_graph`` (before ``shard_propagate`` and lowering, so the
gradient graph is lowered, cached and, later, sharded like any entry's graph). Keys are
``(EntryKey, wrt)``: the loss entry at concrete dims and the parameter names, in order.

    entry_graph ─► grad_graph ─┬► grad_lowered ─► grad_object_code ─► host runtime
                               └► grad_gpu_lowered ─► grad_ptx ─► CUDA runtime

A kina.toml entry with ``grad = ["w1", ...]`` builds its gradient too (:func:`entry_grad_report`,
called by ``entry_report``): a request the loss cannot satisfy is K0155 on the entry.

The kernels of a gradient graph go through the same ``host_kernel_llvm`` /
``host_kernel_object`` queries as the forward entries': a gradient's matmul kernel that is
textually the forward's is compiled once.
"""

from __future__ import annotations

import json
from typing import Any

from kinac.diag.model import Diagnostic, Label
from kinac.pipeline import (
    entry_graph,
    entry_internal_errors,
    host_kernel_llvm,
    host_kernel_object,
    host_target,
)
from kinac.pipeline_support import EntryKey
from kinac.pipeline_toml import entry_ref
from kinac.rules import Database, query
from kinac.rules.codec import record
from kinac.tir.graph import Graph
from kinac.workspace.model import EntryConfig

GradKey = tuple[EntryKey, tuple[str, ...]]


@record
class GradSpec:
    """The value-and-gradient graph (None when it cannot be built), the forward entry's
    diagnostics, and why a request is refused (a non-scalar loss, an unknown or integer
    ``wrt``): ``problem`` is a sentence for the user."""

    graph: Graph | None
    diagnostics: tuple[Diagnostic, ...]
    problem: str | None = None


@query("grad_graph", stage="grad")
def grad_graph(db: Database, key: GradKey) -> GradSpec:
    """The graph of ``(loss, d loss / d wrt...)`` (:func:`kinac.grad.value_and_grad`)."""
    from kinac.grad import GradError, check_request, value_and_grad

    entry, wrt = key
    spec = entry_graph(db, entry)
    if spec.graph is None:
        return GradSpec(None, tuple(spec.diagnostics))
    try:
        check_request(spec.graph, wrt)
    except GradError as e:
        return GradSpec(None, tuple(spec.diagnostics), str(e))
    with entry_internal_errors(entry, "differentiation"):
        return GradSpec(value_and_grad(spec.graph, wrt), tuple(spec.diagnostics))


@query("grad_lowered", stage="lower", tools=("xdsl",))
def grad_lowered(db: Database, key: GradKey) -> Any:
    """The gradient graph lowered for the host: wrapper and canonical kernels, each kernel
    lowered by ``host_kernel_llvm`` (shared with every entry)."""
    from dataclasses import replace

    from kinac.ice import in_kernel
    from kinac.ir.host.kernels import split_graph

    spec = grad_graph(db, key)
    if spec.graph is None:
        return None
    with entry_internal_errors(key[0], "host lowering of the gradient"):
        lo = split_graph(spec.graph)
        calls = set(lo.library_calls)
        for step, k in zip(lo.steps, lo.kernels, strict=True):
            with in_kernel(step.sym):
                calls.update(host_kernel_llvm(db, k).library_calls)
    return replace(lo, library_calls=tuple(sorted(calls)))


@query("grad_object_code", stage="codegen", tools=("llvmlite",))
def grad_object_code(db: Database, key: GradKey) -> tuple[bytes, ...] | None:
    """Object code of the gradient graph: the wrapper's, then each distinct kernel's."""
    from kinac.codegen.llvm import compile_object
    from kinac.ice import in_kernel

    lo = grad_lowered(db, key)
    if lo is None:
        return None
    with entry_internal_errors(key[0], "host code generation of the gradient (LLVM)"):
        objects = [compile_object(lo.llvm_ir, host_target(db, ()))]
        for step, k in zip(lo.steps, lo.kernels, strict=True):
            with in_kernel(step.sym):
                objects.append(host_kernel_object(db, k))
    return tuple(dict.fromkeys(objects))


@query("grad_gpu_lowered", stage="lower", tools=("xdsl",))
def grad_gpu_lowered(db: Database, key: GradKey) -> Any:
    """The gradient graph lowered for the GPU, its kernels through the shared per-kernel
    queries (``gpu_kernel_llvm``): :func:`kinac.pipeline_gpu.lower_graph`, after
    :func:`kinac.grad.remat.rematerialize` (large bf16/f16 attention probabilities and free
    elementwise values are recomputed in the backward instead of kept from the forward: GPU
    memory)."""
    from kinac.grad.remat import rematerialize
    from kinac.pipeline_gpu import lower_graph

    spec = grad_graph(db, key)
    if spec.graph is None:
        return None
    graph = rematerialize(spec.graph)
    return lower_graph(db, graph, key[0], "GPU lowering of the gradient")


@query("grad_ptx", stage="codegen", tools=("llvmlite",))
def grad_ptx(db: Database, key: GradKey) -> str | None:
    """PTX of the gradient graph: its distinct kernels (``gpu_kernel_ptx``), linked."""
    from kinac.pipeline_gpu import link_lowered

    lo = grad_gpu_lowered(db, key)
    if lo is None:
        return None
    return link_lowered(db, lo, key[0], "PTX generation of the gradient (LLVM NVPTX)")


def grad_entry_error(entry: EntryConfig, problem: str) -> Diagnostic:
    """K0155: a kina.toml entry's ``grad`` request the loss cannot satisfy."""
    return Diagnostic(
        "K0155",
        "error",
        f"entry `{entry.name}`: grad = {json.dumps(list(entry.grad))}: {problem}",
        Label(entry_ref(entry.name, "grad"), f"entry `{entry.name}`"),
        help="name float tensor parameters of a defn returning a scalar float (`-> f32`)",
    )


def entry_grad_report(
    db: Database, entry: EntryConfig, key: EntryKey
) -> tuple[tuple[Diagnostic, ...], tuple[tuple[str, str, str], ...]]:
    """The gradient artifacts of an entry with ``grad = [...]`` (none without), or K0155."""
    from kinac.rules.codec import fingerprint

    if not entry.grad:
        return (), ()
    gkey = (key, tuple(entry.grad))
    spec = grad_graph(db, gkey)
    if spec.graph is None:
        return ((grad_entry_error(entry, spec.problem),) if spec.problem else ()), ()
    name = entry.name
    arts = [(name, "grad-graph", fingerprint(spec.graph))]
    if key.target == "cpu":
        arts.append((name, "grad-llvm-ir", fingerprint(grad_lowered(db, gkey).llvm_ir)))
        arts.append((name, "grad-object", fingerprint(grad_object_code(db, gkey))))
    else:
        arts.append((name, "grad-llvm-ir", fingerprint(grad_gpu_lowered(db, gkey).llvm_ir)))
        arts.append((name, "grad-ptx", fingerprint(grad_ptx(db, gkey))))
    return (), tuple(arts)
