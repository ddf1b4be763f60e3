"""A GPU entry assembled from its pieces' kernels: buffer plan, steps, launches, one module.

Why: as on the host (:mod:`kinac.ir.pieces`, :mod:`kinac.ir.host.stitch`), an entry is cut at
its calls into pieces, each run through the GPU passes once per distinct piece (the
``gpu_piece`` query, :func:`kinac.ir.gpu.kernels_to_nvvm.piece_kernels`), so identical layers
are lowered and fused once and an edit re-lowers only the pieces it changed. What is left per
entry depends only on where the kernels sit: the buffer each value lives in (the same first
fit over live ranges as the whole-entry lowering, over the same kernel sequence), the steps,
the cuBLAS calls' buffers and each step's launches. Plain Python: no xDSL, so a build whose
pieces and kernels are cached never imports it.

A cut is taken where the host's rule allows (every value live across it is materialised by
``fuse-kernels`` in the whole graph) and the GPU's fusions cannot cross it either: no value
live across it is a matmul, reduction or softmax result, or arithmetic over one of the last
two (``gpu-fuse-epilogues``, ``gpu-fuse-rows`` and ``gpu-fuse-attention`` merge those kernels
into their readers), and each is read only by arithmetic or by ops that materialise (a view of
it read by a cuBLAS matmul would be planned differently from a piece's input). So the pieces' kernels in order are exactly the
whole entry's (``tests/test_gpu_kernels_incremental.py`` offers every position as a cut).
"""

from __future__ import annotations

import hashlib
import operator
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from kinac.artifacts.gpu import (
    GemmOperand,
    GpuGemm,
    GpuKernel,
    GpuKernelCode,
    GpuLoweredEntry,
    GpuStep,
)
from kinac.artifacts.host import BufferSpec
from kinac.errors import KinaCompileError
from kinac.ir.gpu.emit import NVPTX_LAYOUT, NVPTX_TRIPLE, add_declaration
from kinac.ir.gpu.gemm_group import Span, first_use_order, grouped_gemm, plan_groups
from kinac.ir.gpu.plan import inplace_inputs
from kinac.ir.host.stitch import buffer_spec, first_fit
from kinac.ir.pieces import ARITH, NOT_FUSED, Piece, cut
from kinac.rules.codec import fields_of, record
from kinac.tir.graph import Graph

ALIGN = 256  # arena offsets: cuBLAS(Lt) and 16-byte vector accesses want aligned operands
STATUS_SLOTS = 8
MAX_GRID = 2**31 - 1  # CUDA's gridDim.x
ROW_OPS = frozenset({"softmax", "reduce_sum", "reduce_mean", "reduce_max", "reduce_min"})
FUSED_ON_GPU = ROW_OPS | {"matmul"}


def gpu_kernel_symbol(text: str, status_step: int) -> str:
    """The function name of a canonical GPU kernel: a digest of its text (and of the step a
    gather reports its errors as)."""
    digest = hashlib.blake2b(f"gpu\n{status_step}\n{text}".encode(), digest_size=10)
    return f"k_{digest.hexdigest()}"


@record
class GpuPieceKernel:
    """One kernel of a piece fused for the GPU. ``reads``: the piece's inputs (``0..n-1``) then
    its earlier kernels' results (``n + i``); ``gemm``: a cuBLAS call whose buffers are named
    ``v<ref>`` (renamed to the entry's buffers when stitched); ``kernel``: a generated kernel
    (a gather's keyed by its step in the piece, re-keyed by its step in the entry)."""

    kernel: GpuKernel | None
    kind: str
    impl: str
    dtype: str
    shape: tuple[int, ...]
    reads: tuple[int, ...]
    bytes_moved: int
    gemm: GpuGemm | None = None
    aux: tuple[int, ...] = ()


@record
class GpuLoweredPiece:
    """A piece through the GPU passes: its kernels in order, and which values are its outputs
    (numbered as in :attr:`GpuPieceKernel.reads`)."""

    inputs: int
    kernels: tuple[GpuPieceKernel, ...]
    outputs: tuple[int, ...]


@dataclass
class PendingStep:
    """A step of the entry; a generated kernel's launches wait for its lowering. ``op``: the
    ``kina.kernel`` it came from, when lowered in-process (its IR is annotated)."""

    step: GpuStep
    kernel: GpuKernel | None  # None: a library call (``step.gemm``)
    op: Any = None
    # the entry's kernels (by position) this step computes: several for a grouped cuBLAS
    # call (:mod:`kinac.ir.gpu.gemm_group`); ``ops``: their ``kina.kernel`` ops, in-process
    members: tuple[int, ...] = ()
    ops: tuple[Any, ...] = ()


