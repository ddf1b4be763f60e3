"""Printing dims: infix text for messages (``2*E + 1``, ``(N/2)*N``) and Kina syntax for types
and suggested ``where`` clauses (``(- (* 2 N) 1)``, ``(<= (+ M 1) N)``).

Why apart from ``dims``: the algebra and its rendering change for different reasons (issue 15
asked for dims printed as a user writes them); ``dims`` re-exports these names.
"""

from __future__ import annotations

from kinac.check.dims import Atom, Mono, Poly, as_const, as_var, neg, sub


def _fmt_atom_infix(a: Atom, alone: bool) -> str:
    if isinstance(a, str):
        return a
    return a.key if alone else f"({a.key})"  # (N/2)*N, never N/2*N


def fmt_infix(p: Poly) -> str:
    """``2*E + 1``, ``H*Dh``, ``D/H``, ``(N/2)*N``: for messages. A quotient that is one
    factor among others is parenthesised, so the grouping is never ambiguous."""
    if not p.terms:
        return "0"
    out = ""
    terms = [t for t in p.terms if t[1] > 0] + [t for t in p.terms if t[1] < 0]  # N - M
    for i, (m, c) in enumerate(terms):
        alone = len(m) == 1 and m[0][1] == 1 and abs(c) == 1
        body = "*".join(_fmt_atom_infix(a, alone) + (f"^{e}" if e > 1 else "") for a, e in m)
        ac = abs(c)
        t = body if ac == 1 and body else (f"{ac}*{body}" if body else str(ac))
        if i == 0:
            out = ("-" if c < 0 else "") + t
        else:
            out += (" - " if c < 0 else " + ") + t
    return out


def _paren(p: Poly) -> str:
    t = fmt_infix(p)
    return t if as_var(p) is not None or as_const(p) is not None else f"({t})"


def fmt_quot(a: Poly, b: Poly) -> str:
    """``a/b`` with parentheses only around compound sides: ``D/H``, ``(N - 1)/2``."""
    return f"{_paren(a)}/{_paren(b)}"


def _fmt_atom_kina(a: Atom) -> str:
    return a if isinstance(a, str) else f"(/ {fmt_kina(a.num)} {fmt_kina(a.den)})"


def _kina_term(m: Mono, c: int) -> str:
    fs = [_fmt_atom_kina(a) for a, e in m for _ in range(e)]
    if c != 1 or not fs:
        fs.insert(0, str(c))
    return fs[0] if len(fs) == 1 else "(* " + " ".join(fs) + ")"


def _kina_sum(ts: list[str]) -> str:
    return ts[0] if len(ts) == 1 else "(+ " + " ".join(ts) + ")"


def fmt_kina(p: Poly) -> str:
    """Kina syntax, as a user writes it: ``(* H Dh)``, ``(+ (* 2 E) 1)``; a difference prints
    as ``(- (* 2 N) 1)`` (positive terms first), never as a sum of negated terms."""
    if not p.terms:
        return "0"
    pos = [_kina_term(m, c) for m, c in p.terms if c > 0]
    neg = [_kina_term(m, -c) for m, c in p.terms if c < 0]
    if not neg:
        return _kina_sum(pos)
    if not pos:
        return f"(- {_kina_sum(neg)})"
    return "(- " + _kina_sum(pos) + " " + " ".join(neg) + ")"


def fmt_kina_rel(op: str, lhs: Poly, rhs: Poly) -> str:
    """A relation as a user writes it in a ``where`` clause: ``(<= (+ M 1) N)`` rather than
    ``(<= 1 (- N M))``. Dims in source have no subtraction, so an (in)equality is rebalanced
    to put every term on the side where it is positive; divisibility prints as it is."""
    head = {"eq": "=", "le": "<=", "lt": "<", "dvd": "divides"}[op]
    if op != "dvd":
        diff = sub(rhs, lhs)
        big = Poly(tuple((m, c) for m, c in diff.terms if c > 0))
        small = neg(Poly(tuple((m, c) for m, c in diff.terms if c < 0)))
        if op == "eq" and not small.terms:
            big, small = small, big
        lhs, rhs = small, big
    return f"({head} {fmt_kina(lhs)} {fmt_kina(rhs)})"
