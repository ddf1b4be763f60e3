"""Specialisation: a checked entry defn at concrete dims -> a :class:`kinac.tir.graph.Graph`.

Why: lowering wants one SSA graph per entry point with integer shapes, every call inlined,
axes normalised, weak scalars folded into ``const`` nodes of the dtype they meet, and static
arguments as attrs. The walk goes over the typed IR of each (already checked) defn; every node
is also evaluated by its primitive's concrete evaluator and compared with its symbolic type at
these dims, so a disagreement between the two rule forms is caught as an internal error.
"""

from __future__ import annotations

from collections.abc import Mapping

from kinac.check.bind import DimValue, complete_dims, dtype_errors
from kinac.check.codes import at, error
from kinac.check.deferred import check_deferred
from kinac.check.literals import fits
from kinac.check.protocol import SpecEnv
from kinac.check.sig import DefnRef
from kinac.check.spec_calls import SPLICED_LIMIT
from kinac.check.spec_emit import SpecAbort, SpecEmitter, Val, Weak, misfit
from kinac.diag.model import Diagnostic
from kinac.rules.codec import record
from kinac.tir.graph import FLOAT_DTYPES, Graph, Node, TType, make_node

__all__ = ["SpecAbort", "SpecEmitter", "Specialised", "specialise"]


@record
class Specialised:
    """A graph (None when specialisation failed), the dims it was built at, diagnostics.

    ``calls``: the node range ``(start, stop)`` of each call the entry's own body makes whose
    arguments are all tensors: the nodes the inlined callee added. Lowering may cut the graph
    at these boundaries into pieces compiled on their own (:mod:`kinac.ir.pieces`): identical
    calls give identical pieces, so an edit re-lowers only the pieces it changed."""

    graph: Graph | None
    dims: tuple[tuple[str, int | tuple[int, ...]], ...]
    dtypes: tuple[tuple[str, str], ...]
    diagnostics: tuple[Diagnostic, ...]
    calls: tuple[tuple[int, int], ...] = ()


def specialise(
    ref: DefnRef,
    dims: Mapping[str, DimValue],
    dtypes: Mapping[str, str],
    env: SpecEnv,
    default_device: str = "cpu",
) -> Specialised:
    """Build the graph of ``ref`` at ``dims`` (free dims, dim parameters, groups as ``..b``;
    ``where``-derived dims are completed) and ``dtypes``."""
    cd = env.checked(ref)
    key_dims = tuple(sorted((k, tuple(v) if isinstance(v, list) else v) for k, v in dims.items()))
    key_dt = tuple(sorted(dtypes.items()))
    if not cd.ok:
        errs = tuple(d for d in cd.diagnostics if d.is_error)
        return Specialised(
            None,
            key_dims,
            key_dt,
            errs
            or (error("K0802", f"`{ref.name}` does not type-check", at(ref.file, ref.name, 0)),),
        )
    denv, groups, diags = complete_dims(cd.sig, dims)
    diags.extend(dtype_errors(cd.sig, dtypes))
    late = check_deferred(cd, denv)
    if late is not None:
        diags.append(late)
    if diags:
        return Specialised(None, key_dims, key_dt, tuple(diags))
    em = SpecEmitter(env, default_device)
    params: list[tuple[str, TType]] = []
    args: list[Val] = []
    for p in cd.sig.params:
        if p.type is None:
            continue
        t = em.ttype(p.type, denv, groups, dict(dtypes), p.type.device or default_device)
        try:
            em.runnable(t.device, ref, p.nid, f"the parameter `{p.name}`")
            em.small_enough(t, ref, p.nid, f"the parameter `{p.name}`")
        except SpecAbort as a:
            return Specialised(None, key_dims, key_dt, (a.diag,))
        pair, node = _param(p.name, t, len(params))
        params.append(pair)
        args.append(len(em.nodes))
        em.nodes.append(node)
    try:
        out = em.defn(ref, args, denv, groups, dict(dtypes), ())
        ret_dt = em.dtype(cd.sig.ret.dtype, dict(dtypes))
        ret_dt = ret_dt if ret_dt in FLOAT_DTYPES or ret_dt in ("i32", "i64", "bool") else "f32"
        if isinstance(out, Weak) and not fits(out.value, ret_dt):
            raise SpecAbort(misfit(out.value, ret_dt, ref, cd.body.nid if cd.body else 0))
        idx = em.materialise(out, ret_dt, default_device)
    except SpecAbort as a:
        return Specialised(None, key_dims, key_dt, (a.diag,))
    full: dict[str, DimValue] = dict(denv)
    full.update(groups)
    g = Graph(ref.name, tuple(params), tuple(em.nodes), (idx,))
    return Specialised(g, tuple(sorted(full.items())), key_dt, (), tuple(em.calls))


# A param's (name, type) pair and node by value, in this process (bounded): an edit's entry
# takes the previous build's objects for its unchanged params (289 at L=32), so the codec
# reuses their runs' text (kinac.rules.codec._RUN_OF). Records are immutable: exact.
_PARAMS: dict[tuple[str, TType, int], tuple[tuple[str, TType], Node]] = {}


def _param(name: str, t: TType, index: int) -> tuple[tuple[str, TType], Node]:
    key = (name, t, index)
    hit = _PARAMS.get(key)
    if hit is None:
        if len(_PARAMS) >= 4 * SPLICED_LIMIT:
            _PARAMS.clear()
        hit = _PARAMS[key] = ((name, t), make_node("param", (), t, index=index))
    return hit
