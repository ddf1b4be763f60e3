"""Pass ``gpu-fuse-attention``: scores -> scale -> mask -> softmax -> weighted sum, one kernel.

After ``fuse-kernels`` (and the GPU fusions) attention is three kernels: a batched matmul
``S = Q K^T`` (cuBLAS), a softmax kernel holding the scale and the mask, and a batched matmul
``O = P V`` (cuBLAS), with grouped-query attention's ``repeat_interleave`` of K and V fused
into the matmuls as views. This pass finds that chain and merges it into one ``kina.kernel``
with ``kind = "attention"`` and ``impl = "flash"`` (its body keeps the original ops, so the IR
still says what it computes); ``gpu-kernels-to-nvvm`` lowers it to the generated flash kernel
(:mod:`kinac.ir.gpu.attention_kernel`) and prints the launch on it.

Matched: Q, K, V of bf16 or f16 with head dim 64 or 128, read through views whose batch and
head offsets are affine (``h // G`` for K/V heads: no copy of the repeated heads), head dim
contiguous, rows 16-byte aligned; the scores' transforms are multiplications by scalar
constants (``rsqrt Dh``), at most one additive mask built from ``iota``/compare/``where``
(``full`` of 0 and ``-inf``, maybe cast) that is exactly the causal one (key ``j`` masked
when ``j > i``), and at most one user's mask tensor (an input of bf16, f16 or f32 through any
affine view, broadcast against the scores, added after the scaling; cast only where the cast
changes no value: the kernel adds the tensor as stored); the softmax is over the keys. Anything else (f32, other head dims, a mask that is scaled, a computed mask that is not
the causal one) keeps today's path: cuBLAS and the softmax kernel. A row whose every key is
masked comes out NaN, as on every path (docs/language.md, "Fully masked softmax rows").

Tile choice: the pass writes the canonical parameters (:func:`choose_tiles`: 64 x 64, mma.sync),
which are the kernel's key; the variant actually built (tiles, stages, mma kind) is chosen per
(arch, shapes, dtype) when the kernel is lowered, by the autotuning query of
:mod:`kinac.pipeline_autotune` (timed on the GPU once, cached; without a GPU the measured default
of :mod:`kinac.ir.gpu.attention_tune`); the launch plan's note names it (``docs/gpu.md``,
"Fused attention").
"""

from __future__ import annotations

import math
import struct
from collections.abc import Callable
from dataclasses import dataclass, replace

from xdsl.context import Context
from xdsl.dialects import func
from xdsl.dialects.builtin import FloatAttr, IntegerAttr, ModuleOp, StringAttr
from xdsl.ir import BlockArgument, Operation, SSAValue
from xdsl.passes import ModulePass

from kinac.dtypes import FLOAT_DTYPES
from kinac.ir.dialects import kina as el
from kinac.ir.dialects import kina_struct as st
from kinac.ir.dialects.kina import dtype_name, int_prop, ints_prop, shape_of
from kinac.ir.gpu.attention_params import MASK_DTYPES, AttnParams, AttnTiles, check_params
from kinac.ir.gpu.fuse_rows import merge_kernels, only_user
from kinac.ir.gpu.gemm import find_matmul
from kinac.ir.layout import Layout
from kinac.ir.views import chain_layout, view_base

TILE_CANDIDATES: dict[int, tuple[AttnTiles, ...]] = {
    64: (AttnTiles(64, 64), AttnTiles(128, 64), AttnTiles(128, 32), AttnTiles(64, 128)),
    128: (AttnTiles(64, 64), AttnTiles(128, 64), AttnTiles(128, 32), AttnTiles(64, 32)),
}

# The canonical tiles the pass writes (the kernel's key before tuning; see the module doc):
# what a kernel is built with is chosen by kinac.pipeline_autotune.
FIXED_TILES: dict[int, AttnTiles] = {64: AttnTiles(64, 64), 128: AttnTiles(64, 64)}


def fixed_tiles(head_dim: int) -> AttnTiles:
    """The canonical tile choice for ``head_dim``."""
    return FIXED_TILES[head_dim]


def choose_tiles(head_dim: int, sq: int, sk: int) -> AttnTiles:
    """The canonical tile choice for one attention (see :data:`FIXED_TILES`)."""
    del sq, sk
    return FIXED_TILES[head_dim]


