"""The typed IR of one defn: its body with a symbolic type on every node.

Why: it is the frozen, fingerprinted result of checking a defn (a query value), what
``format_types`` prints, and what ``specialise`` walks to build a concrete
:class:`kinac.tir.graph.Graph`. Calls keep their callee's :class:`DefnRef` and the
instantiation (callee variables in the caller's terms); specialisation inlines them.
"""

from __future__ import annotations

from typing import Any

from kinac.check.calls import Inst
from kinac.check.oblig import Deferred, ObStats
from kinac.check.sig import DefnRef, SigInfo
from kinac.check.types import SType
from kinac.diag.model import Diagnostic
from kinac.rules.codec import record
from kinac.tir.graph import lookup_attr


@record
class TParam:
    """A tensor parameter; ``index`` counts tensor parameters only."""

    nid: int
    name: str
    index: int
    type: SType


@record
class TLocal:
    """A use of a ``let`` binding."""

    nid: int
    name: str
    type: SType


@record
class TDim:
    """A dimension used as a value (a weak integer scalar)."""

    nid: int
    dim: Any
    type: SType


@record
class TConst:
    """A literal (a weak scalar)."""

    nid: int
    value: int | float
    type: SType


@record
class TPrim:
    """A primitive; ``op`` is the graph op name, ``attrs`` its static arguments (symbolic)."""

    nid: int
    op: str
    args: tuple[TExpr, ...]
    attrs: tuple[tuple[str, Any], ...]
    type: SType

    def attr(self, name: str, default: Any = None) -> Any:
        return lookup_attr(self.attrs, name, default)


@record
class TCall:
    """A call of another defn with its tensor arguments and instantiation."""

    nid: int
    callee: DefnRef
    args: tuple[TExpr, ...]
    inst: Inst
    type: SType


@record
class TBind:
    """One ``let`` binding."""

    nid: int
    name: str
    value: TExpr


@record
class TLet:
    """``let``: bindings in order, then the body."""

    nid: int
    bindings: tuple[TBind, ...]
    body: TExpr
    type: SType


TExpr = TParam | TLocal | TDim | TConst | TPrim | TCall | TLet


@record
class CheckedDefn:
    """The result of checking one defn: typed body (None when it has errors), diagnostics,
    how its obligations were closed, and those deferred to specialisation (checked there at
    concrete dims; empty unless ``solver.on_unknown = "runtime-check"``)."""

    ref: DefnRef
    sig: SigInfo
    body: TExpr | None
    diagnostics: tuple[Diagnostic, ...]
    stats: ObStats
    deferred: tuple[Deferred, ...] = ()

    @property
    def ok(self) -> bool:
        return self.body is not None and not any(d.is_error for d in self.diagnostics)