@dataclass
class SplitEntry:
    """An entry's steps, buffer plan and canonical kernels, before any kernel is lowered."""

    steps: list[PendingStep]
    arena_bytes: int

    @property
    def kernels(self) -> tuple[GpuKernel, ...]:
        """The distinct generated kernels, in order of first use."""
        return tuple(dict.fromkeys(p.kernel for p in self.steps if p.kernel is not None))


def gpu_cut(graph: Graph, calls: tuple[tuple[int, int], ...]) -> tuple[Piece, ...]:
    """``graph`` cut at the call boundaries where neither ``fuse-kernels`` nor the GPU's
    fusions could merge across (see the module docstring)."""
    n, nparams = len(graph.nodes), len(graph.params)
    users: list[list[int]] = [[] for _ in range(n)]
    last = list(range(n))
    for i, node in enumerate(graph.nodes):
        for a in node.args:
            users[a].append(i)
            last[a] = i
    for o in graph.outputs:
        last[o] = n
    # arithmetic over a reduction or softmax may end a row kernel (gpu-fuse-rows), which can
    # merge on into its reader: such values do not cross a cut either
    ops = [node.op for node in graph.nodes]
    rowish = [False] * n
    for i, node in enumerate(graph.nodes):
        op = ops[i]
        if op in ROW_OPS:
            rowish[i] = True
        elif op in ARITH:
            for a in node.args:
                if rowish[a]:
                    rowish[i] = True
                    break
    # a reader that is neither arithmetic nor materialising: a fusion may merge into it
    merges = [op not in ARITH and op not in NOT_FUSED for op in ops]
    # values the GPU's fusions could merge with a reader, counted over the positions they cross
    bad = [0] * (n + 2)
    for v in range(nparams, n):
        if last[v] <= v:
            continue
        fusible = ops[v] in FUSED_ON_GPU or rowish[v]
        if not fusible:
            for u in users[v]:
                if merges[u]:
                    fusible = True
                    break
        if fusible:
            bad[v + 1] += 1
            bad[last[v] + 1] -= 1
    live, ok = 0, set()
    for p in range(n + 1):
        live += bad[p]
        if live == 0:
            ok.add(p)
    allowed = tuple((p, p) for c in calls for p in c if p in ok)
    return cut(graph, allowed)