def _round(x: float, dtype: str) -> float:
    """``x`` rounded to ``dtype`` (nearest even), as the program's scalar op computes it."""
    if dtype in ("f64",):
        return x
    f = struct.unpack("<f", struct.pack("<f", x))[0] if math.isfinite(x) else x
    if dtype == "bf16" and math.isfinite(f):
        b = struct.unpack("<I", struct.pack("<f", f))[0]
        b = (b + 0x7FFF + ((b >> 16) & 1)) & 0xFFFF0000
        return float(struct.unpack("<f", struct.pack("<I", b))[0])
    if dtype == "f16":
        import numpy as np

        return float(np.float16(f))
    return float(f)


def scalar_value(v: SSAValue) -> float | None:
    """The value of a rank-0 (or all-ones shape) constant expression, in its dtype."""
    if any(n != 1 for n in shape_of(v.type)):
        return None
    op = v.owner
    dt = dtype_name(v.type)
    if isinstance(op, st.ConstOp | st.FullOp) and isinstance(op.value, FloatAttr | IntegerAttr):
        return _round(float(op.value.value.data), dt)
    if isinstance(op, el.CastOp):
        x = scalar_value(op.x)
        return None if x is None else _round(x, dt)
    if isinstance(op, el.UnaryOp) and op.name in ("kina.rsqrt", "kina.sqrt", "kina.neg"):
        x = scalar_value(op.x)
        if x is None or (op.name != "kina.neg" and x <= 0):
            return None
        y = {"kina.rsqrt": lambda: 1 / math.sqrt(x), "kina.sqrt": lambda: math.sqrt(x),
             "kina.neg": lambda: -x}[op.name]()  # fmt: skip
        return _round(y, dt)
    if isinstance(op, el.BinaryOp) and op.name in ("kina.mul", "kina.div"):
        a, b = scalar_value(op.lhs), scalar_value(op.rhs)
        if a is None or b is None or (op.name == "kina.div" and b == 0):
            return None
        return _round(a * b if op.name == "kina.mul" else a / b, dt)
    return None


_CMP = {"kina.ge": lambda a, b: a >= b, "kina.gt": lambda a, b: a > b,
        "kina.le": lambda a, b: a <= b, "kina.lt": lambda a, b: a < b,
        "kina.eq": lambda a, b: a == b, "kina.ne": lambda a, b: a != b}  # fmt: skip


# the largest count an iota of each float dtype holds exactly (0 .. 2^(mantissa + 1))
_EXACT_IOTA = {"f16": 2**11, "bf16": 2**8, "f32": 2**24, "f64": 2**53}


def _iota_role(v: SSAValue, rank: int) -> str | None:
    """``"i"`` (the query index) or ``"j"`` (the key index) when ``v`` is an iota whose
    values are exactly that index at every position of a rank-``rank`` mask broadcast from it:
    over one of the last two axes, of size above 1 (an iota over a size-1 axis is 0 at every
    broadcast position), in a dtype that holds every index (a bf16 iota rounds past 256)."""
    op = v.owner
    if not isinstance(op, st.IotaOp):
        return None
    shape = shape_of(v.type)
    ax = int_prop(op, "axis")
    dt = dtype_name(v.type)
    if shape[ax] < 2 or shape[ax] > _EXACT_IOTA.get(dt, shape[ax]) or dt == "bool":
        return None
    pos = ax - len(shape) + rank  # the axis of the mask it stands for (right-aligned)
    return "i" if pos == rank - 2 else "j" if pos == rank - 1 else None


def _mask_at(
    v: SSAValue, i: int, j: int, compares: list[Operation], rank: int | None = None
) -> float | None:
    """The mask expression ``v`` at query ``i``, key ``j`` (its last two axes), or None if
    ``v`` is not built from full, const, one compare of the two index iotas, where and float
    casts alone. An iota is allowed only as a compare operand, one the query index and the
    other the key index (:func:`_iota_role`): elsewhere (a branch's value, an iota over a batch
    or size-1 axis) its value is not a function of ``i`` and ``j`` alone, and three probes
    would not prove the mask causal everywhere."""
    op = v.owner
    rank = len(shape_of(v.type)) if rank is None else rank
    if isinstance(op, st.FullOp | st.ConstOp) and isinstance(op.value, FloatAttr | IntegerAttr):
        return float(op.value.value.data)
    if isinstance(op, el.CastOp):
        if dtype_name(v.type) not in FLOAT_DTYPES or dtype_name(op.x.type) not in FLOAT_DTYPES:
            return None  # a cast to an integer or bool changes -inf and 0
        return _mask_at(op.x, i, j, compares, rank)
    if isinstance(op, el.WhereOp):
        c = _cond_at(op.cond, i, j, compares, rank)
        return None if c is None else _mask_at(op.a if c else op.b, i, j, compares, rank)
    return None


