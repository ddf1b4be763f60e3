"""Pass ``gpu-small-gemm``: small bf16/f16 products become the generated tensor-core GEMM,
with the RMSNorm before them and the residual or ``silu(gate) * up`` after them fused in.

Why: the small transformer block (B4 S128 D256) spent its GPU time on 9 launches of 2-4 us
each, five of them cuBLAS calls nothing could be fused into (issue 14). After
``gpu-fuse-attention`` this pass rewrites, for products the size rule takes
(:mod:`kinac.ir.gpu.small_gemm_rule`):

- an RMSNorm ``row`` kernel (``x / sqrt(mean(x^2) + eps) * w`` over the last axis) read only
  by products of it with 2-D weights: one ``matmul`` kernel (``impl = "tc"``, ``prologue =
  "rms"``). Two products read only by ``silu(a) * b`` become one kernel with ``epilogue =
  "swiglu"`` (the gate and up tensors never exist); otherwise the products' columns sit side by
  side in one output (``kina.concat`` in the body), and each reader of a product reads its
  ``kina.slice`` of it (only generated readers, such as the fused attention kernel, whose
  operands are views: q, k and v come from one launch);
- any other such product of a contiguous ``[.., K]`` and a 2-D weight, with its cuBLASLt
  residual epilogue or none: the same kernel (``epilogue = "residual"``).

The body keeps the ops it computes (the norm, each ``kina.matmul`` with ``impl = "tc"``, the
concat or the epilogue), so the IR says what runs; the kernel's parameters
(:class:`~kinac.ir.gpu.small_gemm_kernel.SmallGemmParams`) are its ``tc`` attribute, and its
canonical key (:func:`canonical_small_gemm`). Products the rule does not take keep cuBLAS.
"""

from __future__ import annotations

import math
import os

from xdsl.context import Context
from xdsl.dialects import func
from xdsl.dialects.builtin import IntegerAttr, ModuleOp, StringAttr, TensorType, i64
from xdsl.ir import Block, BlockArgument, Operation, Region, SSAValue
from xdsl.passes import ModulePass
from xdsl.rewriter import Rewriter

from kinac.artifacts.gpu import GpuKernel
from kinac.ir.dialects import kina as el
from kinac.ir.dialects import kina_struct as st
from kinac.ir.dialects.kina import dtype_name, int_prop, shape_of
from kinac.ir.fuse_kernels import copy_op
from kinac.ir.gpu.small_gemm_kernel import SmallGemmParams
from kinac.ir.gpu.small_gemm_rule import choose, enabled
from kinac.ir.gpu.stitch import gpu_kernel_symbol
from kinac.rules.codec import decode, encode

SOURCE = "small_gemm"


def _body_ops(k: st.KernelOp) -> list[Operation]:
    return [o for o in k.body.block.ops if not isinstance(o, st.YieldOp)]


def _arg_input(k: st.KernelOp, v: SSAValue) -> SSAValue | None:
    """The kernel input a block argument ``v`` of ``k`` reads (None: not a block argument)."""
    if isinstance(v, BlockArgument) and v.owner is k.body.block:
        return k.inputs[v.index]
    return None


def product(k: st.KernelOp) -> tuple[SSAValue, SSAValue, SSAValue | None] | None:
    """``(a, w, residual)`` inputs of a cuBLAS matmul kernel ``a @ w [+ residual]`` whose ``a``
    is a contiguous ``[.., K]`` input and ``w`` a 2-D ``[K, N]`` input (None otherwise)."""
    if k.kind.data != "matmul" or k.impl.data != "blas":
        return None
    epi = k.attributes.get("epilogue")
    ops = _body_ops(k)
    want = 2 if isinstance(epi, StringAttr) and epi.data == "residual" else 1
    if len(ops) != want or (epi is not None and want == 1) or not isinstance(ops[0], st.MatmulOp):
        return None
    mm = ops[0]
    a, w = _arg_input(k, mm.lhs), _arg_input(k, mm.rhs)
    if a is None or w is None or len(shape_of(w.type)) != 2 or len(shape_of(a.type)) < 2:
        return None
    res = None
    if want == 2:
        add = ops[1]
        if not isinstance(add, el.BinaryOp) or add.name != "kina.add":
            return None
        other = add.lhs if add.rhs is mm.result else add.rhs
        res = _arg_input(k, other)
        if (
            res is None
            or shape_of(res.type) != shape_of(k.result.type)
            or k.yielded() is not add.results[0]
        ):
            return None
    elif k.yielded() is not mm.result:
        return None
    if len({dtype_name(v.type) for v in (a, w, k.result, *((res,) if res else ()))}) != 1:
        return None
    return a, w, res


