"""The LLVM IR that runs an entry's kernels: one function per piece, and the entry's wrapper.

Why per piece: the wrapper of a 32-layer entry called 576 kernels, 69 KB of IR compiled at
every build of the entry (33 ms of a one-layer edit). A piece's calls are the same in every
layer, only the buffers differ, so each piece becomes a function of its buffers
(``void p_<digest>(ptr b0, ..., ptr status)``: the piece's inputs, then one per kernel result,
then the status buffer), compiled once per distinct text (the pipeline's
``host_piece_object``), and the entry's wrapper only computes the buffers' addresses and calls
its pieces in order. Written here as text directly (pointer arithmetic, calls, thread-pool
launches through ``k_<digest>__task`` trampolines): no xDSL.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from typing import Any

from kinac.artifacts.host import LoweredEntry

PIECE_PLACEHOLDER = "piece"


@dataclass(frozen=True)
class KernelCall:
    """One kernel call of a piece: its symbol, kind (a gather also gets the status buffer),
    pool launch ``(extent, tasks)`` or None, and its buffers by number in the piece."""

    symbol: str
    kind: str
    launch: tuple[int, int] | None
    out: Hashable
    reads: tuple[Hashable, ...]


def task_name(kernel: str) -> str:
    """``void kernel__task(ptr ctx, i64 chunk)``: one chunk of a launched kernel."""
    return f"{kernel}__task"


@dataclass
class IRParts:
    """Declarations, trampolines and definitions of one module, each once (by name)."""

    declared: dict[str, str]
    tasks: dict[str, str]
    defined: dict[str, str]

    @staticmethod
    def empty() -> IRParts:
        return IRParts({}, {}, {})

    def add(self, other: IRParts) -> None:
        for mine, theirs in ((self.declared, other.declared), (self.tasks, other.tasks),
                             (self.defined, other.defined)):  # fmt: skip
            for k, v in theirs.items():
                mine.setdefault(k, v)

    def text(self) -> str:
        out = [d for k, d in self.declared.items() if k not in self.defined]
        if self.tasks:
            out.append("declare void @kinac_parallel(ptr, ptr, i64)")
        out.extend(self.tasks.values())
        out.extend(self.defined.values())
        return "\n".join(out) + "\n"


def calls_ir(
    calls: Sequence[KernelCall],
    buf: Callable[[Hashable], str],
    status: str,
    parts: IRParts,
    body: list[str],
) -> None:
    """Append to ``body`` the lines calling ``calls`` in order (buffer ``i`` is the value
    ``buf(i)``, which may append its own lines first); their declarations and trampolines go
    to ``parts``."""
    for i, c in enumerate(calls):
        args = [buf(c.out), *(buf(u) for u in c.reads)]
        if c.kind == "gather":
            args.append(status)
        nbufs = len(args)
        extra = ", i64, i64" if c.launch else ""
        parts.declared.setdefault(
            c.symbol, f'declare void @"{c.symbol}"({", ".join(["ptr"] * nbufs)}{extra})'
        )
        if c.launch is None:
            body.append(f'  call void @"{c.symbol}"({", ".join(f"ptr {a}" for a in args)})')
            continue
        extent, ntasks = c.launch
        body.append(f"  %c{i} = alloca ptr, i64 {nbufs}, align 8")
        for j, a in enumerate(args):
            body.append(f"  %c{i}.{j} = getelementptr inbounds ptr, ptr %c{i}, i64 {j}")
            body.append(f"  store ptr {a}, ptr %c{i}.{j}")
        task = task_name(c.symbol)
        body.append(f'  call void @kinac_parallel(ptr @"{task}", ptr %c{i}, i64 {ntasks})')
        if task not in parts.tasks:
            parts.tasks[task] = _task(c.symbol, task, nbufs, extent, ntasks)


def piece_function(calls: Sequence[KernelCall], nbufs: int) -> tuple[str, IRParts]:
    """The function running one piece's ``calls`` over its ``nbufs`` buffers: its symbol
    (``p_`` and a digest of its text, so identical pieces are one function) and its parts.

    ``void p(ptr argv, ptr arena, ptr status, ptr refs)``: buffer ``i`` is named by
    ``refs[i]`` (an ``i64`` array), the entry argument ``argv[r]`` when ``r >= 0``, else the
    arena at byte offset ``-r - 1`` (:func:`buffer_ref`): the entry's wrapper passes a
    constant array and loads nothing, so it stays one short call per piece however many
    buffers and arguments the entry has (its code generation is what an edit pays for)."""
    parts = IRParts.empty()
    body: list[str] = []
    for i in range(nbufs):  # branch-free: both candidates, then a select
        body += [
            f"  %q{i} = getelementptr inbounds i64, ptr %refs, i64 {i}",
            f"  %r{i} = load i64, ptr %q{i}",
            f"  %s{i} = icmp sge i64 %r{i}, 0",
            f"  %i{i} = select i1 %s{i}, i64 %r{i}, i64 0",
            f"  %p{i} = getelementptr inbounds ptr, ptr %argv, i64 %i{i}",
            f"  %v{i} = load ptr, ptr %p{i}",
            f"  %o{i} = sub i64 -1, %r{i}",
            f"  %t{i} = getelementptr inbounds i8, ptr %arena, i64 %o{i}",
            f"  %b{i} = select i1 %s{i}, ptr %v{i}, ptr %t{i}",
        ]
    calls_ir(calls, lambda i: f"%b{i}", "%status", parts, body)
    params = "ptr %argv, ptr %arena, ptr %status, ptr %refs"
    define = "define void @{name}(" + params + ") nounwind {\nentry:\n" + "\n".join(body)
    define += "\n  ret void\n}"
    digest = hashlib.blake2b(
        (IRParts(parts.declared, parts.tasks, {"": define}).text()).encode(), digest_size=10
    ).hexdigest()
    symbol = f"p_{digest}"
    parts.defined[symbol] = define.replace("{name}", f'"{symbol}"', 1)
    return symbol, parts


def buffer_ref(kind: str, n: int, nparams: int) -> int:
    """How a piece function is told where a buffer is: an entry argument by its index in
    ``argv`` (params, then outputs), an arena buffer by ``-offset - 1``."""
    if kind == "param":
        return n
    if kind == "out":
        return nparams + n
    return -n - 1


def pieces_wrapper(
    symbol: str,
    nargs: int,
    nparams: int,
    where: Callable[[Any], tuple[str, int]],
    pieces: Sequence[tuple[str, Sequence[Hashable]]],
) -> IRParts:
    """``void symbol(void **argv)`` (``nargs`` pointers: params, outputs, arena, status)
    calling each piece function ``(symbol, its buffers as entry values)`` in order; each
    buffer's place comes from ``where`` (``param``/``out``/``temp`` and index or offset)."""
    parts = IRParts.empty()
    body = [
        f"  %arena.p = getelementptr inbounds ptr, ptr %argv, i64 {nargs - 2}",
        "  %arena = load ptr, ptr %arena.p",
        f"  %status.p = getelementptr inbounds ptr, ptr %argv, i64 {nargs - 1}",
        "  %status = load ptr, ptr %status.p",
    ]
    tables: list[str] = []
    for k, (psym, values) in enumerate(pieces):
        refs = ", ".join(f"i64 {buffer_ref(*where(v), nparams)}" for v in values)
        tables.append(f"@refs{k} = private unnamed_addr constant [{len(values)} x i64] [{refs}]")
        parts.declared.setdefault(psym, f'declare void @"{psym}"(ptr, ptr, ptr, ptr)')
        body.append(f'  call void @"{psym}"(ptr %argv, ptr %arena, ptr %status, ptr @refs{k})')
    parts.declared.update((f"@refs{k}", t) for k, t in enumerate(tables))  # globals: first
    define = f'define void @"{symbol}"(ptr %argv) nounwind {{\nentry:\n' + "\n".join(body)
    parts.defined[symbol] = define + "\n  ret void\n}"
    return parts