def _cond_at(v: SSAValue, i: int, j: int, compares: list[Operation], rank: int) -> bool | None:
    """A ``where`` condition at (i, j): one compare of the query and key index iotas."""
    op = v.owner
    if not (isinstance(op, el.BinaryOp) and op.name in _CMP):
        return None
    roles = (_iota_role(op.lhs, rank), _iota_role(op.rhs, rank))
    if sorted(r or "" for r in roles) != ["i", "j"]:
        return None
    if op not in compares:
        compares.append(op)
    a, b = (float(i if r == "i" else j) for r in roles)
    return bool(_CMP[op.name](a, b))


def is_causal_mask(v: SSAValue) -> bool:
    """``v`` is ``-inf`` exactly where key ``j`` > query ``i``, else 0: one compare of the query
    and key index iotas decides (:func:`_mask_at`), so the three orders of ``i`` and ``j``
    prove it for every position."""
    compares: list[Operation] = []
    for i, j, want in ((0, 1, -math.inf), (1, 0, 0.0), (1, 1, 0.0)):
        got = _mask_at(v, i, j, compares)
        if got != want:
            return False
    return len(compares) == 1


@dataclass
class Transform:
    """The softmax's input as ``scale * scores [+ mask] [+ causal mask]``."""

    scale: float = 1.0
    causal: bool = False
    mask: SSAValue | None = None  # the user's additive mask tensor (a view of an input)


# casts of a mask tensor that change no value (the kernel adds the tensor as stored): a
# narrowing one rounds, and overflows to -inf (an f32 -1e9 is -inf in f16: a row masked with
# it is NaN by the softmax rule, the kernel's finite -1e9 gave a uniform average instead)
_EXACT_CASTS = {("bf16", "f32"), ("f16", "f32")}


def _user_mask(v: SSAValue) -> bool:
    """``v`` is a kernel input read through views (maybe widened by a cast): the user's mask
    tensor."""
    if isinstance(v.owner, el.CastOp):
        if (dtype_name(v.owner.x.type), dtype_name(v.type)) not in _EXACT_CASTS:
            return False
        v = v.owner.x
    base, _ = view_base(v)
    return isinstance(base, BlockArgument) and dtype_name(base.type) in MASK_DTYPES


def scores_transform(x: SSAValue, scores: SSAValue) -> Transform | None:
    """``x`` as ``scale * scores [+ mask tensor] [+ causal mask]``, or None. A mask tensor
    must be added after every scaling (it is not scaled itself)."""
    t = Transform()
    scaled = False  # a scaling seen outside: a mask tensor inside it would be scaled too
    while x is not scores:
        op = x.owner
        if isinstance(op, el.BinaryOp) and op.name in ("kina.mul", "kina.div", "kina.add"):
            for mine, other in ((op.lhs, op.rhs), (op.rhs, op.lhs)):
                if op.name == "kina.div" and mine is op.rhs:
                    continue
                if op.name == "kina.add":
                    if not t.causal and is_causal_mask(other):
                        t.causal, x = True, mine
                        break
                    if t.mask is None and not scaled and _user_mask(other):
                        t.mask, x = other, mine
                        break
                    continue
                c = scalar_value(other)
                if c is not None and c > 0:
                    t.scale = t.scale * c if op.name == "kina.mul" else t.scale / c
                    x, scaled = mine, True
                    break
            else:
                return None
            continue
        return None
    return t


