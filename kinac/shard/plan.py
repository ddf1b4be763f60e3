"""Planning: after propagation, the collectives each op's operands need (docs/sharding.md).

Kept apart from the fixpoint because it is a different question: propagation decides
layouts, planning compares each use with what its op's factors ask and prices the
redistribution (bytes moved per device).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from kinac.diag.model import Diagnostic, Label
from kinac.dtypes import FLOAT_DTYPES
from kinac.shard.explicit import plan_explicit, site_label
from kinac.shard.factors import PARTIAL_LINEAR, OpFactors
from kinac.shard.model import Collective, TensorLayout, Use
from kinac.shard.result import Result, plan_result

if TYPE_CHECKING:
    from kinac.shard.propagate import PropagationState
    from kinac.tir.graph import Graph


def _factor_axes(
    st: PropagationState, i: int, layout: list[tuple[tuple[str, ...], ...]]
) -> tuple[dict[int, tuple[str, ...]], set[str]]:
    """Each factor's axes at op ``i``: the result's for factors it has, else (reduction
    factors) the first operand's split dim that may carry them; and the *scattered* axes,
    on a reduction factor and on a result dim both: the op computes a partial sum and
    reduce-scatters it into the result's layout (GSPMD's reduce-scatter matmul)."""
    node, of = st.graph.nodes[i], st.facts[i]
    fa: dict[int, tuple[str, ...]] = {}
    in_result = {f for fs in of.result for f in fs}
    # a factor that is a minor part of some dim (``[6] -> [3 2]``: the 2 is the minor factor
    # of the operand's 6) cannot be split: its blocks are strided in that dim, and a local
    # reshape of a whole operand does not make them (it gave every device the first block)
    minor = {f for dims in (*of.operands, of.result) for fs in dims for f in fs[1:]}
    for d, fs in enumerate(of.result):
        if fs:  # a split the major factor cannot hold is computed whole, then sliced (plan);
            # so is one on a factor the op needs whole (a consumer split it: scatter_add's rows)
            ok = fs[0] not in of.need_replication and st.fits(layout[i][d], of.sizes[fs[0]])
            fa[fs[0]] = layout[i][d] if ok and fs[0] not in minor else ()
    on_result = {a for axes in fa.values() for a in axes}
    reduced: set[str] = set()
    for a, dims in zip(node.args, of.operands, strict=True):
        for d, fs in enumerate(dims):
            if not fs or fs[0] in fa or fs[0] in in_result or fs[0] in of.need_replication:
                continue
            if fs[0] in minor:
                continue
            axes = layout[a][d]
            if axes and not reduced & set(axes) and st.fits(axes, of.sizes[fs[0]]):
                fa[fs[0]] = axes
                reduced |= set(axes)
    scattered = on_result & reduced
    if scattered:  # operands see those result factors whole: the split comes after
        for f in in_result:
            if f in fa:
                fa[f] = tuple(x for x in fa[f] if x not in scattered)
    return fa, scattered


def _keeps_partial(op: str, partial_args: list[bool], dtype: str) -> bool:
    """Whether the op is linear in its partial operands, so its result stays partial (a sum
    of integers or booleans is not the cast of a sum of floats: only float results)."""
    if dtype not in FLOAT_DTYPES:
        return False
    if op in PARTIAL_LINEAR:
        return True
    if op in ("add", "sub"):
        return all(partial_args)
    if op in ("mul", "matmul"):
        return sum(partial_args) == 1
    if op == "div":
        return partial_args[0] and not any(partial_args[1:])
    return False


def plan(
    st: PropagationState,
    pinned_partial: dict[int, tuple[str, ...]],
    diags: list[Diagnostic] | None = None,
    results: Sequence[Result | None] = (),
) -> tuple[
    tuple[TensorLayout, ...], tuple[Collective, ...], tuple[tuple[Use, ...], ...], tuple[Use, ...]
]:
    """Final layouts, the collectives in program order, and per op the layouts it reads its
    operands in and the layout it computes locally (``ShardPlan.reads`` / ``computed``).
    ``results[k]``: output ``k``'s declared layout (:mod:`kinac.shard.result`), reached by
    the collectives planned at the end."""
    g = st.graph
    layout = [tuple(d.axes if d is not None else () for d in dims) for dims in st.dims]
    partial: dict[int, tuple[str, ...]] = dict(pinned_partial)
    cause: dict[int, Label | None] = {}
    out: list[Collective] = []
    made: set[tuple[str, str, int, tuple[tuple[str, ...], ...]]] = set()
    """(kind, axis, tensor, layout after): a redistributed copy, reused by later uses."""
    reads: list[tuple[Use, ...]] = [() for _ in g.nodes]
    computed: list[Use] = [Use(layout[p], partial.get(p, ())) for p in range(len(g.params))]

    def local_bytes(t: int, dims: tuple[tuple[str, ...], ...]) -> int:
        n = 1
        for axes in dims:
            for a in axes:
                n *= st.sizes[a]
        return st.nbytes(t) // n

    for i in range(len(g.params), len(g.nodes)):
        node, of = g.nodes[i], st.facts[i]
        if i in st.explicit:
            a = node.args[0]
            src, dst = Use(layout[a], partial.get(a, ())), Use(layout[i], partial.get(i, ()))
            colls, ds = plan_explicit(g, i, src, dst, tuple(st.sizes.items()), _tensor(g, a))
            out += colls
            if diags is not None:
                diags += ds
            reads[i] = (src,)
            computed.append(dst)
            if dst.partial:
                cause[i] = site_label(node)
            continue
        fa, scattered = _factor_axes(st, i, layout)
        pargs = [bool(partial.get(a)) for a in node.args]
        split = {x for axes in fa.values() for x in axes}
        pax = {x for a in node.args for x in partial.get(a, ())}
        # linear in its partial operands, and none of their axes splits a factor here (a
        # slice of a partial sum is not a slice of the sum)
        keep = any(pargs) and _keeps_partial(node.op, pargs, node.type.dtype) and not pax & split
        uses: list[Use] = []
        for k, (a, dims) in enumerate(zip(node.args, of.operands, strict=True)):
            want = tuple(
                fa.get(fs[0], ()) if fs and fs[0] not in of.need_replication else () for fs in dims
            )
            uses.append(Use(want, partial[a] if pargs[k] and keep else ()))
            have = list(layout[a])
            if pargs[k] and not keep:
                for p in partial[a]:
                    hit = next((d for d, w in enumerate(want) if p in w and p not in have[d]), None)
                    kind = "all-reduce" if hit is None else "reduce-scatter"
                    size = local_bytes(a, tuple(have))
                    if hit is not None:
                        have[hit] = have[hit] + (p,)
                    if (kind, p, a, tuple(have)) in made:
                        continue  # an earlier use made this copy already: reused
                    made.add((kind, p, a, tuple(have)))
                    out.append(
                        Collective(
                            kind, p, a, i, size, cause.get(a), f"`{node.op}` reads a partial sum"
                        )
                    )
            for d, w in enumerate(want):
                extra = [x for x in have[d] if x not in w]
                for x in extra:
                    have[d] = tuple(y for y in have[d] if y != x)
                    dim = st.dims[a][d]
                    if ("all-gather", x, a, tuple(have)) in made:
                        continue  # an earlier use gathered this copy already: reused
                    made.add(("all-gather", x, a, tuple(have)))
                    out.append(
                        Collective(
                            "all-gather",
                            x,
                            a,
                            i,
                            local_bytes(a, tuple(have)),
                            dim.cause if dim else None,
                            f"`{node.op}` needs dim {d} whole along `{x}`",
                        )
                    )
                for x in w:
                    if x not in have[d]:
                        out.append(
                            Collective("slice", x, a, i, 0, None, f"`{node.op}` splits dim {d}")
                        )
        for d, fs in enumerate(of.result):
            for x in layout[i][d] if fs and not fa.get(fs[0]) else ():
                if x in scattered:
                    continue  # split by the reduce-scatter below
                reason = f"`{node.op}` computes dim {d} whole; the result is sliced locally"
                out.append(Collective("slice", x, i, i, 0, None, reason))
        reads[i] = tuple(uses)
        red = [f for f in of.reduction if fa.get(f)]
        res_partial = tuple(a for f in sorted(red) for a in fa[f] if a not in scattered)
        here = tuple(fa.get(fs[0], ()) if fs else () for fs in of.result)
        kept = tuple(p for a in node.args for p in partial.get(a, ())) if keep else ()
        computed.append(Use(here, tuple(dict.fromkeys((*res_partial, *sorted(scattered), *kept)))))
        for x in sorted(scattered):
            whole = tuple(tuple(y for y in axes if y != x) for axes in layout[i])
            out.append(
                Collective(
                    "reduce-scatter",
                    x,
                    i,
                    i,
                    local_bytes(i, whole),
                    _reduction_cause(st, i, of, red),
                    f"`{node.op}` sums over `{x}` into a result split over `{x}`",
                )
            )
        if keep:
            res_partial += tuple(
                p for a in node.args for p in partial.get(a, ()) if p not in res_partial
            )
            cause[i] = next((cause[a] for a in node.args if a in cause), None)
        if res_partial:
            partial[i] = tuple(dict.fromkeys(res_partial))
            if red:
                cause[i] = _reduction_cause(st, i, of, red)
    for k, o in enumerate(g.outputs):
        declared = results[k] if k < len(results) else None
        if declared is not None:
            now = Use(layout[o], partial.get(o, ()))
            colls, ds = plan_result(g, g.name, o, now, declared, tuple(st.sizes.items()))
            out += colls
            if diags is not None:
                diags += ds
            continue
        for p in partial.get(o, ()):
            out.append(
                Collective(
                    "all-reduce",
                    p,
                    o,
                    -1,
                    local_bytes(o, layout[o]),
                    cause.get(o),
                    "the entry returns a partial sum",
                )
            )
    layouts = tuple(
        TensorLayout(
            i, g.params[i][0] if i < len(g.params) else f"%{i}", layout[i], partial.get(i, ())
        )
        for i in range(len(g.nodes))
    )
    # one tensor read twice by one op (``(concat [x x])``) is redistributed once
    once = {(c.kind, c.axis, c.node, c.consumer): c for c in out}
    return layouts, tuple(once.values()), tuple(reads), tuple(computed)


def _tensor(g: Graph, i: int) -> str:
    """A parameter by name, an intermediate by its op."""
    return f"`{g.params[i][0]}`" if i < len(g.params) else f"the result of `{g.nodes[i].op}`"


def _reduction_cause(st: PropagationState, i: int, of: OpFactors, red: list[int]) -> Label | None:
    """The annotation behind the split reduction factor (what made the result partial),
    preferring a pinned operand's."""
    best: Label | None = None
    for a, dims in zip(st.graph.nodes[i].args, of.operands, strict=True):
        for d, fs in enumerate(dims):
            dim = st.dims[a][d]
            if fs and fs[0] in red and dim is not None and dim.cause is not None:
                if dim.pinned:
                    return dim.cause
                best = best or dim.cause
    return best