def rms_norm(k: st.KernelOp) -> tuple[SSAValue, SSAValue, float] | None:
    """``(x, w, eps)`` inputs of an RMSNorm row kernel ``x / sqrt(mean(x^2, -1) + eps) * w``."""
    from kinac.ir.gpu.attention import scalar_value

    if k.kind.data != "row":
        return None
    ops = [o for o in _body_ops(k) if not isinstance(o, st.ConstOp)]
    names = [o.name for o in ops]
    if names != [
        "kina.square",
        "kina.reduce_mean",
        "kina.add",
        "kina.sqrt",
        "kina.div",
        "kina.mul",
    ]:
        return None
    sq, mean, add, sqrt, div, mul = ops
    assert isinstance(mean, st.ReduceMeanOp)
    x = sq.operands[0]
    xs = shape_of(x.type)
    if _arg_input(k, x) is None or mean.operands[0] is not sq.results[0] or not xs:
        return None
    if int_prop(mean, "axis") != len(xs) - 1 or not int_prop(mean, "keepdims"):
        return None
    eps_v = add.operands[1] if add.operands[0] is mean.results[0] else add.operands[0]
    eps = scalar_value(eps_v)
    if eps is None or mean.results[0] not in add.operands or sqrt.operands[0] is not add.results[0]:
        return None
    if div.operands[0] is not x or div.operands[1] is not sqrt.results[0]:
        return None
    w = mul.operands[1] if mul.operands[0] is div.results[0] else mul.operands[0]
    if div.results[0] not in mul.operands or shape_of(w.type) != (xs[-1],):
        return None
    win = _arg_input(k, w)
    if win is None or k.yielded() is not mul.results[0]:
        return None
    return _arg_input(k, x), win, eps  # type: ignore[return-value]


def _tensor(shape: tuple[int, ...], like: SSAValue) -> TensorType:  # type: ignore[type-arg]
    return TensorType(like.type.element_type, shape)  # type: ignore[attr-defined]


def _users(v: SSAValue) -> list[Operation]:
    return list(dict.fromkeys(u.operation for u in v.uses))


def _build(
    inputs: list[SSAValue],
    parts: list[st.KernelOp],
    norm: st.KernelOp | None,
    tail: st.KernelOp | None,
    result_type: TensorType,  # type: ignore[type-arg]
    concat: bool,
) -> Block:
    """The fused body over ``inputs``: the norm's ops, each part's (its ``a`` the norm's
    output), then a concat of the parts or the ``tail`` kernel's ops (the swiglu map)."""
    body = Block(arg_types=[u.type for u in inputs])
    arg_of = dict(zip(inputs, body.args, strict=True))
    vmap: dict[SSAValue, SSAValue] = {}
    normed: SSAValue | None = None
    if norm is not None:
        for a, u in zip(norm.body.block.args, norm.inputs, strict=True):
            vmap[a] = arg_of[u]
        for op in _body_ops(norm):
            copy_op(op, body, vmap)
        normed = vmap[norm.yielded()]
    outs = []
    for k in parts:
        for a, u in zip(k.body.block.args, k.inputs, strict=True):
            vmap[a] = (
                normed
                if (normed is not None and norm is not None and u is norm.result)
                else arg_of[u]
            )
        for op in _body_ops(k):
            copy_op(op, body, vmap)
            if isinstance(op, st.MatmulOp):
                vmap[op.result].owner.properties["impl"] = StringAttr("tc")  # type: ignore[union-attr]
        outs.append(vmap[k.yielded()])
    if tail is not None:
        for a, u in zip(tail.body.block.args, tail.inputs, strict=True):
            vmap[a] = outs[parts.index(u.owner)] if u.owner in parts else arg_of[u]  # type: ignore[arg-type]
        for op in _body_ops(tail):
            copy_op(op, body, vmap)
        out = vmap[tail.yielded()]
    elif concat and len(outs) > 1:
        axis = len(shape_of(result_type)) - 1
        c = st.ConcatOp.create(operands=outs, result_types=[result_type],
                               properties={"axis": IntegerAttr(axis, i64)})  # fmt: skip
        body.add_op(c)
        out = c.results[0]
    else:
        out = outs[0]
    body.add_op(st.YieldOp.create(operands=[out]))
    return body


