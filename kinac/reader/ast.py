"""The Kina abstract syntax tree (spec sections 1-2), frozen and span-free.

Nodes carry no spans. Each node that a diagnostic may point at has an ``nid``: its index in a
pre-order walk of its defn (signature first, then body), or of its file's top-level forms for
``Import``/``Mesh``. Spans live apart, in :class:`DefnSpans` tables (``spans[nid]``), which only
the renderer reads. So a comment or whitespace edit leaves every AST value, and every
fingerprint downstream of reading, unchanged, while diagnostics still render at the current
position.

The reader is syntactic: ``(f a b :k v)`` becomes a :class:`Call` whatever ``f`` is
(primitive, defn, or the dim operators ``+ * /`` inside shape lists); the checker interprets
heads and argument positions (a symbol as a dtype, a bracket list as a shape, ...).
"""

from __future__ import annotations

from kinac.diag.model import Diagnostic, Span
from kinac.rules.codec import record

# ---------------------------------------------------------------- dimension expressions


@record
class DimLit:
    """A positive integer literal dimension, e.g. ``128``."""

    nid: int
    value: int


@record
class DimVar:
    """A dimension variable, e.g. ``B`` or ``Dh``."""

    nid: int
    name: str


@record
class DimOp:
    """``(+ a b …)``, ``(* a b …)`` or ``(/ a b)`` over dims; ``op`` is ``+``, ``*`` or ``/``."""

    nid: int
    op: str
    args: tuple[DimExpr, ...]


@record
class DimVariadic:
    """A leading variadic group: ``...`` (``name == ""``) or ``..b`` (``name == "b"``)."""

    nid: int
    name: str


DimExpr = DimLit | DimVar | DimOp | DimVariadic

# ---------------------------------------------------------------- types and annotations


@record
class AnnotArg:
    """One argument of an annotation: positional (``key is None``) or ``key=value``.

    ``value`` is an ``int`` or a ``str`` (a symbol such as a mesh or axis name, or ``sum``).
    """

    key: str | None
    value: int | str


@record
class Annotation:
    """``@name`` or ``@name(args…)``: placement (``cpu``, ``cuda``) or sharding annotations."""

    nid: int
    name: str
    args: tuple[AnnotArg, ...] = ()


@record
class TensorType:
    """``(tensor DTYPE [DIM …] ANNOTATION …)``; a bare dtype ``f32`` is ``dims == ()``.

    ``dtype`` is a concrete dtype name (``f64 f32 f16 bf16 i64 i32 bool``) or a dtype variable.
    """

    nid: int
    dtype: str
    dims: tuple[DimExpr, ...]
    annotations: tuple[Annotation, ...] = ()


# ---------------------------------------------------------------- expressions


@record
class Var:
    """A symbol in expression position: a variable, a dim used as a value, or a dtype name."""

    nid: int
    name: str


@record
class Num:
    """A numeric literal; ``is_float`` distinguishes ``1.0`` from ``1``."""

    nid: int
    value: int | float
    is_float: bool


@record
class Str:
    """A string literal (only meaningful in ``import``; kept for error reporting)."""

    nid: int
    value: str


@record
class ListLit:
    """A ``[ … ]`` list in expression position: a shape, a permutation, a list of tensors."""

    nid: int
    items: tuple[Expr, ...]


@record
class AnnotExpr:
    """An annotation in expression position, e.g. the ``@cuda(0)`` of ``(to-device x @cuda(0))``."""

    nid: int
    annotation: Annotation


@record
class Kwarg:
    """``:key value`` inside a call."""

    nid: int
    key: str
    value: Expr


@record
class Call:
    """``(head arg … :key value …)``: a primitive, a defn call, or a dim operator."""

    nid: int
    head: str
    head_nid: int
    args: tuple[Expr, ...]
    kwargs: tuple[Kwarg, ...] = ()


@record
class Binding:
    """One ``(name EXPR)`` of a ``let``."""

    nid: int
    name: str
    value: Expr


@record
class Let:
    """``(let [(name EXPR) …] BODY)``: sequential bindings."""

    nid: int
    bindings: tuple[Binding, ...]
    body: Expr


@record
class The:
    """``(the TYPE EXPR)``: an ascription that must be provably equal."""

    nid: int
    type: TensorType
    expr: Expr


Expr = Var | Num | Str | ListLit | AnnotExpr | Call | Let | The

# ---------------------------------------------------------------- definitions


@record
class Param:
    """``(x : TYPE)`` (``type`` set) or ``(H : dim)`` (``is_dim`` true, ``type`` None)."""

    nid: int
    name: str
    type: TensorType | None
    is_dim: bool = False


@record
class Constraint:
    """A ``where`` clause: ``rel`` is ``= < <= > >= divides``; ``(divides a b)``: a divides b."""

    nid: int
    rel: str
    lhs: DimExpr
    rhs: DimExpr


@record
class Signature:
    """A defn without its body: the firewall that callers depend on."""

    name: str
    params: tuple[Param, ...]
    ret: TensorType
    where: tuple[Constraint, ...]


@record
class Defn:
    """``(defn NAME [PARAM …] -> TYPE (where …)? BODY)``; ``nid`` 0 is the defn form itself."""

    signature: Signature
    body: Expr

    @property
    def name(self) -> str:
        return self.signature.name


@record
class Import:
    """``(import "path")``; ``nid`` indexes the file-level span table."""

    nid: int
    path: str


@record
class Mesh:
    """``(mesh NAME [SIZES…] :axes [A …])``; a 1-D mesh's single axis is named after it."""

    nid: int
    name: str
    shape: tuple[int, ...]
    axes: tuple[str, ...]
    file: str = ""
    """The declaring file (workspace-relative), to point at it; ``""`` for ``kina.toml``."""


@record
class DefnSpans:
    """``spans[nid]`` is the span of node ``nid`` of one defn (or of the file's top level)."""

    spans: tuple[Span, ...]


@record
class ParsedFile:
    """Everything the reader makes of one file.

    ``defns`` keeps source order (duplicates included; the checker reports them).
    ``defn_spans[i]`` belongs to ``defns[i]``; ``top_spans`` to ``imports`` and ``meshes``.
    ``diagnostics`` holds the parse errors; the forms that did parse are kept, so one bad form
    does not hide the rest of the file.
    """

    file: str
    module: str
    imports: tuple[Import, ...]
    meshes: tuple[Mesh, ...]
    defns: tuple[Defn, ...]
    defn_spans: tuple[DefnSpans, ...]
    top_spans: DefnSpans
    diagnostics: tuple[Diagnostic, ...]
    broken_defns: tuple[str, ...] = ()
    """Names of the defns dropped for errors (source order): a later stage can avoid reporting
    calls to them as calls of unknown functions. (Added by the reader, additively.)"""
