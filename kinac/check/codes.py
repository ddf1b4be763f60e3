"""Stable diagnostic codes of the checker and a small builder.

Why: codes are part of the user interface (``kinac explain CODE`` prints
``kinac/diag/explain/CODE.md``); keeping them in one table makes them easy to audit and keeps
the test that every code has a page honest. The reader owns K01xx, the pipeline K0201 (a
name defined twice in one module).
"""

from __future__ import annotations

from kinac.diag.model import Diagnostic, Label, NodeRef

CODES: dict[str, str] = {
    "K0202": "unknown name",
    "K0203": "wrong number of arguments",
    "K0204": "recursion",
    "K0205": "name defined twice in a signature",
    "K0206": "bad keyword argument",
    "K0207": "malformed static argument",
    "K0208": "not a tensor value",
    "K0209": "a defn is named like a primitive",
    "K0301": "undetermined dimension variable",
    "K0302": "unknown dimension variable",
    "K0303": "malformed type",
    "K0401": "shapes do not broadcast",
    "K0402": "rank mismatch",
    "K0403": "matmul contraction mismatch",
    "K0404": "reshape changes the number of elements",
    "K0405": "invalid axis or permutation",
    "K0406": "slice out of bounds",
    "K0407": "concat shapes disagree",
    "K0408": "argument does not match its parameter",
    "K0409": "where clause not satisfied at a call",
    "K0410": "division is not exact",
    "K0411": "type does not match the declared type",
    "K0412": "gather operand shapes",
    "K0413": "a sharded dim is not divisible by its mesh",
    "K0414": "the where clauses contradict each other",
    "K0501": "obligation could not be decided",
    "K0601": "dtype mismatch",
    "K0602": "dtype not allowed here",
    "K0603": "float literal meets an integer tensor",
    "K0604": "a literal does not fit its dtype",
    "K0605": "a dimension used as a value may not fit its dtype",
    "K0701": "placements mixed in one primitive",
    "K0702": "bad annotation",
    "K0801": "argument does not match the entry signature",
    "K0802": "bad concrete dimensions",
    "K0803": "placements mixed at specialisation",
    "K0804": "a deferred shape check fails at these dims",
    "K0806": "a tensor is too large",
    "K0502": "undecided obligation deferred to a runtime check",
}


def at(file: str, defn: str, nid: int, message: str = "") -> Label:
    """A label on node ``nid`` of ``defn``."""
    return Label(NodeRef(file, defn, nid), message)


def error(
    code: str,
    message: str,
    primary: Label,
    secondary: tuple[Label, ...] = (),
    notes: tuple[str, ...] = (),
    help: str | None = None,
    counterexample: tuple[tuple[str, int], ...] | None = None,
) -> Diagnostic:
    """An error diagnostic with a known code."""
    assert code in CODES, code
    return Diagnostic(code, "error", message, primary, secondary, notes, help, counterexample)


def warning(
    code: str,
    message: str,
    primary: Label,
    secondary: tuple[Label, ...] = (),
    notes: tuple[str, ...] = (),
    help: str | None = None,
) -> Diagnostic:
    """A warning diagnostic with a known code."""
    assert code in CODES, code
    return Diagnostic(code, "warning", message, primary, secondary, notes, help)