def _new_kernel(
    before: Operation, inputs: list[SSAValue], body: Block, result_type: TensorType, sym: str,  # type: ignore[type-arg]
    p: SmallGemmParams, attrs: dict[str, str],
) -> st.KernelOp:  # fmt: skip
    k = st.KernelOp.create(
        operands=inputs,
        result_types=[result_type],
        properties={"kind": StringAttr("matmul"), "impl": StringAttr("tc"), "sym": StringAttr(sym)},
        attributes={
            **{n: StringAttr(v) for n, v in attrs.items()},
            "tc": StringAttr(encode(p).decode()),
        },
        regions=[Region(body)],
    )
    parent = before.parent_block()
    assert parent is not None
    parent.insert_op_before(k, before)
    return k


def _place(p: SmallGemmParams, inputs: list[SSAValue], a: SSAValue, ws: list[SSAValue],
           wn: SSAValue | None, res: SSAValue | None, eps: float) -> SmallGemmParams:  # fmt: skip
    from dataclasses import replace

    pos = [inputs.index(a), *(inputs.index(w) for w in ws)]
    if wn is not None:
        pos.append(inputs.index(wn))
    if res is not None:
        pos.append(inputs.index(res))
    # the weights and the norm weight: prefetched into L2 before the PDL wait (see
    # prefetch_enabled for why by role and not by where an operand comes from)
    pf: tuple[str, ...] = ("w", "wn") if wn is not None else ("w",)
    if not prefetch_enabled():
        pf = ()
    return replace(p, eps=eps, args=tuple(pos), n_inputs=len(inputs), prefetch=pf)


def prefetch_enabled() -> bool:
    """``KINAC_SMALL_GEMM_PREFETCH=0``: no L2 prefetch before the PDL wait (a measuring
    switch, as ``KINAC_SMALL_GEMM``: compile without the disk cache).

    Which operands: the weights (and the norm weight), by their role in the product, not by
    whether they are arguments of the function being lowered: an entry cut into pieces lowers
    each piece as a function of its own, whose arguments include the whole entry's
    intermediates, and a piece must lower to exactly what the whole entry does
    (``tests/test_gpu_kernels_incremental.py``). A prefetch changes no value, so one of a
    weight some earlier kernel computes is only wasted, never wrong (docs/gpu.md)."""
    return os.environ.get("KINAC_SMALL_GEMM_PREFETCH", "").strip() != "0"


def _reads_sliceable(consumer: Operation) -> bool:
    """A reader that may read a slice of the fused output: a generated kernel (its operands
    are views), not a cuBLAS call or the function's return."""
    return isinstance(consumer, st.KernelOp) and consumer.impl.data not in ("blas", "tc")


def _starts(parts: list[st.KernelOp]) -> dict[SSAValue, int]:
    """Each part's first column in the side-by-side output."""
    out: dict[SSAValue, int] = {}
    s = 0
    for k in parts:
        out[k.result] = s
        s += shape_of(k.result.type)[-1]
    return out


def _readers(parts: list[st.KernelOp]) -> list[st.KernelOp]:
    rs = dict.fromkeys(c for k in parts for c in _users(k.result))
    return [c for c in rs if isinstance(c, st.KernelOp)]


