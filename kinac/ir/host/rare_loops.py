"""Pass helper of ``expand-math``: a loop holding a rare libm path runs it only when needed.

Why: ``kinac.prims.rare`` gives a formula a rarely taken slow path (f32 ``sin``/``cos`` of
``|x| > 1e6`` is the f64 libm function, rounded). The host has no branch in its algebra, so the
formula arrives as ``select(c, truncf(libm(extf(x))), fast)``. Computed as it stands, the call
runs for every element (a map of 1M f32 ``sin``: 0.18 -> 9-25 ms); behind a branch in the loop
it stops LLVM's vectoriser ("call instruction cannot be vectorized": 2 ms). So the loop is
versioned: the fast version computes ``fast`` and an or-reduction of ``c`` (both vectorise),
and only if some ``c`` held, the loop is run again with the call behind a branch (scalar, and
correct for every element). Re-running is safe when the loop reads no buffer it writes (checked
through views; the kernel's buffers are ``noalias``); otherwise the slow path is dropped (the
f32 algorithm's own range, as before 2026-12-02e).
"""

from __future__ import annotations

from xdsl.dialects import arith, func, memref, scf
from xdsl.dialects.builtin import IntegerAttr, ModuleOp, i1
from xdsl.ir import Block, Operation, Region, SSAValue
from xdsl.rewriter import Rewriter

from kinac.ir.host.scalar_algebra import LIBM


def _only_use(v: SSAValue) -> Operation | None:
    uses = list(v.uses)
    return uses[0].operation if len(uses) == 1 else None


def _chain(sel: arith.SelectOp) -> list[Operation] | None:
    """``[extf?, call, truncf]`` if ``sel`` is ``select(c, truncf(libm(...)), v)`` and the chain
    is used by ``sel`` only."""
    trunc = sel.operands[1].owner
    if not isinstance(trunc, arith.TruncFOp) or _only_use(trunc.results[0]) is not sel:
        return None
    call = trunc.operands[0].owner
    if not isinstance(call, func.CallOp) or LIBM not in call.attributes:
        return None
    if _only_use(call.results[0]) is not trunc or call.parent is not sel.parent:
        return None
    ext = call.operands[0].owner
    if isinstance(ext, arith.ExtFOp) and _only_use(ext.results[0]) is call:
        if ext.parent is sel.parent:
            return [ext, call, trunc]
    return [call, trunc]


def _rare_selects(op: Operation) -> list[arith.SelectOp]:
    return [o for o in op.walk() if isinstance(o, arith.SelectOp) and _chain(o) is not None]


def _branch(sel: arith.SelectOp) -> None:
    """``select(c, chain, v)`` -> ``if c {chain} else {v}``."""
    chain = _chain(sel)
    assert chain is not None
    then = Block()
    for o in chain:
        o.detach()
        then.add_op(o)
    then.add_op(scf.YieldOp(chain[-1].results[0]))
    otherwise = Block([scf.YieldOp(sel.operands[2])])
    Rewriter.replace_op(
        sel, scf.IfOp(sel.operands[0], [sel.results[0].type], Region(then), Region(otherwise))
    )


def _drop(sel: arith.SelectOp) -> SSAValue:
    """Replace ``sel`` by its usual value and erase the slow chain; returns the condition."""
    chain = _chain(sel)
    assert chain is not None
    cond = sel.operands[0]
    sel.results[0].replace_all_uses_with(sel.operands[2])
    for o in [sel, *reversed(chain)]:
        o.detach()
        o.erase()
    return cond


def _root(v: SSAValue) -> SSAValue:
    while isinstance(v.owner, memref.ViewOp):
        v = v.owner.source
    return v


def _can_redo(loop: scf.ForOp) -> bool:
    reads = {_root(o.memref) for o in loop.walk() if isinstance(o, memref.LoadOp)}
    writes = {_root(o.memref) for o in loop.walk() if isinstance(o, memref.StoreOp)}
    calls_ok = all(
        LIBM in o.attributes or o.callee.string_value().startswith("kinac_")
        for o in loop.walk()
        if isinstance(o, func.CallOp)
    )
    return calls_ok and not (reads & writes)


def _version(loop: scf.ForOp, sels: list[arith.SelectOp]) -> None:
    redo = loop.clone()
    for s in _rare_selects(redo):
        _branch(s)
    body = loop.body.block
    flag = body.insert_arg(i1, len(body.args))
    old_yield = body.last_op
    assert isinstance(old_yield, scf.YieldOp)
    acc: SSAValue = flag
    for s in sels:
        cond = _drop(s)
        any_op = arith.OrIOp(acc, cond)
        body.insert_op_before(any_op, old_yield)
        acc = any_op.result
    Rewriter.replace_op(old_yield, scf.YieldOp(*old_yield.operands, acc))
    false = arith.ConstantOp(IntegerAttr(0, i1))
    fast = scf.ForOp(
        loop.lb, loop.ub, loop.step, [*loop.iter_args, false], loop.detach_region(loop.body)
    )
    n = len(loop.results)
    then = Block([redo, scf.YieldOp(*redo.results)])
    otherwise = Block([scf.YieldOp(*fast.results[:n])])
    again = scf.IfOp(
        fast.results[n], [r.type for r in loop.results], Region(then), Region(otherwise)
    )
    Rewriter.replace_op(loop, [false, fast, again], [*again.results])


def version_rare_loops(module: ModuleOp) -> None:
    """Every rare libm ``select`` of ``module``: its loop versioned, or a plain branch outside
    loops, or (a loop that cannot be re-run) the slow path dropped."""
    while True:
        sels = _rare_selects(module)
        if not sels:
            return
        sel = sels[0]
        loop = sel.parent_op()
        if not isinstance(loop, scf.ForOp):
            _branch(sel)
            continue
        group = [s for s in sels if s.parent_op() is loop]
        if _can_redo(loop):
            _version(loop, group)
        else:
            for s in group:
                _drop(s)
