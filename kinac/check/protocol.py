"""What the checker needs from its surroundings (the rule engine, or ``env.InMemoryEnv``).

Why a protocol: ``kinac.check`` is a pure library; the lead's pipeline implements these
methods as cached queries (signature lookups, solver results keyed by canonical formula,
checked callees for specialisation), so the checker never imports the engine.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from kinac.check.formula import Formula, SolveResult
from kinac.check.sig import DefnRef
from kinac.reader import ast

if TYPE_CHECKING:
    from kinac.check.typed_ir import CheckedDefn


class CheckEnv(Protocol):
    """Name resolution and solving for checking one defn against its callees' signatures."""

    budget_ms: int
    on_unknown: str  # "error" (K0501) or "runtime-check" (K0502 warning, checked when specialised)

    def lookup(self, file: str, name: str) -> tuple[DefnRef, ast.Signature] | None:
        """The defn ``name`` as seen from ``file``: its own defns first, then its imports
        (the prelude included)."""
        ...

    def visible(self, file: str) -> tuple[str, ...]:
        """Every defn name visible from ``file`` (for "did you mean" help)."""
        ...

    def meshes(self, file: str) -> tuple[ast.Mesh, ...]:
        """The meshes declared in ``file`` (and its imports)."""
        ...

    def solve(self, formula: Formula) -> SolveResult:
        """Decide a canonical formula (the engine caches results per formula)."""
        ...

    def is_broken(self, file: str, name: str) -> bool:
        """Whether ``name``, seen from ``file``, is a defn the reader dropped for syntax errors:
        its calls are then not checked (its own K01xx error says what is wrong), rather than
        reported again as unknown names."""
        ...


class SpecEnv(CheckEnv, Protocol):
    """Additionally gives the checked body of any defn, for specialisation (inlining)."""

    def checked(self, ref: DefnRef) -> CheckedDefn: ...


class GraphEnv(Protocol):
    """For recursion detection: the defns a defn calls, with the call's node id."""

    def callees(self, ref: DefnRef) -> tuple[tuple[DefnRef, int], ...]: ...
