"""A rarely taken slow path inside a formula: ``rare(cond, slow, usual)``.

Why: a careful f32 algorithm sometimes needs a slow path for a few inputs (f32 ``sin`` of
``|x| > 1e6`` needs an exact range reduction: the f64 math library's). Computed for every
element it would cost the ordinary case that path. A stage whose algebra has a ``rare`` method
(the GPU's, :class:`kinac.ir.gpu.scalar_algebra.GpuAlgebra`: a branch around the slow path)
computes ``slow`` only where ``cond`` holds, so the ordinary case costs a compare and a branch.

A stage without one gets ``where(cond, slow(), usual)``. On the host that arrives as a
``select`` of a libm call, which ``expand-math`` turns into a versioned loop
(:mod:`kinac.ir.host.rare_loops`: the vectorised loop computes ``usual`` and whether any
``cond`` held; only then the loop runs again with the call behind a branch), because a libm
call in the loop, even behind a branch, stops LLVM's vectoriser (a map of f32 ``sin`` over 1M
floats: 0.18 ms; 9-25 ms as a ``select``, 2.0 ms behind a branch; docs/gpu-precision.md). The
base :class:`~kinac.prims.scalar.Algebra` needs no new operation, so the folder, the
interpreter and the VJP algebras (which evaluate the exact formula, never ``kernel_f32``) are
unchanged.
"""

from __future__ import annotations

from collections.abc import Callable

from kinac.prims.scalar import S, where


def rare(cond: S, slow: Callable[[], S], usual: S) -> S:
    """``slow()`` where ``cond`` holds, else ``usual``; ``cond`` should be rarely true."""
    branch = getattr(cond.alg, "rare", None)
    if branch is None:
        return where(cond, slow(), usual)
    return usual._wrap(branch(cond.v, lambda: slow().v, usual.v))