def mask_layout(
    v: SSAValue, scores_shape: tuple[int, ...]
) -> tuple[str, tuple[int, int, int, int], int, BlockArgument] | None:
    """(dtype, (batch, head, row, col) strides, offset, input) of a mask tensor broadcast
    against the scores, or None when its layout is not affine."""
    if isinstance(v.owner, el.CastOp):
        v = v.owner.x
    base, chain = view_base(v)
    lay = chain_layout(base, chain)
    if lay is None or not isinstance(base, BlockArgument):
        return None
    shape = lay.shape
    full = (1,) * (4 - len(scores_shape)) + tuple(scores_shape)
    lead = 4 - len(shape)
    strides = []
    for ax in range(4):
        i = ax - lead
        if i < 0 or shape[i] == 1 or full[ax] == 1:
            strides.append(0)
            continue
        st_ = lay.stride(i)
        if st_ is None:
            return None
        strides.append(st_)
    sb, sh, sr, sc = strides
    return dtype_name(base.type), (sb, sh, sr, sc), lay.offset, base


@dataclass
class Operand:
    """An attention operand read through views of one kernel input."""

    arg: BlockArgument
    layout: Layout


def _operand(v: SSAValue) -> Operand | None:
    base, chain = view_base(v)
    if not isinstance(base, BlockArgument):
        return None
    lay = chain_layout(base, chain)
    return None if lay is None else Operand(base, lay)


