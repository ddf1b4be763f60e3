"""What to suggest for a name the checker cannot resolve (K0202's help).

Why: "unknown function `rms-norm`" with "define it or import the file that defines it" left a
new user to guess that the prelude must be imported by *this* file (imports are not
transitive), and ``(cat [x y] :axis 0)``, ``(permute x …)``, ``(- a b)`` (PyTorch and numpy
spellings) got no hint at all unless the spelling happened to be close to a Kina name. In
order: a defn of the prelude (``kinac/std/*.kina``) with the import to add; the Kina primitive
or prelude defn for a PyTorch/numpy name; the nearest visible name.

The prelude's names are read from the shipped ``.kina`` files once per process: they change
with kinac itself, and only the text of a help depends on them.
"""

from __future__ import annotations

import difflib
import re
from functools import cache
from pathlib import Path

_STD = Path(__file__).resolve().parent.parent / "std"

# PyTorch / numpy / math spellings -> the Kina primitive or prelude defn
ALIASES: dict[str, str] = {
    "-": "sub",
    "+": "add",
    "*": "mul",
    "/": "div",
    "@": "matmul",
    "mm": "matmul",
    "bmm": "matmul",
    "dot": "matmul",
    "einsum": "matmul",
    "cat": "concat",
    "concatenate": "concat",
    "stack": "concat",
    "permute": "transpose",
    "swapaxes": "transpose",
    "view": "reshape",
    "flatten": "reshape",
    "unsqueeze": "reshape",
    "squeeze": "reshape",
    "expand": "broadcast-to",
    "broadcast_to": "broadcast-to",
    "repeat_interleave": "repeat-interleave",
    "arange": "iota",
    "zeros": "full",
    "ones": "full",
    "fill": "full",
    "full_like": "full",
    "maximum": "max",
    "minimum": "min",
    "amax": "max",
    "amin": "min",
    "reciprocal": "recip",
    "negative": "neg",
    "power": "pow",
    "type": "cast",
    "astype": "cast",
    "to": "cast",
    "index_select": "gather",
    "take": "gather",
    "select": "where",
    "layer_norm": "layer-norm",
    "layernorm": "layer-norm",
    "rms_norm": "rms-norm",
    "rmsnorm": "rms-norm",
    "equal": "eq",
    "less": "lt",
    "greater": "gt",
}


# names Kina has no primitive for: how to write them
MISSING: dict[str, str] = {
    "argmax": "Kina has no argmax; the first maximum's index along axis 1 of x : [N M] is "
    "(min (where (eq x (max x :axis 1 :keepdims true)) (iota i32 [N M] :axis 1) M) :axis 1)",
    "argmin": "Kina has no argmin; the first minimum's index along axis 1 of x : [N M] is "
    "(min (where (eq x (min x :axis 1 :keepdims true)) (iota i32 [N M] :axis 1) M) :axis 1)",
    "clamp": "write (min (max x lo) hi)",
    "clip": "write (min (max x lo) hi)",
    "var": "write (mean (square (sub x (mean x :axis a :keepdims true))) :axis a)",
    "std": "write (sqrt (mean (square (sub x (mean x :axis a :keepdims true))) :axis a))",
    "log_softmax": "write it stably: (sub x (add m (log (sum (exp (sub x m)) :axis -1 "
    ":keepdims true)))) with m = (max x :axis -1 :keepdims true)",
    "logsumexp": "write (add m (log (sum (exp (sub x m)) :axis a :keepdims true))) with "
    "m = (max x :axis a :keepdims true)",
    "ne": "write (eq (eq a b) 0): `eq` of a bool with the literal 0 negates it",
    "not": "write (eq c 0) for a bool c",
}


@cache
def prelude_defns() -> dict[str, str]:
    """Each prelude defn's name -> the import path of its file (``"std/nn.kina"``)."""
    out: dict[str, str] = {}
    for f in sorted(_STD.glob("*.kina")):
        for m in re.finditer(r"^\(defn\s+([^\s\[\]()]+)", f.read_text(encoding="utf-8"), re.M):
            out.setdefault(m.group(1), f"std/{f.name}")
    return out


def unknown_function(name: str, candidates: list[str]) -> str | None:
    """The help for a call of an unknown ``name`` (``candidates``: primitives and the defns
    the file sees)."""
    std = prelude_defns().get(name)
    if std is not None:
        return (
            f'`{name}` is defined in the prelude: add (import "{std}") to this file '
            "(imports are not transitive: a file sees its own imports only)"
        )
    if name in MISSING:
        return MISSING[name]
    meant = ALIASES.get(name) or ALIASES.get(name.lower())
    if meant is not None:
        where = prelude_defns().get(meant)
        how = f' (a prelude defn: (import "{where}"))' if where else ""
        return f"Kina spells it `{meant}`{how}"
    return nearest(name, candidates)


def unknown_name(name: str, candidates: list[str]) -> str | None:
    """The help for an unknown variable ``name`` (``candidates``: what is in scope)."""
    if name in ("true", "false", "True", "False"):
        one = name.lower() == "true"
        return (
            f"write the literal {int(one)} for {name.lower()} (a literal meeting a bool tensor is "
            "a bool); `true`/`false` are only keyword values, as in `:keepdims true`"
        )
    return nearest(name, candidates)


def nearest(name: str, cands: list[str]) -> str | None:
    """ "did you mean `x`?" for the closest candidate, if any is close."""
    m = difflib.get_close_matches(name, sorted(set(cands)), n=1, cutoff=0.6)
    return f"did you mean `{m[0]}`?" if m else None