def _rebuilt(c: st.KernelOp, new: SSAValue, starts: dict[SSAValue, int]) -> st.KernelOp:
    """Kernel ``c`` (not inserted anywhere) reading ``new[..., start:start + n]`` where it read
    a part (``starts``: each part's first column): its other inputs kept, each part a slice of
    ``new`` at the top of its body."""
    inputs = list(dict.fromkeys(new if u in starts else u for u in c.inputs))
    body = Block(arg_types=[u.type for u in inputs])
    arg_of = dict(zip(inputs, body.args, strict=True))
    sliced: dict[SSAValue, SSAValue] = {}
    vmap: dict[SSAValue, SSAValue] = {}
    for a, u in zip(c.body.block.args, c.inputs, strict=True):
        if u not in starts:
            vmap[a] = arg_of[u]
            continue
        if u not in sliced:
            shp, start = shape_of(u.type), starts[u]
            sl = st.SliceOp.create(
                operands=[arg_of[new]], result_types=[u.type],
                properties={"axis": IntegerAttr(len(shp) - 1, i64),
                            "start": IntegerAttr(start, i64),
                            "stop": IntegerAttr(start + shp[-1], i64)},
            )  # fmt: skip
            body.add_op(sl)
            sliced[u] = sl.results[0]
        vmap[a] = sliced[u]
    for op in _body_ops(c):
        copy_op(op, body, vmap)
    body.add_op(st.YieldOp.create(operands=[vmap[c.yielded()]]))
    return st.KernelOp.create(
        operands=inputs, result_types=[c.result.type], properties=dict(c.properties),
        attributes=dict(c.attributes), regions=[Region(body)],
    )  # fmt: skip


def _readers_take_slices(parts: list[st.KernelOp], rtype: TensorType) -> bool:  # type: ignore[type-arg]
    """Every reader of the parts is a generated kernel that still lowers when it reads slices:
    a fused attention kernel's parameters are derived again from a trial copy (its operands
    must stay views it takes: 16-byte rows, affine heads)."""
    from kinac.ir.gpu.attention import merged_params

    starts = _starts(parts)
    readers = _readers(parts)
    if not all(_reads_sliceable(c) for k in parts for c in _users(k.result)):
        return False
    stand_in = Block(arg_types=[rtype]).args[0]
    for c in readers:
        if c.kind.data != "attention":
            continue
        trial = _rebuilt(c, stand_in, starts)
        try:
            merged_params(trial)
        except AssertionError:
            return False
        finally:
            trial.erase()
    return True


def _slice_readers(fused: st.KernelOp, parts: list[st.KernelOp]) -> None:
    """Each reader of a part now reads its columns of ``fused``'s output, as a slice."""
    starts = _starts(parts)
    for c in _readers(parts):
        Rewriter.replace_op(c, _rebuilt(c, fused.result, starts))


def _swiglu_tail(parts: list[st.KernelOp]) -> tuple[st.KernelOp, int] | None:
    """The map kernel ``silu(a) * b`` (or ``b * silu(a)``) that alone reads the two parts, and
    which part is the gate (None if there is none)."""
    users = {tuple(_users(k.result)) for k in parts}
    if len(parts) != 2 or len(users) != 1:
        return None
    (us,) = users
    if len(us) != 1 or not isinstance(us[0], st.KernelOp) or us[0].kind.data != "map":
        return None
    m = us[0]
    ops = _body_ops(m)
    if [o.name for o in ops] != ["kina.silu", "kina.mul"] or len(m.inputs) != 2:
        return None
    silu, mul = ops
    if silu.results[0] not in mul.operands or m.yielded() is not mul.results[0]:
        return None
    other = mul.operands[1] if mul.operands[0] is silu.results[0] else mul.operands[0]
    g, u = _arg_input(m, silu.operands[0]), _arg_input(m, other)
    if g is None or u is None or g is u or {g, u} != {k.result for k in parts}:
        return None
    if shape_of(m.result.type) != shape_of(g.type):
        return None
    results: list[SSAValue] = [k.result for k in parts]
    return m, results.index(g)