def stitch_gpu(
    nparams: int,
    pieces: Sequence[tuple[tuple[int, ...], tuple[int, ...]]],
    lowered: Sequence[GpuLoweredPiece],
) -> SplitEntry:
    """An entry of ``nparams`` params from its pieces (each ``(inputs, outputs)`` as entry
    nodes, see :class:`kinac.ir.pieces.Piece`) and their GPU lowerings, in order: the buffer
    plan of the whole entry, each step with its cuBLAS call's buffers, its canonical kernel."""
    value_of: dict[int, int] = {i: i for i in range(nparams)}  # entry node -> value
    ks: list[GpuPieceKernel] = []
    results: list[int] = []
    reads: list[tuple[int, ...]] = []
    bufs: list[dict[int, int]] = []  # per kernel: piece ref -> entry value (its gemm's names)
    finals: list[int] = []
    for (ins, outs), lp in zip(pieces, lowered, strict=True):
        local = [value_of[v] for v in ins]
        for pk in lp.kernels:
            reads.append(tuple(local[r] for r in pk.reads))
            results.append(nparams + len(ks))
            bufs.append({r: local[r] for r in pk.reads} | {len(local): results[-1]})
            local.append(results[-1])
            ks.append(pk)
        for o, r in zip(outs, lp.outputs, strict=True):
            value_of[o] = local[r]
        finals = [local[r] for r in lp.outputs]  # the last piece's: the entry's, in order
    where: dict[int, tuple[str, int]] = {i: ("param", i) for i in range(nparams)}
    for j, v in enumerate(finals):  # a returned param stays a param
        where.setdefault(v, ("out", j))
    nbytes: dict[tuple[str, tuple[int, ...]], int] = {}  # 32 layers: a few distinct shapes
    sizes = {}
    for v, k in zip(results, ks, strict=True):
        got = nbytes.get((k.dtype, k.shape))
        if got is None:
            got = nbytes[(k.dtype, k.shape)] = max(_nbytes(k.dtype, k.shape), 1)
        sizes[v] = got
    inplace = _inplace(ks, reads)
    arena = max(first_fit(results, reads, where, sizes.__getitem__, ALIGN, inplace), ALIGN)

    def name(v: int) -> str:
        kind, n = where[v]
        return f"arena+{n}" if kind == "temp" else f"{kind}{n}"

    def span(v: int) -> Span:
        kind, n = where[v]
        return ("arena", n, n + sizes[v]) if kind == "temp" else (f"{kind}{n}", 0, 2**62)

    def a_value(j: int) -> int:
        g = ks[j].gemm
        assert g is not None
        return bufs[j][int(g.a.buf[1:])]

    groups = plan_groups(ks, results, reads, a_value, span, lambda v: where[v][0] == "temp")
    steps: list[PendingStep] = []
    made = _STEPS
    if len(made) > _MADE_MAX:
        made.clear()
    is_ = operator.is_
    for i, run in enumerate(groups):
        # a step is a function of its position, its piece kernels and its buffers' names:
        # the one made before for the same (kept alive, so compared by identity)
        pks = tuple([ks[j] for j in run])
        key = (i, tuple([id(pk) for pk in pks]), tuple([name(results[j]) for j in run]),
               tuple([name(u) for j in run for u in reads[j]]))  # fmt: skip
        hit = made.get(key)
        if hit is not None and all(map(is_, hit[0], pks)):
            steps.append(PendingStep(hit[1], hit[2], members=tuple(run)))
            continue
        k, v, rs = ks[run[0]], results[run[0]], reads[run[0]]
        gemm = None
        if k.gemm:
            gemm = _renamed(k.gemm, {r: name(u) for r, u in bufs[run[0]].items()})
        impl = k.impl if k.kernel is None else "kernel"
        step = GpuStep(f"k{i}_{k.kind}", k.kind, impl, k.dtype, k.shape,
                       tuple([name(u) for u in rs]), name(v), (), gemm, k.bytes_moved, k.aux)  # fmt: skip
        if len(run) > 1:  # products sharing their left operand: one grouped cuBLAS call
            gs = [_renamed(ks[j].gemm, {r: name(u) for r, u in bufs[j].items()}) for j in run]  # type: ignore[arg-type]
            written = tuple(name(results[j]) for j in run)
            step = replace(step, gemm=grouped_gemm(gs), also_writes=written[1:],
                           reads=first_use_order([[name(u) for u in reads[j]] for j in run],
                                                 dict.fromkeys(written)),
                           bytes_moved=sum(ks[j].bytes_moved for j in run))  # fmt: skip
        kernel = k.kernel
        if kernel is not None and k.kind == "gather":  # its errors name its step in the entry
            kernel = replace(kernel, symbol=gpu_kernel_symbol(kernel.text, i), status_step=i)
        steps.append(PendingStep(step, kernel, members=tuple(run)))
        made[key] = (pks, step, kernel)
    return SplitEntry(steps, arena)


# Steps made before, in this process (bounded): an edit's stitch rebuilds every step, and
# those of the layers it did not reach are the previous build's objects again, so the codec
# reuses their runs' text (kinac.rules.codec._RUN_OF); the same for their launches bound in
# ``link_steps`` (by the step and its kernel's code, both kept alive: compared by identity).
_STEPS: dict[tuple[Any, ...], tuple[tuple[Any, ...], GpuStep, GpuKernel | None]] = {}
_LINKED: dict[int, tuple[GpuStep, GpuKernelCode, GpuStep]] = {}
_MADE_MAX = 100_000


def _inplace(ks: Sequence[GpuPieceKernel], reads: Sequence[tuple[int, ...]]) -> dict[int, Any]:
    """Per kernel, the values it reads that its result may overwrite (:func:`inplace_inputs`;
    the first fit takes one only where it dies at that kernel)."""
    from kinac.dtypes import ITEMSIZE

    out: dict[int, Any] = {}
    known = _INPLACE
    if len(known) > 4096:
        known.clear()
    for i, (k, rs) in enumerate(zip(ks, reads, strict=True)):
        if k.kernel is not None and k.kernel.source == "kina":
            key = (k.kind, k.kernel.text, ITEMSIZE[k.dtype])
            pos = known.get(key)
            if pos is None:
                pos = known[key] = inplace_inputs(*key)
            if pos:
                out[i] = tuple(rs[p] for p in pos)
    return out


# inplace_inputs by (kind, kernel text, item size): a pure function of them, parsed from the
# kernel's text by regular expressions, which 32 identical layers asked 12 times each (13 ms
# of a 32-layer entry's stitch; the texts are the same objects, so their hashes are cached)
_INPLACE: dict[tuple[str, str, int], tuple[int, ...]] = {}


