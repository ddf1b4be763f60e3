"""A rarely taken slow path inside a formula: ``rare(cond, slow, usual)``.

Why: a careful f32 algorithm sometimes needs a slow path for a few inputs (f32 ``sin`` of
``|x| > 1e6`` needs an exact range reduction: the f64 math library's). A ``where`` would
compute that path for every element. A stage whose algebra has a ``rare`` method (the GPU's,
:class:`kinac.ir.gpu.scalar_algebra.GpuAlgebra`: a branch around the slow path) computes
``slow`` only where ``cond`` holds, so the ordinary case costs a compare and a branch.

A stage without one keeps ``usual`` everywhere, that is the f32 algorithm's documented range.
That is the host today: its elementwise loops are vectorised by LLVM, and a libm call in the
loop, even behind a branch, stops the vectoriser ("call instruction cannot be vectorized"):
a map of f32 ``sin`` over 1M floats went from 0.18 ms to 2.0 ms with a branch and to 9 ms with
a ``where`` (2026-12-02e, docs/gpu-precision.md). The base
:class:`~kinac.prims.scalar.Algebra` needs no new operation, so the folder, the interpreter
and the VJP algebras (which evaluate the exact formula, never ``kernel_f32``) are unchanged.
"""

from __future__ import annotations

from collections.abc import Callable

from kinac.prims.scalar import S


def rare(cond: S, slow: Callable[[], S], usual: S) -> S:
    """``slow()`` where ``cond`` holds, else ``usual``, on a stage that can branch; ``usual``
    on one that cannot (see the module doc). ``cond`` should be rarely true."""
    branch = getattr(cond.alg, "rare", None)
    if branch is None:
        return usual
    return usual._wrap(branch(cond.v, lambda: slow().v, usual.v))
