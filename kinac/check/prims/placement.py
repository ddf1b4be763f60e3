"""Placement and distribution primitives: ``to-device``, ``to-host``, ``reshard`` and the
collectives.

Why apart: they change where a tensor lives, not its shape. ``reshard`` and the collectives
are shape-preserving; each becomes one graph op ``reshard`` carrying the primitive (``kind``)
and its annotations as written (``layout``): the identity on one device (the interpreter, host
and GPU lowering), a pinned layout for sharding propagation, which checks that a collective's
layout change is the one it names and redistributes into it (docs/sharding.md, "reshard and
the collective primitives").
"""

from __future__ import annotations

from typing import Any

from kinac.check import shard_factors as SF
from kinac.check import vjp_rules as VJ
from kinac.check.prims.base import Args, CArgs, Prim, RuleCtx, ShapeError, register
from kinac.check.prims.common import device_number_ok
from kinac.check.types import SShape, SType
from kinac.tir.graph import TType

T1 = (("x", "tensor"),)


def _tensor_only(rc: RuleCtx, t: SType, op: str) -> bool:
    if t.is_weak:
        rc.fail(
            "K0208",
            f"`{op}` moves a tensor, not a literal",
            0,
            help="create the value on the device instead, e.g. with `full … @cuda(0)`",
        )
        return False
    return True


def _to_device_rule(rc: RuleCtx, a: Args) -> SType | None:
    t = a.t[0]
    if not _tensor_only(rc, t, "to-device") or not device_number_ok(rc, a.v["device"]):
        return None
    return SType(t.dtype, t.shape, a.v["device"], t.shards)


def _to_device_concrete(a: CArgs) -> tuple[TType, dict[str, Any]]:
    t = a.t[0]
    return TType(t.dtype, t.shape, a.v["device"]), {}


register(
    Prim(
        "to-device",
        "to_device",
        (("x", "tensor"), ("device", "device")),
        (),
        _to_device_rule,
        _to_device_concrete,
        "placement",
        shard_rule=SF.pointwise,
        vjp_rule=VJ.placement,
        doc="copy to a device",
    )
)


def _to_host_rule(rc: RuleCtx, a: Args) -> SType | None:
    t = a.t[0]
    if not _tensor_only(rc, t, "to-host"):
        return None
    return SType(t.dtype, t.shape, "cpu", t.shards)


def _to_host_concrete(a: CArgs) -> tuple[TType, dict[str, Any]]:
    t = a.t[0]
    return TType(t.dtype, t.shape, "cpu"), {}


register(
    Prim(
        "to-host",
        "to_host",
        T1,
        (),
        _to_host_rule,
        _to_host_concrete,
        "placement",
        shard_rule=SF.pointwise,
        vjp_rule=VJ.placement,
        doc="copy to the host",
    )
)


def _reshard_rule(name: str) -> Any:
    def rule(rc: RuleCtx, a: Args) -> SType | None:
        t = a.t[0]
        if not _tensor_only(rc, t, name):
            return None
        rc.set_attr("kind", name)
        return SType(t.dtype, SShape(t.shape.group, t.shape.dims), t.device, a.v["annots"])

    return rule


def _reshard_concrete(a: CArgs) -> tuple[TType, dict[str, Any]]:
    """The operand's type; attrs: the primitive and its annotations as plain tuples
    (``((name, ((key, value), …)), …)``, key None for a positional argument)."""
    t = a.t[0]
    if t.dtype.startswith("~"):
        raise ShapeError("collective of a literal")
    layout = tuple((s.name, tuple(s.args)) for s in a.v.get("annots", ()))
    return t, {"kind": a.v.get("kind", "reshard"), "layout": layout}


for _name in ("reshard", "all-reduce", "all-gather", "reduce-scatter", "all-to-all"):
    register(
        Prim(
            _name,
            "reshard",
            (("x", "tensor"), ("annots", "annots")),
            (),
            _reshard_rule(_name),
            _reshard_concrete,
            "placement",
            # a barrier: the result's layout is pinned by its annotations, not propagated
            # from the operand; planning redistributes into it (kinac/shard/explicit.py)
            shard_rule=SF.opaque,
            vjp_rule=VJ.identity,
            doc="changes sharding only (the identity on one device)",
        )
    )