def entry_wrapper(
    symbol: str,
    nargs: int,
    nparams: int,
    where: Callable[[Any], tuple[str, int]],
    calls: Sequence[KernelCall],
) -> IRParts:
    """``void symbol(void **argv)`` (``nargs`` pointers: params, outputs, arena, status)
    calling each of ``calls`` (buffers as entry values) itself: the flat wrapper. The
    buffers' places come from ``where`` (``param``/``out``/``temp`` and index or offset)."""
    parts = IRParts.empty()
    body: list[str] = []
    for j in range(nargs):
        body.append(f"  %a{j}.p = getelementptr inbounds ptr, ptr %argv, i64 {j}")
        body.append(f"  %a{j} = load ptr, ptr %a{j}.p")
    arena, status = f"%a{nargs - 2}", f"%a{nargs - 1}"
    offsets: dict[int, str] = {}

    def buf(v: Hashable) -> str:
        kind, n = where(v)
        if kind == "param":
            return f"%a{n}"
        if kind == "out":
            return f"%a{nparams + n}"
        if n not in offsets:
            offsets[n] = f"%t{n}"
            body.append(f"  %t{n} = getelementptr inbounds i8, ptr {arena}, i64 {n}")
        return offsets[n]

    calls_ir(calls, buf, status, parts, body)
    define = f'define void @"{symbol}"(ptr %argv) nounwind {{\nentry:\n' + "\n".join(body)
    parts.defined[symbol] = define + "\n  ret void\n}"
    return parts