def _nbytes(dtype: str, shape: tuple[int, ...]) -> int:
    from kinac.dtypes import ITEMSIZE

    n = 1
    for d in shape:
        n *= d
    return n * ITEMSIZE[dtype]


def _renamed(g: GpuGemm, names: Mapping[int, str]) -> GpuGemm:
    """``g`` with its buffers (``v<ref>`` placeholders) named as in the entry."""

    def op(o: GemmOperand) -> GemmOperand:
        return _with(o, buf=names[int(o.buf[1:])])

    return _with(g, a=op(g.a), b=op(g.b), c=op(g.c), epi=names[int(g.epi[1:])] if g.epi else "")


def _with(obj: Any, **changes: Any) -> Any:
    """``dataclasses.replace`` for a record, by its fields in declaration order: a third of
    the time (it introspects every field on each call; a 32-layer entry renames ~1,400
    operands and gemms)."""
    cls = type(obj)
    return cls(*[changes[f] if f in changes else getattr(obj, f) for f in fields_of(cls)])


def link_steps(split: SplitEntry, codes: Mapping[str, GpuKernelCode]) -> tuple[GpuStep, ...]:
    """Each step with its kernel's launches bound to the step's buffers."""
    out: list[GpuStep] = []
    linked = _LINKED
    if len(linked) > _MADE_MAX:
        linked.clear()
    for p in split.steps:
        if p.kernel is None:
            out.append(p.step)
            continue
        code, s = codes[p.kernel.symbol], p.step
        hit = linked.get(id(s))
        if hit is not None and hit[0] is s and hit[1] is code:
            out.append(hit[2])
            continue
        for f in code.launches:
            if f.grid > MAX_GRID:
                raise KinaCompileError(
                    f"kernel {s.sym} of this entry needs a GPU launch of {f.grid} blocks, past "
                    f"CUDA's {MAX_GRID}: its tensor {s.dtype}{list(s.shape)} is too large for "
                    "the GPU"
                )
        args = (s.writes, *s.reads, *(("status",) if code.has_status else ()))
        out.append(_with(s, launches=tuple([_with(f, args=args) for f in code.launches])))
        linked[id(s)] = (s, code, out[-1])
    return tuple(out)


def kernel_module(codes: Sequence[GpuKernelCode], flavour: str = "nvptx") -> str:
    """One LLVM module holding ``codes``' functions: target header, merged declarations (one
    per function name, whatever mix of dtypes the kernels use), then each kernel's body."""
    out: list[str] = []
    if flavour == "nvptx":
        out += [f'target triple = "{NVPTX_TRIPLE}"', f'target datalayout = "{NVPTX_LAYOUT}"', ""]
    decls: dict[str, str] = {}
    for c in codes:
        for decl in c.declares:
            add_declaration(decls, decl)
    out.extend(sorted(decls.values()))
    out.append("")
    out.extend(c.body for c in codes)
    return "\n".join(out)


def assemble_entry(
    graph: Graph, split: SplitEntry, codes: Mapping[str, GpuKernelCode], flavour: str = "nvptx"
) -> GpuLoweredEntry:
    """The entry from its split and its distinct kernels' code (``codes``, by symbol):
    launches bound to buffers, and one LLVM module of the distinct kernels (``llvm_ir``)."""
    steps = link_steps(split, codes)
    kernels = split.kernels
    used = [codes[k.symbol] for k in kernels]
    params = tuple([buffer_spec(n, t.dtype, t.shape) for n, t in graph.params])
    outs = [graph.nodes[o].type for o in graph.outputs]
    # an output stays on the GPU unless the program moves it (to-host): on its own GPU, or the
    # entry's (that of its GPU params, else 0); params from the host are copied in by the
    # runtime whatever their declared placement
    gpu = next((t.device for _, t in graph.params if t.device.startswith("cuda:")), "cuda:0")
    odev = tuple(
        "cpu" if graph.nodes[o].op == "to_host" else (t.device if t.device != "cpu" else gpu)
        for o, t in zip(graph.outputs, outs, strict=True)
    )
    outputs = tuple(BufferSpec(f"out{j}", t.dtype, t.shape) for j, t in enumerate(outs))
    return GpuLoweredEntry(
        name=graph.name,
        llvm_ir=kernel_module(used, flavour),
        params=params,
        outputs=outputs,
        param_devices=tuple(t.device for _, t in graph.params),
        output_devices=odev,
        arena_bytes=split.arena_bytes,
        status_slots=STATUS_SLOTS,
        steps=steps,
        functions=tuple(f.function for c in used for f in c.launches),
        kernels=kernels,
    )
