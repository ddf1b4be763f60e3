"""Symbolic tensor types: dtype, shape over dims (with an optional leading variadic group),
placement and (carried, not yet checked) sharding.

Why: the checker reasons about shapes for all dims at once; these values are what the typed
IR stores and what callers see of a defn's signature. Dtypes are strings: a concrete dtype, a
dtype variable (ranging over the float dtypes), ``~f``/``~i`` for a weak scalar (a literal or a
dim used as a value, which takes the dtype of the tensor it meets) or ``!`` for the type of an
expression that already failed (it never produces further errors).
"""

from __future__ import annotations

from kinac.check import dims as D
from kinac.check.dims import Poly
from kinac.rules.codec import record
from kinac.tir.graph import DTYPES, FLOAT_DTYPES

INT_DTYPES = ("i64", "i32")
WEAK_F, WEAK_I, ERR = "~f", "~i", "!"


@record
class Shard:
    """A sharding annotation as written (``sharded``, ``replicated``, ``partial``)."""

    name: str
    args: tuple[tuple[str | None, int | str], ...]


@record
class SShape:
    """``group`` is a variadic group name (``..b``, ``...``) standing before ``dims``, or None."""

    group: str | None
    dims: tuple[Poly, ...]


@record
class SType:
    """A symbolic tensor type. ``device`` is ``""`` (the build target's default), ``cpu`` or
    ``cuda:N``."""

    dtype: str
    shape: SShape
    device: str = ""
    shards: tuple[Shard, ...] = ()

    @property
    def is_weak(self) -> bool:
        return self.dtype in (WEAK_F, WEAK_I)

    @property
    def is_err(self) -> bool:
        return self.dtype == ERR


SCALAR = SShape(None, ())


def is_dtype_var(dt: str) -> bool:
    """A dtype variable: any symbol that is not a concrete dtype or an internal marker."""
    return dt not in DTYPES and dt not in (WEAK_F, WEAK_I, ERR)


def is_float(dt: str) -> bool:
    """Float dtypes, dtype variables (which range over them) and weak scalars (promotable)."""
    return dt in FLOAT_DTYPES or dt in (WEAK_F, WEAK_I) or is_dtype_var(dt)


def is_int(dt: str) -> bool:
    return dt in INT_DTYPES


def device_of(annots: tuple[tuple[str, tuple[tuple[str | None, int | str], ...]], ...]) -> str:
    """The device named by placement annotations (``cpu``, ``cuda(N)``), or ``""``."""
    for name, args in annots:
        if name == "cpu":
            return "cpu"
        if name == "cuda":
            n = args[0][1] if args else 0
            return f"cuda:{n}"
    return ""


def device_annot(dev: str) -> str:
    """Kina syntax for a device: ``@cpu``, ``@cuda(0)``."""
    if dev.startswith("cuda:"):
        return f"@cuda({dev[5:]})"
    return f"@{dev}"


def fmt_shape(s: SShape) -> str:
    items = ([s.group] if s.group is not None else []) + [D.fmt_kina(d) for d in s.dims]
    return "[" + " ".join(items) + "]"


def fmt_shard(sh: Shard) -> str:
    if not sh.args:
        return f"@{sh.name}"
    inner = ", ".join(f"{k}={v}" if k is not None else str(v) for k, v in sh.args)
    return f"@{sh.name}({inner})"


def fmt_type(t: SType) -> str:
    """Kina syntax: ``(tensor f32 [B S D] @cuda(0))``; weak scalars print as ``weak-float``."""
    if t.is_err:
        return "<error>"
    if t.is_weak:
        return "weak-float" if t.dtype == WEAK_F else "weak-int"
    parts = [t.dtype, fmt_shape(t.shape)]
    if t.device:
        parts.append(device_annot(t.device))
    parts.extend(fmt_shard(s) for s in t.shards)
    return "(tensor " + " ".join(parts) + ")"


def fmt_dims(s: SShape) -> str:
    """Infix rendering for messages: ``[B, S, H*Dh]``."""
    items = ([s.group] if s.group is not None else []) + [D.fmt_infix(d) for d in s.dims]
    return "[" + ", ".join(items) + "]"


def subst_shape(s: SShape, dims: dict[str, Poly], groups: dict[str, SShape]) -> SShape:
    """Instantiate dims and groups (a group becomes the caller's leading shape)."""
    ds = tuple(D.subst(d, dims) for d in s.dims)
    if s.group is not None and s.group in groups:
        g = groups[s.group]
        return SShape(g.group, g.dims + ds)
    return SShape(s.group, ds)


def settle_weak(t: SType) -> SType:
    """A weak tensor (a ``where`` of literals over a condition tensor) that meets no strong
    dtype, or meets a primitive outside the elementwise family, is f32 (spec §4: weak alone is
    f32); weak scalars and strong types are returned unchanged."""
    if t.is_weak and (t.shape.dims or t.shape.group is not None):
        return SType("f32", t.shape, t.device, t.shards)
    return t
