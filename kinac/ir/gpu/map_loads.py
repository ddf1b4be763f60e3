"""A map kernel's 16-byte loads issued before its arithmetic (issue 14; off unless enabled).

Why: :class:`~kinac.ir.gpu.read.BodyReader` emits each load where the formula first needs it.
In the bf16 ``silu(a) * b`` map of the 45M block, ptxas placed the first vector group's loads
inside that group's store branch (their only user) and loaded ``b`` only once ``a`` had
arrived and ``silu`` was computed: two memory round trips in a row per thread; inside one
basic block ptxas moves each load down to its first use to save registers. So
:func:`issue` emits a thread's 16-byte vector loads (of each buffer the formula reads
through elementwise ops, at the reader's indices) first, as inline-asm ``ld.global.nc.v4``
with side effects, which LLVM neither sinks nor reorders; the kernel then branches to a path
storing every group without checks (all in range) or to the checked path, both reading the
loaded words, so ptxas cannot sink a load into either; on each path :func:`widen` unpacks
the words into the reader's memo, where the formula's reads find them.

Off by default (:data:`ENABLED`): ``benches/gpu_map_ab.py`` turns it on for one A/B variant, so
it is chosen on a measurement. The host-emulation flavour never uses it (no PTX there).
"""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.ir import BlockArgument, SSAValue

from kinac.dtypes import ITEMSIZE
from kinac.ir.dialects import kina as el
from kinac.ir.dialects.kina import dtype_name, shape_of
from kinac.ir.gpu.emit import Ix, Val
from kinac.ir.gpu.read import BodyReader, bcast
from kinac.ir.gpu.scalar import STORAGE
from kinac.ir.layout import Layout

ENABLED = False
MAX_UNROLL = 4  # vector groups a thread handles while ENABLED (kernels._unroll)
ASM = '"ld.global.nc.v4.u32 {$0, $1, $2, $3}, [$4];", "=r,=r,=r,=r,l"'
STRUCT = "{ i32, i32, i32, i32 }"
Req = tuple[SSAValue, tuple[Ix, ...], int | None]


def leaves(r: BodyReader, root: SSAValue, idx: Sequence[Ix], lax: int | None) -> list[Req]:
    """The (buffer argument, index, lane axis) reads that reading ``root`` at ``idx`` makes
    through elementwise ops, in the formula's operand order, each once."""
    stack: list[Req] = [(root, tuple(idx), lax)]
    seen: set[tuple[object, ...]] = set()
    out: list[Req] = []
    while stack:
        v, ix, lx = stack.pop()
        key = (v, tuple(i if isinstance(i, int) else i.ref for i in ix), lx)
        if key in seen or v in r.special:
            continue
        seen.add(key)
        if isinstance(v, BlockArgument):
            if v in r.buf:
                out.append((v, ix, lx))
            continue
        op = v.owner
        if isinstance(op, el.UnaryOp | el.CastOp):
            stack.append((op.x, ix, lx))
        elif isinstance(op, el.BinaryOp | el.WhereOp):
            subs = []
            for operand in op.operands:
                oi, ol = bcast(list(ix), lx, shape_of(operand.type))
                subs.append((operand, tuple(oi), ol))
            stack.extend(reversed(subs))  # popped in operand order
    return out


Raw = tuple[Req, Val, str]  # a read, the asm load's {i32 x 4} result, the dtype


def issue(r: BodyReader, root: SSAValue, idx: Sequence[Ix], lax: int | None) -> list[Raw]:
    """Issue now, as side-effecting inline asm, every whole 16-byte vector load that reading
    ``root`` at ``idx`` makes through elementwise ops; the raw words, for :func:`widen`."""
    b = r.b
    if b.flavour != "nvptx" or lax is None:
        return []
    out: list[Raw] = []
    for v, ix, lx in leaves(r, root, idx, lax):
        dt = dtype_name(v.type)
        shape = shape_of(v.type)
        lay = Layout.contiguous(shape)
        if lx is None or lx != len(shape) - 1 or shape[lx] % r.vec or not r.aligned(lay, lx):
            continue
        if r.vec * ITEMSIZE[dt] != 16:
            continue
        q = b.gep(STORAGE[dt], r.buf[v], r.offset(lay, list(ix)), r.ix)
        qi = b.emit(f"ptrtoint {b.gptr} {q.ref} to i64", "i64")
        out.append(((v, ix, lx), b.emit(f"call {STRUCT} asm sideeffect {ASM}(i64 {qi.ref})", STRUCT), dt))  # fmt: skip
    return out


def widen(r: BodyReader, raws: Sequence[Raw]) -> None:
    """The lanes of each load in :func:`issue`'s ``raws``, memoised in the reader's current
    scope where the formula's reads find them (emitted where the arithmetic runs)."""
    b = r.b
    for req, s, dt in raws:
        stt = STORAGE[dt]
        acc = Val("poison", "<4 x i32>")
        for k in range(4):
            w = b.emit(f"extractvalue {STRUCT} {s.ref}, {k}", "i32")
            acc = b.emit(f"insertelement <4 x i32> {acc.ref}, i32 {w.ref}, i32 {k}", "<4 x i32>")
        vty = f"<{r.vec} x {stt}>"
        vec = b.emit(f"bitcast <4 x i32> {acc.ref} to {vty}", vty)
        r._memo_store(req, [r.sc.widen(b.extract(vec, j, stt), dt) for j in range(r.vec)])
