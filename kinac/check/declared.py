"""Matching an inferred type against a declared one: a defn's result type and ``the``.

Why a module: the rule (weak literals take the declared dtype when they can; a float literal
meeting an integer dtype is K0603, a scalar where a tensor is declared K0411; dtypes, devices,
then each dim provably equal) is shared by both places, and ``infer.py`` stays a walk over
expressions.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kinac.check.formula import Rel
from kinac.check.types import WEAK_I, SType, fmt_type
from kinac.diag.model import Label

if TYPE_CHECKING:
    from kinac.check.infer import Checker


def match_declared(
    ck: Checker, want: SType, got: SType, nid: int, what: str, secondary: tuple[Label, ...]
) -> None:
    """``got`` must be provably ``want``; raises the checker's failure after a diagnostic."""
    from kinac.check.infer import CheckFail

    if got.is_weak and (got.shape.dims or got.shape.group is not None):
        # a weak `where`: its literals take the declared dtype if they can, else f32
        fits_want = want.dtype not in ("i32", "i64", "bool") or got.dtype == WEAK_I
        got = SType(want.dtype if fits_want else "f32", got.shape, got.device, got.shards)
    wt, gt = fmt_type(want), fmt_type(got)
    if got.is_weak:
        ok = (
            not want.shape.dims
            and want.shape.group is None
            and (want.dtype not in ("i32", "i64", "bool") or got.dtype == WEAK_I)
        )
        if not ok and not want.shape.dims and want.shape.group is None:
            raise ck.err(  # rank 0 both: a float literal meets an integer dtype
                "K0603",
                f"{what} is a float literal but the declared type is {want.dtype}",
                nid,
                help="write an integer literal (div and pow of literals are floats), "
                "or declare a float result",
                secondary=secondary,
            )
        if not ok:
            raise ck.err(
                "K0411",
                f"{what} is a scalar literal but the declared type is {wt}",
                nid,
                help=f"make a tensor of it: (full {want.dtype} [DIM …] v)",
                secondary=secondary,
            )
        return
    if want.dtype != got.dtype:
        raise ck.err(
            "K0411",
            f"{what} has dtype {got.dtype} but the declared type is {wt}",
            nid,
            help=f"cast it: (cast … :to {want.dtype})",
            secondary=secondary,
        )
    if want.device and got.device and want.device != got.device:
        raise ck.err(
            "K0411",
            f"{what} is on {got.device} but the declared type is {wt}",
            nid,
            secondary=secondary,
        )
    ws, gs = want.shape, got.shape
    if ws.group != gs.group or len(ws.dims) != len(gs.dims):
        raise ck.err(
            "K0411",
            f"{what} has type {gt} but the declared type is {wt}",
            nid,
            secondary=secondary,
            label=f"has type {gt}",
        )
    ok = True
    for j, (x, y) in enumerate(zip(gs.dims, ws.dims, strict=True)):
        if x != y:
            ok = ok and (
                ck.require(
                    Rel("eq", x, y),
                    "K0411",
                    f"{what} has type {gt} but the declared type is {wt}; dim {j} differs",
                    nid,
                    secondary,
                )
                and ok
            )
    if not ok:
        raise CheckFail()
