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
    "K0304": "a dtype variable named like a dtype",
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


# The help a diagnostic of each code carries when its site has nothing more specific to say:
# every diagnostic a user sees ends with what to do (or where to read more).
DEFAULT_HELP: dict[str, str] = {
    "K0202": "define it (a parameter, a `let` binding, a defn) or import the file that defines it",
    "K0203": "pass the arguments the usage shows: `kinac explain K0203`",
    "K0204": "break the cycle: a defn may not call itself, directly or through others",
    "K0205": "rename one of the two",
    "K0206": "see the primitive's keywords in spec section 5 (`kinac explain K0206`)",
    "K0207": "static arguments are literal integers, dims, shapes `[DIM …]`, dtypes, "
    "`true`/`false` and placements, written in the source (`kinac explain K0207`)",
    "K0208": "pass a tensor or a numeric literal",
    "K0209": "rename the defn: primitives win over defns of the same name",
    "K0301": "use the variable as a dim of a parameter, make it a `(V : dim)` parameter, or fix "
    "it by a where equality",
    "K0302": "dims, groups and dtype variables of a body must appear in the defn's signature",
    "K0303": "a type is (tensor DTYPE [DIM …] ANNOTATION …), a variadic group only leading",
    "K0304": "write one of f64 f32 f16 bf16 i64 i32 bool for a dtype; name dtype variables "
    "like `T`",
    "K0401": "make the dims equal (reshape/broadcast-to), or give one a literal 1 there",
    "K0402": "make the ranks agree: reshape adds or drops axes, (full DT [DIM …] v) makes a "
    "tensor of a scalar; variadic groups meet only the same group",
    "K0403": "transpose or reshape one operand so that the contracted dims agree",
    "K0404": "the product of the target dims must equal the product of the source dims",
    "K0405": "axes count from 0, or from -1 at the end; a permutation lists each axis once",
    "K0406": "keep 0 <= start < stop <= the dim, or assume it in a `where` clause",
    "K0407": "the tensors must agree on every dim but the axis they are joined along: "
    "slice, reshape or broadcast-to one of them",
    "K0408": "pass an argument of the parameter's type, or assume the relation in a `where` "
    "clause of this defn",
    "K0409": "pass dims that satisfy the callee's `where` clause, or assume it in this defn",
    "K0410": "state the divisibility in a `where` clause: (where (divides b a))",
    "K0411": "make the expression match the declared type (reshape, transpose, broadcast-to or "
    "slice a shape; cast a dtype; to-device a placement), or correct the declared type",
    "K0412": "`gather` takes a table [V D] and integer indices [..b]",
    "K0413": "shard a dim the mesh's size divides, or assume it: (where (divides SIZE DIM))",
    "K0414": "correct or remove one of the marked clauses",
    "K0501": "add a `where` clause that states it, or simplify the dim expression",
    "K0502": "add a `where` clause that states it to have it proved once for all dims",
    "K0601": "dtypes never promote implicitly: (cast … :to DT)",
    "K0602": "cast to a dtype the primitive accepts: (cast … :to f32)",
    "K0603": "write an integer literal, or cast the tensor to a float dtype",
    "K0604": "use a literal the dtype can hold, or cast to a wider dtype",
    "K0605": "bound the dim in a `where` clause, or cast to a wider dtype",
    "K0701": "move one operand with (to-device x @cuda(N)) or (to-host x)",
    "K0702": "annotations are @cpu, @cuda(N), @replicated, @sharded(axis=I, mesh=M) and "
    "@partial(sum, mesh=M), naming a declared mesh",
    "K0801": "pass arrays that fit the parameters' types (shapes, dtypes, devices) and the "
    "defn's `where` clauses",
    "K0802": "give dims that satisfy the defn's `where` clauses and exact divisions",
    "K0803": "keep every tensor of the entry on the target's devices; move with to-device",
    "K0804": "use dims that satisfy the check, or state it in a `where` clause to have it "
    "proved for all dims",
    "K0806": "use smaller dims: a tensor must stay below 2^62 bytes and 64 axes",
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
    help = help or DEFAULT_HELP.get(code)
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
    help = help or DEFAULT_HELP.get(code)
    return Diagnostic(code, "warning", message, primary, secondary, notes, help)