def _strides(
    lay: Layout, b: int, h: int, group: int, rows_axis: int
) -> tuple[int, int, int, int] | None:
    """(batch, head, row) strides of a [B, H, rows, D]-like view (K/V heads ``h // group``),
    ``None`` unless every (b, h) offset follows them and the head dim is contiguous."""
    rank = len(lay.shape)
    if rank not in (3, 4):
        return None
    sr = lay.stride(rows_axis)
    dax = rank - 1 if rows_axis == rank - 2 else rank - 2
    if sr is None or lay.stride(dax) != 1:
        return None

    def at(bi: int, hi: int) -> int:
        idx = (bi, hi, 0, 0) if rank == 4 else (hi, 0, 0)
        return lay.offset_of(idx)

    base = at(0, 0)
    sh = at(0, group) - base if h > group else 0
    sb = at(1, 0) - base if b > 1 and rank == 4 else 0
    for bi in range(b):
        for hi in range(h):
            if at(bi, hi) != base + bi * sb + (hi // group) * sh:
                return None
    return (sb, sh, sr, base)


def output_layout(out: SSAValue, result: SSAValue) -> Layout | None:
    """Where each element of ``result`` (the ``P V`` product, ``[B, H, S, Dh]``) lives in the
    kernel's contiguous output buffer, given that the kernel yields ``out``: ``result`` itself
    (heads-major), or ``result`` transposed and then reshaped (tokens-major ``[B, S, H*Dh]``,
    the output projection's input: the kernel writes through strides and the transpose map
    that used to follow it is gone). ``None`` for any other view chain."""
    if out is result:
        return Layout.contiguous(shape_of(result.type))
    base, chain = view_base(out, {result})
    if base is not result or not chain or not isinstance(chain[0], st.TransposeOp):
        return None
    if any(not isinstance(o, st.ReshapeOp) for o in chain[1:]):
        return None  # reshapes of a contiguous buffer keep its row-major order
    perm = tuple(ints_prop(chain[0], "perm"))
    inv = tuple(perm.index(i) for i in range(len(perm)))
    return Layout.contiguous(shape_of(chain[0].result.type)).transpose(inv)


def attention_params(
    mm1: st.MatmulOp, sm: st.SoftmaxOp, mm2: st.MatmulOp, scores: SSAValue, probs: SSAValue,
    index_of: Callable[[BlockArgument], int], n_inputs: int, out: SSAValue | None = None,
) -> AttnParams | None:  # fmt: skip
    """The fused kernel's parameters for the chain ``mm1 -> ... -> sm -> mm2``, or None.

    ``scores`` is where the softmax's input chain must end (``mm1``'s result or the block
    argument standing for it), ``probs`` what ``mm2`` must multiply; ``index_of`` gives the
    position, among the fused kernel's ``n_inputs`` buffers, of the one a block argument reads;
    ``out`` what the kernel yields (``mm2``'s result unless a tokens-major view of it,
    :func:`output_layout`).
    """
    qs, ks, ss, vs = (shape_of(v.type) for v in (mm1.lhs, mm1.rhs, sm.x, mm2.rhs))
    if mm2.lhs is not probs or int_prop(sm, "axis") != len(ss) - 1 or len(qs) not in (3, 4):
        return None
    if not (len(qs) == len(ks) == len(vs) == len(ss)):
        return None
    dt = dtype_name(mm1.lhs.type)
    if any(dtype_name(v.type) != dt for v in (mm1.rhs, mm2.rhs, mm2.result, sm.x)):
        return None
    tr = scores_transform(sm.x, scores)
    if tr is None:
        return None
    scale, causal = tr.scale, tr.causal
    mask = None if tr.mask is None else mask_layout(tr.mask, ss)
    if tr.mask is not None and mask is None:
        return None
    q, k, v = _operand(mm1.lhs), _operand(mm1.rhs), _operand(mm2.rhs)
    if q is None or k is None or v is None:
        return None
    b, h = (1, qs[0]) if len(qs) == 3 else (qs[0], qs[1])
    sq, d, sk = qs[-2], qs[-1], ks[-1]
    if ks[-2] != d or vs[-2] != sk or shape_of(mm2.result.type)[-1] != d:
        return None
    if (causal and sq != sk) or d not in FIXED_TILES:
        return None
    n = len(qs)
    # K^T is read as K: its rows are the keys (axis -1 of K^T), its head dim axis -2
    kv_heads = 0
    for g in range(1, h + 1):  # the largest group that K's offsets follow
        if h % g == 0 and _strides(k.layout, b, h, g, n - 1) is not None:
            kv_heads = h // g
    if kv_heads == 0:
        return None
    group = h // kv_heads
    qst = _strides(q.layout, b, h, 1, n - 2)
    kst = _strides(k.layout, b, h, group, n - 1)
    vst = _strides(v.layout, b, h, group, n - 2)
    if qst is None or kst is None or vst is None:
        return None
    olay = output_layout(mm2.result if out is None else out, mm2.result)
    ost = None if olay is None else _strides(olay, b, h, 1, n - 2)
    if ost is None or ost[3] != 0:
        return None
    tiles = choose_tiles(d, sq, sk)
    p = AttnParams(
        dt, d, b, h, kv_heads, sq, sk, causal, scale, qst[:3], kst[:3], vst[:3],
        (h * sq * d if b == 1 else ost[0], ost[1] if h > 1 else sq * d, ost[2]), tiles.block_m, tiles.block_n, tiles.min_blocks,
        (index_of(q.arg), index_of(k.arg), index_of(v.arg)), n_inputs,
        (qst[3], kst[3], vst[3]),
    )  # fmt: skip
    if mask is not None:
        mdt, mst, moff, marg = mask
        p = replace(p, mask_arg=index_of(marg), mask_dtype=mdt, mask_strides=mst, mask_offset=moff)
    return p if check_params(p) is None else None


def merged_params(k: st.KernelOp) -> AttnParams:
    """The parameters of a merged ``attention`` kernel (an internal error if it is not one)."""
    mms = [o for o in k.body.block.ops if isinstance(o, st.MatmulOp)]
    sm = next(o for o in k.body.block.ops if isinstance(o, st.SoftmaxOp))
    p = attention_params(
        mms[0], sm, mms[1], mms[0].result, sm.result, lambda a: a.index, len(k.inputs), k.yielded()
    )
    if p is None:
        raise AssertionError(f"{k.sym.data}: not an attention kernel")
    return p


def _arg_for(k: st.KernelOp, producer: st.KernelOp) -> BlockArgument | None:
    args = [a for a, u in zip(k.body.block.args, k.inputs, strict=True) if u is producer.result]
    return args[0] if len(args) == 1 else None


def match(k3: st.KernelOp) -> tuple[st.KernelOp, st.KernelOp, AttnParams] | None:
    """(scores kernel, softmax kernel, parameters) when ``k3`` is attention's ``P V``."""
    if k3.kind.data != "matmul":  # blas, or loops past cuBLAS's 2^31 elements (long S)
        return None
    mm2 = find_matmul(k3)
    if k3.yielded() is not mm2.result or not isinstance(mm2.lhs, BlockArgument):
        return None
    k2 = k3.inputs[mm2.lhs.index].owner
    if not isinstance(k2, st.KernelOp) or k2.kind.data != "softmax" or only_user(k2) is not k3:
        return None
    sm = k2.yielded().owner
    if not isinstance(sm, st.SoftmaxOp):
        return None
    prods = [u.owner for u in k2.inputs if isinstance(u.owner, st.KernelOp)]
    prods = [k for k in prods if k.kind.data == "matmul"]  # the scores (a mask is an input)
    if len(prods) != 1:
        return None
    k1 = prods[0]
    assert isinstance(k1, st.KernelOp)
    mm1 = find_matmul(k1)
    if k1.yielded() is not mm1.result or only_user(k1) is not k2:
        return None
    s_arg, p_arg = _arg_for(k2, k1), _arg_for(k3, k2)
    if s_arg is None or p_arg is None:
        return None
    # the merged kernel's inputs, as merge_kernels orders them (k1's, k2's, k3's)
    order = list(
        dict.fromkeys([
            *k1.inputs,
            *(u for u in k2.inputs if u is not k1.result),
            *(u for u in k3.inputs if u is not k2.result),
        ])
    )  # fmt: skip

    def index_of(a: BlockArgument) -> int:
        src = next(k for k in (k1, k2, k3) if a.block is k.body.block)
        return order.index(src.inputs[a.index])

    p = attention_params(mm1, sm, mm2, s_arg, p_arg, index_of, len(order))
    return None if p is None else (k1, k2, p)


def fuse_attention(fn: func.FuncOp) -> int:
    """Merge every matched attention chain of ``fn`` into one kernel; returns the count."""
    n = 0
    for k3 in [o for o in fn.body.block.ops if isinstance(o, st.KernelOp)]:
        m = match(k3)
        if m is None:
            continue
        k1, k2, p = m
        k12 = merge_kernels(k1, k2, "attention")
        k = merge_kernels(k12, k3, "attention")
        k.properties["impl"] = StringAttr("flash")
        k.properties["sym"] = StringAttr(f"{k3.sym.data.split('_')[0]}_attention")
        if merged_params(k) != p:  # the merged body must analyse as the chain did
            raise AssertionError(f"{k.sym.data}: attention parameters changed by the merge")
        absorb_output_view(k)
        n += 1
    return n


def absorb_output_view(k: st.KernelOp) -> st.KernelOp:
    """``k`` (a merged attention kernel) with the map after it merged in when that map only
    views ``k``'s result tokens-major (``[B, H, S, Dh] -> [B, S, H, Dh] -> [B, S, H*Dh]``, the
    output projection's input): the kernel then writes its output through those strides
    (``o_strides``) and one launch, a full read and write of the output, disappears. Anything
    else (another user, arithmetic in the map, a layout the kernel cannot store) keeps the
    map. Returns the kernel now computing the result."""
    m = only_user(k)
    if not isinstance(m, st.KernelOp) or m.kind.data != "map" or len(m.inputs) != 1:
        return k
    body = [o for o in m.body.block.ops if not isinstance(o, st.YieldOp)]
    if not body or not all(isinstance(o, (st.TransposeOp, st.ReshapeOp)) for o in body):
        return k
    if len(shape_of(m.result.type)) != len(shape_of(k.result.type)) - 1:
        return k  # heads merged into the row ([.., S, H*Dh]): cost.py reads the step's shape
    p = merged_params(k)
    lay = output_layout(m.yielded(), m.body.block.args[0])
    n = len(shape_of(k.result.type))
    ost = None if lay is None else _strides(lay, p.batch, p.heads, 1, n - 2)
    if ost is None or ost[3] != 0:
        return k
    sym = k.sym.data
    new = merge_kernels(k, m, "attention")
    new.properties["impl"] = StringAttr("flash")
    new.properties["sym"] = StringAttr(sym)
    q = merged_params(new)  # raises if the merged body no longer reads as attention
    if replace(q, o_strides=p.o_strides) != p:
        raise AssertionError(f"{sym}: attention parameters changed by the output view")
    return new


class GpuFuseAttention(ModulePass):
    """Merge attention's scores, softmax and weighted sum into one flash kernel."""

    name = "gpu-fuse-attention"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        for f in op.ops:
            if isinstance(f, func.FuncOp) and f.body.blocks:
                fuse_attention(f)
