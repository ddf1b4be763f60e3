"""What instantiating a callee's signature at a call produces (:func:`kinac.check.calls.instantiate`).

Why a module of its own: the records are shared by the symbolic check of a call (its needs
become obligations), the concrete binding of an entry (needs evaluated at integer dims) and
the typed IR (an instance's dims); ``calls.py`` keeps the routine that fills them.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from kinac.check.dims import Poly
from kinac.check.formula import Rel
from kinac.check.types import SShape, SType
from kinac.rules.codec import record


@record
class Inst:
    """A callee's variables in the caller's terms."""

    dims: tuple[tuple[str, Poly], ...]
    groups: tuple[tuple[str, SShape], ...]
    dtypes: tuple[tuple[str, str], ...]


@dataclass
class Need:
    """An obligation a call creates: ``rel`` (caller's terms), what it means, where it comes
    from (parameter index or where-clause index)."""

    rel: Rel
    code: str
    what: str
    param: int | None = None
    where: int | None = None
    shown: tuple[Poly, ...] = ()
    whole_clause: bool = False  # ``rel`` is where clause ``where`` itself, instantiated
    bound_by: tuple[int, str] | None = None  # the argument that fixed the dim, what it says


@dataclass
class Issue:
    """A failure that needs no proof (rank, dtype, placement)."""

    code: str
    message: str
    param: int | None
    help: str | None = None


@dataclass
class Bound:
    """The result of :func:`instantiate`."""

    dims: dict[str, Poly] = field(default_factory=dict)
    groups: dict[str, SShape] = field(default_factory=dict)
    dtypes: dict[str, str] = field(default_factory=dict)
    needs: list[Need] = field(default_factory=list)
    issues: list[Issue] = field(default_factory=list)
    result: SType | None = None

    def inst(self) -> Inst:
        return Inst(
            tuple(sorted(self.dims.items())),
            tuple(sorted(self.groups.items())),
            tuple(sorted(self.dtypes.items())),
        )
