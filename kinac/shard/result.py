"""Declared result layouts: ``-> (tensor … @sharded(…))`` honoured at the end of an entry.

Why a module of its own: a parameter's annotation pins its tensor, but a result's cannot pin
the node that computes it without contradicting the operands' pins (``x`` split on rows
returned ``@sharded(axis=1)`` is a fine program: compute on rows, then one all-to-all). So the
declared result layout is (docs/sharding.md, "Result layouts"):

- a *hint* on the output node (``propagate(..., hints=)``): set before the fixpoint and never
  overwritten, so an unannotated body is planned toward it (a result split on rows splits the
  rows of what computes it: no traffic), but where it meets a pinned layout the cost model
  decides, never a K0704;
- the layout the entry returns, whatever its node's: the plan redistributes the output into
  it at the end with the one rule every seam uses (:func:`kinac.shard.redistribute.moves`),
  the collectives planned with consumer ``-1`` and caused by the result's annotation, and
  ``@partial(sum)`` keeps a partial sum unreduced (the caller's shares sum to the value);
- **K0708** where it cannot be reached: a declared ``@partial(sum)`` of a value that is not a
  partial sum over that axis (no collective makes one), or a split whose mesh axes do not
  divide the result's dim at the entry's concrete dims (the checker proves it for every dim
  value, K0413; a mesh resized by ``--simulate N`` is checked only here).
"""

from __future__ import annotations

from collections.abc import Sequence

from kinac.diag.model import Diagnostic, Label
from kinac.reader import ast
from kinac.shard.annotations import Pinned, read_pinned
from kinac.shard.codes import shard_diagnostic
from kinac.shard.explicit import move_collectives, spec_kind
from kinac.shard.model import Collective, Use
from kinac.shard.redistribute import moves
from kinac.tir.graph import Graph

Result = tuple[Use, Label | None]
"""A declared result layout and the annotation that declared it."""


def result_pin(
    sig: ast.Signature, graph: Graph, mesh: ast.Mesh, file: str
) -> tuple[Pinned | None, list[Diagnostic]]:
    """The layout ``sig``'s result type declares over ``mesh`` (None when it names none),
    with K0703 for an axis given twice and K0708 for a split the concrete dim refuses."""
    out = graph.outputs[0]
    t = graph.nodes[out].type
    pin, diags = read_pinned(sig.ret, len(t.shape), mesh, file, sig.name, "", True)
    if pin is None:
        return None, diags
    sizes = dict(zip(mesh.axes, mesh.shape, strict=True))
    for d, axes in enumerate(pin.dims):
        n = 1
        for a in axes:
            n *= sizes[a]
        if axes and t.shape[d] % n:
            over = " x ".join(f"`{a}`" for a in axes)
            diags.append(
                shard_diagnostic(
                    "K0708",
                    "error",
                    f"the declared result of `{sig.name}` splits dim {d} over {over} "
                    f"({n} devices), which does not divide it at these dims: the result is "
                    f"{t.dtype}[{' '.join(map(str, t.shape))}] (dim {d} = {t.shape[d]})",
                    Label(pin.where[axes[0]].loc, f"splits dim {d} into {n}"),
                    help=f"use dims that {n} divides, a mesh whose axes divide dim {d}, or "
                    "another layout for the result",
                )
            )
    return pin, diags


def result_hint(pin: Pinned) -> Pinned | None:
    """The hint the output node gets: the declared dims when one is split (partial axes are
    not hinted). A whole declared result is not hinted: the body stays split as its operands
    make it, and the output is gathered once at the end (computing whole everywhere would
    gather earlier, then repeat the work on every device)."""
    if not any(pin.dims):
        return None
    return Pinned(list(pin.dims), (), dict(pin.where))


def result_use(pin: Pinned) -> Result:
    """What planning needs of a declared result: its layout and its annotation."""
    cause = next(iter(pin.where.values()), None)
    return Use(tuple(tuple(d) for d in pin.dims), tuple(pin.partial)), cause


def plan_result(
    graph: Graph,
    defn: str,
    out: int,
    have: Use,
    want: Result,
    axes: Sequence[tuple[str, int]],
) -> tuple[list[Collective], list[Diagnostic]]:
    """The collectives that bring output node ``out`` from layout ``have`` to the declared
    ``want`` (consumer ``-1``), or K0708 when no collective does."""
    dst, cause = want
    steps = moves((tuple(have.dims), tuple(have.partial)), (tuple(dst.dims), tuple(dst.partial)))
    if steps is None:
        ax = next(p for p in dst.partial if p not in have.partial)
        now = spec_kind(have.dims, have.partial, ax)
        now_text = "replicated" if now == "R" else f"split on dim {now[1:]}"
        primary = Label(cause.loc, "declared here") if cause is not None else None
        assert primary is not None, "a declared result has an annotation"
        return [], [
            shard_diagnostic(
                "K0708",
                "error",
                f"the declared result of `{defn}` is a partial sum over `{ax}`, but the value "
                f"it returns is not one: it is {now_text} over `{ax}`, and no collective makes "
                "a value partial",
                primary,
                help="drop the `@partial(sum)` (a partial sum comes from contracting a dim "
                "split over that axis), or declare the layout the value has",
            )
        ]
    label = Label(cause.loc, "the declared result layout") if cause is not None else None
    t = graph.nodes[out].type
    return move_collectives(
        t, out, -1, have, steps, axes, label, "the entry returns its declared result layout"
    ), []