def flat_wrapper_ir(lo: LoweredEntry) -> str:
    """The wrapper of ``lo`` calling every kernel itself, in one module (what
    ``stitch(..., separate=False)`` writes): for tools that want each step's call in the
    entry's own function (the profiler's marks), whatever ``lo`` was compiled as."""
    if not lo.piece_code:
        return lo.llvm_ir

    def where(name: Hashable) -> tuple[str, int]:
        assert isinstance(name, str)
        if name.startswith("arena+"):
            return ("temp", int(name[6:]))
        kind = name.rstrip("0123456789")
        return (kind, int(name[len(kind) :]))

    calls = [
        KernelCall(lo.kernel_set[i].symbol, s.kind, lo.kernel_launch[i], s.writes, s.reads)
        for s, i in zip(lo.steps, lo.kernel_index, strict=True)
    ]
    nargs = len(lo.params) + len(lo.outputs) + 2
    return entry_wrapper(lo.symbol, nargs, len(lo.params), where, calls).text()


def _task(sym: str, task: str, nbufs: int, extent: int, tasks: int) -> str:
    """Chunk ``i`` of a launched kernel's outer loop: ``[i*c, min((i+1)*c, extent))``."""
    chunk = -(-extent // tasks)
    lines = [f'define internal void @"{task}"(ptr %ctx, i64 %i) nounwind {{', "entry:"]
    for j in range(nbufs):
        lines.append(f"  %b{j}.p = getelementptr inbounds ptr, ptr %ctx, i64 {j}")
        lines.append(f"  %b{j} = load ptr, ptr %b{j}.p")
    lines += [
        f"  %lo = mul i64 %i, {chunk}",
        f"  %hi0 = add i64 %lo, {chunk}",
        f"  %past = icmp ugt i64 %hi0, {extent}",
        f"  %hi = select i1 %past, i64 {extent}, i64 %hi0",
    ]
    bufs = ", ".join(f"ptr %b{j}" for j in range(nbufs))
    lines += [f'  call void @"{sym}"({bufs}, i64 %lo, i64 %hi)', "  ret void", "}"]
    return "\n".join(lines)