def _fuse_norm(norm: st.KernelOp) -> bool:
    got = rms_norm(norm)
    if got is None:
        return False
    x, wn, eps = got
    parts = _users(norm.result)
    prods = [product(k) if isinstance(k, st.KernelOp) else None for k in parts]
    if not parts or any(
        pr is None or pr[0] is not norm.result or pr[2] is not None for pr in prods
    ):
        return False
    parts_k: list[st.KernelOp] = parts  # type: ignore[assignment]
    lead = shape_of(x.type)[:-1]
    m, kdim = math.prod(lead), shape_of(x.type)[-1]
    dt = dtype_name(x.type)
    tail = _swiglu_tail(parts_k)
    if tail is not None:
        mapk, gate = tail
        if gate == 1:
            parts_k = [parts_k[1], parts_k[0]]
        ns = tuple(shape_of(k.result.type)[-1] for k in parts_k)
        p = choose(dt, m, kdim, ns, "swiglu", True)
        if p is None:
            return False
        ws = [pr[1] for pr in (product(k) for k in parts_k) if pr]
        inputs = list(dict.fromkeys([x, *ws, wn]))
        body = _build(inputs, parts_k, norm, mapk, mapk.result.type, False)  # type: ignore[arg-type]
        new = _new_kernel(mapk, inputs, body, mapk.result.type, f"{mapk.sym.data.split('_')[0]}_matmul",  # type: ignore[arg-type]
                          _place(p, inputs, x, ws, wn, None, eps), {"prologue": "rms", "epilogue": "swiglu"})  # fmt: skip
        mapk.result.replace_all_uses_with(new.result)
        for o in (mapk, *parts_k, norm):
            o.detach()
            o.erase()
        return True
    ns = tuple(shape_of(k.result.type)[-1] for k in parts_k)
    if len(parts_k) > 1 and not _readers_take_slices(parts_k, _tensor((*lead, sum(ns)), x)):
        return False
    p = choose(dt, m, kdim, ns, "", True)
    if p is None:
        return False
    ws = [pr[1] for pr in (product(k) for k in parts_k) if pr]
    if len(set(ws)) != len(ws):
        return False
    inputs = list(dict.fromkeys([x, *ws, wn]))
    rtype = _tensor((*lead, sum(ns)), x)
    body = _build(inputs, parts_k, norm, None, rtype, True)
    new = _new_kernel(parts_k[0], inputs, body, rtype, parts_k[0].sym.data,
                      _place(p, inputs, x, ws, wn, None, eps), {"prologue": "rms"})  # fmt: skip
    if len(parts_k) == 1:
        parts_k[0].result.replace_all_uses_with(new.result)
    else:
        _slice_readers(new, parts_k)
    for o in (*parts_k, norm):
        o.detach()
        o.erase()
    return True


def _fuse_alone(k: st.KernelOp) -> bool:
    pr = product(k)
    if pr is None:
        return False
    a, w, res = pr
    m, kdim = math.prod(shape_of(a.type)[:-1]), shape_of(a.type)[-1]
    epi = "residual" if res is not None else ""
    p = choose(dtype_name(a.type), m, kdim, (shape_of(w.type)[-1],), epi, False)
    if p is None:
        return False
    inputs = list(dict.fromkeys(k.inputs))
    body = _build(inputs, [k], None, None, k.result.type, False)  # type: ignore[arg-type]
    attrs = {"epilogue": epi} if epi else {}
    new = _new_kernel(k, inputs, body, k.result.type, k.sym.data,  # type: ignore[arg-type]
                      _place(p, inputs, a, [w], None, res, 0.0), attrs)  # fmt: skip
    k.result.replace_all_uses_with(new.result)
    k.detach()
    k.erase()
    return True


def small_gemm(fn: func.FuncOp) -> int:
    """Rewrite ``fn``'s small products (see the module doc); returns how many kernels."""
    n = 0
    for k in [o for o in fn.body.block.ops if isinstance(o, st.KernelOp) and o.kind.data == "row"]:
        n += enabled("norm") and _fuse_norm(k)
    for k in [o for o in fn.body.block.ops if isinstance(o, st.KernelOp)]:
        if k.kind.data == "matmul" and k.impl.data == "blas":
            n += enabled("alone") and _fuse_alone(k)
    return n


class GpuSmallGemm(ModulePass):
    """Small bf16/f16 products to the generated tensor-core GEMM, with their fusions."""

    name = "gpu-small-gemm"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        if os.environ.get("KINAC_SMALL_GEMM", "").strip() == "0":
            return
        for f in op.ops:
            if isinstance(f, func.FuncOp) and f.body.blocks:
                small_gemm(f)


def params_of(k: st.KernelOp) -> SmallGemmParams:
    attr = k.attributes["tc"]
    assert isinstance(attr, StringAttr)
    p = decode(attr.data.encode())
    assert isinstance(p, SmallGemmParams)
    return p


def canonical_small_gemm(k: st.KernelOp) -> GpuKernel:
    """The kernel keyed by its parameters (two layers of the same shapes share it)."""
    text = encode(params_of(k)).decode()
    return GpuKernel(gpu_kernel_symbol(text, 0), text, 0, SOURCE)
