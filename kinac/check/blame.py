"""Which argument fixes a callee's dim at a call when several give it: the majority.

Why: binding dims in parameter order takes the first argument as the truth, so one wrong first
argument blamed every right one. The checker, like the Python API and ``kinac run``
(``kinac.call_shapes``), lets the value most arguments agree on fix the dim (a tie: the first
binding), so its diagnostics blame the arguments that disagree with the majority.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from kinac.check import dims as D
from kinac.check.dims import Poly
from kinac.check.sig import SigInfo
from kinac.check.types import SShape


def binding_sites(
    sig: SigInfo,
    pairs: Sequence[tuple[int, int, Poly, Poly]],
    majority: Callable[[Poly], Poly] | None,
) -> dict[str, tuple[int, int]]:
    """For each variable that a parameter dim fixes alone (``[N]``), the argument dim that
    fixes it: the plan's first occurrence, or with ``majority`` the first occurrence of the
    value most arguments give there (ties: the earliest value)."""
    out: dict[str, tuple[int, int]] = {}
    for st in sig.plan:
        if st.kind != "param" or st.coeff != D.const(1) or st.rest != D.ZERO:
            continue
        out[st.var] = (st.param, st.dim)
        if majority is None:
            continue
        groups: dict[Poly, list[tuple[int, int]]] = {}
        for i, j, d, v in pairs:
            if D.as_var(d) == st.var:
                groups.setdefault(majority(v), []).append((i, j))
        if len(groups) > 1:
            best = max(groups.values(), key=len)  # the first of the largest: ties go first
            out[st.var] = best[0]
    return out


def pick_majority(
    given: list[tuple[int, SShape]], majority: Callable[[Poly], Poly] | None
) -> tuple[int, SShape]:
    """The argument (index, value) that fixes a variadic group several arguments give: the
    first of the value most of them agree on (ties: the earliest value), as for single dims;
    without ``majority``, the first."""
    if majority is None:
        return given[0]
    classes: dict[tuple[object, ...], list[tuple[int, SShape]]] = {}
    for i, g in given:
        key = (g.group, len(g.dims), *(majority(d) for d in g.dims))
        classes.setdefault(key, []).append((i, g))
    return max(classes.values(), key=len)[0]
