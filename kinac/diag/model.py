"""The diagnostic data model.

Diagnostics are values, returned by queries and cached with them; the renderer turns them into
text or JSON. A label points either at an absolute :class:`Span` (the reader, which re-runs on
every edit, uses these) or at a :class:`NodeRef`: a defn and a node id inside it. Later stages
use node refs only, because node ids do not move when comments or whitespace change: a cached
type error stays valid after such an edit and is rendered at the node's *current* position,
looked up in the latest parse.
"""

from __future__ import annotations

from kinac.rules.codec import record


@record
class Span:
    """A source range: workspace-relative file path, 1-based line/column, byte offsets."""

    file: str
    line: int
    col: int
    end_line: int
    end_col: int
    start: int
    end: int


@record
class NodeRef:
    """Node ``nid`` of defn ``defn`` in ``file`` (``defn=""`` for file-level forms)."""

    file: str
    defn: str
    nid: int


@record
class Label:
    """A place in the source and what to say about it."""

    loc: Span | NodeRef
    message: str = ""


@record
class Diagnostic:
    """One error, warning or note.

    ``code`` is stable (``K0203``) and has a long explanation (``kinac explain CODE``).
    ``counterexample`` maps dimension variables to the concrete values that break an
    obligation, when the checker found one.
    """

    code: str
    severity: str  # "error" | "warning" | "note"
    message: str
    primary: Label
    secondary: tuple[Label, ...] = ()
    notes: tuple[str, ...] = ()
    help: str | None = None
    counterexample: tuple[tuple[str, int], ...] | None = None

    @property
    def is_error(self) -> bool:
        return self.severity == "error"
