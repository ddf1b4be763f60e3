"""An entry assembled from its pieces' kernels: buffer plan, steps and the wrapper's LLVM IR.

Why: an entry cut into pieces (:mod:`kinac.ir.pieces`) has each piece lowered and fused on its
own, once per distinct piece (:func:`kinac.ir.host.kernels.lower_piece`, a query). What is left
per entry is only what depends on where the kernels sit: which buffer each value lives in
(the same first fit over live ranges as the whole-entry lowering, over the same kernel
sequence, so the same offsets), the steps, and the wrapper that calls the kernels in order.
The wrapper is written here as LLVM IR text directly (pointer arithmetic into the arena,
calls, thread-pool launches): no xDSL, so it costs a few milliseconds for hundreds of calls,
and a build whose pieces are cached never imports xDSL.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Hashable, Mapping, Sequence
from typing import Any, TypeVar

from kinac.artifacts.host import BufferSpec, HostKernel, LoweredEntry, Step
from kinac.check.limits import MAX_TENSOR_BYTES
from kinac.dtypes import ITEMSIZE
from kinac.errors import KinaCompileError
from kinac.ir.host.wrapper_ir import KernelCall, entry_wrapper, piece_function, pieces_wrapper
from kinac.ir.host.wrapper_ir import task_name as task_name  # re-exported
from kinac.rules.codec import record
from kinac.tir.graph import Graph

ALIGN = 64  # bytes: every arena buffer starts on a cache line
STATUS_SLOTS = 8
V = TypeVar("V", bound=Hashable)


def symbol_name(name: str) -> str:
    """A C identifier for an entry name (Kina names may hold ``-``, ``?`` or non-ASCII)."""
    safe = re.sub(r"[^A-Za-z0-9_]", "_", name)
    if safe == name and safe[:1].isalpha():
        return name
    return f"k_{safe}_{hashlib.blake2b(name.encode(), digest_size=4).hexdigest()}"


def wrapper_name(entry: str) -> str:
    """The exported symbol of an entry: ``void kinac_call_NAME(void **argv)``."""
    return f"kinac_call_{entry}"


def kernel_symbol(text: str, status_step: int) -> str:
    """The function name of a canonical kernel: a digest of its text (and of the step a
    gather reports its errors as)."""
    return "k_" + hashlib.blake2b(f"{status_step}\n{text}".encode(), digest_size=10).hexdigest()


def first_fit(
    results: Sequence[V],
    reads: Sequence[Sequence[V]],
    where: dict[V, tuple[str, int]],
    size_of: Callable[[V], int],
    align: int,
    inplace: Mapping[int, Sequence[V]] | None = None,
) -> int:
    """Give each kernel result (``results[i]``, reading ``reads[i]``) not yet in ``where`` an
    ``align``-ed arena offset: first fit over live ranges (values never live at the same time
    share memory; a kernel's output never overlaps its inputs, except: kernel ``i``'s result
    takes the slot of a value in ``inplace[i]`` that dies at ``i`` and is large enough, the
    GPU's in-place kernels, :func:`kinac.ir.gpu.plan.inplace_inputs`). Returns the arena's
    size."""
    last: dict[V, int] = {}
    for i, rs in enumerate(reads):
        for u in rs:
            last[u] = i
    # offset, end, first, last use of the values still live (in kernel order, a value whose
    # last use is past can never clash again: dropping it keeps long chains linear)
    placed: list[tuple[int, int, int, int]] = []
    arena = 0
    for i, v in enumerate(results):
        if v in where:
            continue
        size = -(-size_of(v) // align) * align
        live = (i, last.get(v, i))
        placed = [p for p in placed if p[3] >= i]
        slot = _dying_slot(placed, where, last, inplace.get(i, ()) if inplace else (), i, size)
        if slot is not None:  # in place: the input's slot lives on as the result's
            o, e, a, _ = placed[slot]
            placed[slot] = (o, e, a, live[1])
            where[v] = ("temp", o)
            continue
        clash = sorted((o, e) for o, e, a, b in placed if a <= live[1] and live[0] <= b)
        off = 0
        for o, e in clash:
            if off + size <= o:
                break
            off = max(off, e)
        placed.append((off, off + size, *live))
        arena = max(arena, off + size)
        where[v] = ("temp", off)
    if arena >= MAX_TENSOR_BYTES:  # each tensor is below it (K0806); together they may not be
        raise KinaCompileError(
            f"the entry's intermediate tensors need {arena} bytes at once, past kinac's limit "
            f"of 2^62 bytes (64-bit offsets into its scratch arena): build it at smaller dims"
        )
    return arena


def _dying_slot(
    placed: Sequence[tuple[int, int, int, int]],
    where: Mapping[V, tuple[str, int]],
    last: Mapping[V, int],
    candidates: Sequence[V],
    i: int,
    size: int,
) -> int | None:
    """The index in ``placed`` of a candidate's arena slot that ends its life at kernel ``i``
    and holds ``size`` bytes (None: no such candidate)."""
    for u in candidates:
        kind, off = where.get(u, ("", -1))
        if kind != "temp" or last.get(u) != i:
            continue
        for k, (o, e, _, b) in enumerate(placed):
            if o == off and b == i and e - o >= size:
                return k
    return None


@record
class PieceKernel:
    """One kernel of a lowered piece. ``reads``: the piece's inputs (``0..n-1``) then its
    earlier kernels' results (``n + i``); ``launch``: ``(extent, tasks)`` when it runs on the
    thread pool; ``aux``: a gather's index shape."""

    kernel: HostKernel
    kind: str
    impl: str
    dtype: str
    shape: tuple[int, ...]
    aux: tuple[int, ...]
    reads: tuple[int, ...]
    launch: tuple[int, int] | None


@record
class LoweredPiece:
    """A piece lowered and fused: its kernels in order, and which values are its outputs
    (numbered as in :attr:`PieceKernel.reads`)."""

    inputs: int
    kernels: tuple[PieceKernel, ...]
    outputs: tuple[int, ...]


def _nbytes(dtype: str, shape: tuple[int, ...]) -> int:
    n = 1
    for d in shape:
        n *= d
    return max(1, n) * ITEMSIZE[dtype]


# Steps and param specs made before, by value (in this process, bounded): an edit's stitch
# rebuilds every step, and those of the layers it did not reach equal the previous build's.
# Taken from here they are the same objects, so the codec reuses their runs' text
# (kinac.rules.codec._RUN_OF) and encoding the L=32 entry's 576 steps costs only its new ones.
# A record is immutable, and its key is every field it is made from: exact.
_MADE: dict[tuple[Any, ...], Any] = {}
_MADE_MAX = 100_000


def _made() -> dict[tuple[Any, ...], Any]:
    if len(_MADE) > _MADE_MAX:
        _MADE.clear()
    return _MADE


def buffer_spec(name: str, dtype: str, shape: tuple[int, ...]) -> BufferSpec:
    """``BufferSpec(name, dtype, shape)``, the one made before if any (see ``_MADE``)."""
    key = ("param", name, dtype, shape)
    spec = _MADE.get(key)
    if spec is None:
        spec = _MADE[key] = BufferSpec(name, dtype, shape)
    return spec  # type: ignore[no-any-return]


def stitch(
    graph: Graph,
    pieces: Sequence[tuple[tuple[int, ...], tuple[int, ...]]],
    lowered: Sequence[LoweredPiece],
    separate: bool = False,
) -> LoweredEntry:
    """The entry ``graph`` from its pieces (each ``(inputs, outputs)`` as entry nodes, see
    :class:`kinac.ir.pieces.Piece`) and their lowerings, in order. ``separate``: the wrapper
    calls one function per piece, each its own module in ``piece_code`` (what the pipeline
    compiles, once per distinct piece function); else it calls every kernel itself (one
    self-contained module, :func:`flat_wrapper_ir`'s text)."""
    nparams = len(graph.params)
    value_of: dict[int, int] = {i: i for i in range(nparams)}  # entry node -> value
    ks: list[PieceKernel] = []
    finals: list[int] = []
    results: list[int] = []
    reads: list[tuple[int, ...]] = []
    # per piece: its buffers (inputs, then its kernels' results), first kernel, kernel count
    spans: list[tuple[list[int], int, int, LoweredPiece]] = []
    for (ins, outs), lp in zip(pieces, lowered, strict=True):
        local = [value_of[v] for v in ins]
        spans.append((local, len(ks), len(lp.kernels), lp))
        for pk in lp.kernels:
            reads.append(tuple(local[r] for r in pk.reads))
            results.append(nparams + len(ks))
            local.append(results[-1])
            ks.append(pk)
        for o, r in zip(outs, lp.outputs, strict=True):
            value_of[o] = local[r]
        finals = [local[r] for r in lp.outputs]  # the last piece's: the entry's, in order
    where: dict[int, tuple[str, int]] = {i: ("param", i) for i in range(nparams)}
    for j, v in enumerate(finals):  # a repeated output is a copy: each has its own value
        where[v] = ("out", j)
    nbytes: dict[tuple[str, tuple[int, ...]], int] = {}  # 32 layers: a few distinct shapes
    sizes = {}
    for v, k in zip(results, ks, strict=True):
        got = nbytes.get((k.dtype, k.shape))
        if got is None:
            got = nbytes[(k.dtype, k.shape)] = _nbytes(k.dtype, k.shape)
        sizes[v] = got
    arena = max(first_fit(results, reads, where, sizes.__getitem__, ALIGN), ALIGN)
    # each buffer's name once (a value is read by several steps)
    names = {v: f"arena+{n}" if kind == "temp" else f"{kind}{n}" for v, (kind, n) in where.items()}

    steps: list[Step] = []
    kernels: list[HostKernel] = []
    remembered = _made()
    for i, (k, v, rs) in enumerate(zip(ks, results, reads, strict=True)):
        fields = (k.kind, k.impl, k.dtype, k.shape, tuple([names[u] for u in rs]), names[v], k.aux)
        step = remembered.get((i, *fields))
        if step is None:
            step = remembered[(i, *fields)] = Step(f"k{i}_{k.kind}", *fields)
        steps.append(step)
        hk = k.kernel
        if k.kind == "gather":  # it reports errors as its step in this entry
            hk = HostKernel(kernel_symbol(hk.text, i), hk.text, i)
        kernels.append(hk)
    params = tuple([buffer_spec(n, t.dtype, t.shape) for n, t in graph.params])
    outputs = tuple(
        BufferSpec(f"out{j}", graph.nodes[o].type.dtype, graph.nodes[o].type.shape)
        for j, o in enumerate(graph.outputs)
    )
    symbol = wrapper_name(symbol_name(graph.name))
    distinct: dict[HostKernel, int] = {}  # each kernel once, steps by index
    by_id: dict[int, int] = {}  # the same kernel object (a piece's, in every layer): no hash
    index_of: list[int] = []
    for hk in kernels:
        at = by_id.get(id(hk))
        if at is None:
            at = by_id[id(hk)] = distinct.setdefault(hk, len(distinct))
        index_of.append(at)
    index = tuple(index_of)
    nargs = len(params) + len(outputs) + 2
    piece_code: tuple[str, ...] = ()
    if separate:
        fns: list[tuple[str, list[int]]] = []
        code: dict[str, str] = {}
        # a piece function by its shape: its buffer count and each call's symbol, kind, launch
        # and reads (its result is the piece's next buffer), as plain tuples (cheaper to hash
        # and compare than calls), computed once per piece object without a gather (its
        # kernels' symbols are its own; a gather's is its step's); calls built for a new shape
        made: dict[tuple[int, tuple[Any, ...]], str] = {}
        shape_of: dict[int, tuple[int, tuple[Any, ...]]] = {}
        for local, first, count, lp in spans:
            if not count:
                continue
            key = shape_of.get(id(lp))
            if key is None:
                key = (len(local), tuple([(kernels[j].symbol, ks[j].kind, ks[j].launch, ks[j].reads)
                                          for j in range(first, first + count)]))  # fmt: skip
                if not any(pk.kind == "gather" for pk in lp.kernels):
                    shape_of[id(lp)] = key
            psym = made.get(key)
            if psym is None:  # 32 identical layers: one function written
                n = len(local) - count
                mine = tuple(KernelCall(sy, kind, la, n + j, rs)
                             for j, (sy, kind, la, rs) in enumerate(key[1]))  # fmt: skip
                psym, parts = piece_function(mine, len(local))
                made[key] = psym
                code.setdefault(psym, parts.text())
            fns.append((psym, local))
        text = pieces_wrapper(symbol, nargs, len(params), where.__getitem__, fns).text()
        piece_code = tuple(code.values())
    else:
        calls = [
            KernelCall(hk.symbol, k.kind, k.launch, v, rs)
            for hk, k, v, rs in zip(kernels, ks, results, reads, strict=True)
        ]
        text = entry_wrapper(symbol, nargs, len(params), where.__getitem__, calls).text()
    launch: dict[int, tuple[int, int] | None] = {}
    for i, k in zip(index, ks, strict=True):
        launch.setdefault(i, k.launch)
    return LoweredEntry(
        name=graph.name,
        symbol=symbol,
        llvm_ir=text,
        params=params,
        outputs=outputs,
        arena_bytes=arena,
        status_slots=STATUS_SLOTS,
        steps=tuple(steps),
        library_calls=("kinac_parallel",) if any(k.launch for k in ks) else (),
        kernel_set=tuple(distinct),
        kernel_index=index,
        kernel_launch=tuple(launch[i] for i in range(len(distinct))),
        piece_code=piece_code,
    )
