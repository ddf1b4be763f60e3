"""Dtype variables named like a dtype: ``(tensor float32 [N])``, ``int32``, ``f65`` (K0304).

Why: spec section 3 makes any symbol that is not one of ``f64 f32 f16 bf16 i64 i32 bool`` a
dtype *variable*, so a user who writes numpy's or torch's spelling (``float32``, ``int32``,
``bfloat16``) or mistypes one (``f65``) gets a generic defn without a word: ``kinac check``
passed, and the first report came from a call (``x`` of ``h`` has dtype ``int32``, a float
dtype variable, but the argument is i32, with a help to convert the array to float32). The
program is valid, so this is a warning at the type that introduces the name, saying which
dtype was probably meant.
"""

from __future__ import annotations

import re

from kinac.check.codes import at, warning
from kinac.check.types import is_dtype_var
from kinac.diag.model import Diagnostic
from kinac.reader import ast

_ALIASES: dict[str, str] = {
    "float64": "f64",
    "double": "f64",
    "fp64": "f64",
    "float32": "f32",
    "float": "f32",
    "single": "f32",
    "fp32": "f32",
    "float16": "f16",
    "half": "f16",
    "fp16": "f16",
    "bfloat16": "bf16",
    "int64": "i64",
    "long": "i64",
    "int32": "i32",
    "int": "i32",
    "boolean": "bool",
    "bool_": "bool",
}
# spellings of a width: f8, i16, u8, uint8, int4, fp8, bf8, float8 ... (none is a Kina dtype)
_WIDTH = re.compile(r"(?:u?int|[iuf]|fp|bf|float|bfloat)\d+")
_KINA = "f64 f32 f16 bf16 i64 i32 bool"


def lookalike(name: str) -> str | None:
    """The dtype ``name`` probably means (``""`` for a width Kina lacks), or None."""
    low = name.lower()
    if low in _ALIASES:
        return _ALIASES[low]
    if low in _KINA.split():
        return low  # F32, I32, BF16
    return "" if _WIDTH.fullmatch(low) else None


def dtype_lookalikes(file: str, sig: ast.Signature) -> list[Diagnostic]:
    """K0304 once per dtype variable of ``sig`` named like a dtype, at its first type."""
    types = [p.type for p in sig.params if p.type is not None] + [sig.ret]
    out: list[Diagnostic] = []
    seen: set[str] = set()
    for t in types:
        name = t.dtype
        if name in seen or not is_dtype_var(name):
            continue
        seen.add(name)
        meant = lookalike(name)
        if meant is None:
            continue
        guess = f"the dtype {meant}" if meant else "a Kina dtype"
        help = (
            f"write `{meant}` for the dtype" if meant else f"Kina's dtypes are {_KINA}"
        ) + "; name a dtype variable that you mean as one like `T`"
        out.append(
            warning(
                "K0304",
                f"`{name}` is a dtype variable here, not {guess}",
                at(file, sig.name, t.nid, f"`{name}` is any float dtype a call gives"),
                notes=(
                    f"any symbol but {_KINA} names a dtype variable (spec section 3), "
                    "which ranges over the float dtypes",
                ),
                help=help,
            )
        )
    return out
