"""Dimension algebra: canonical polynomials over dimension variables, relations and formulas.

Why: most shape obligations (``B*S*D = B*S*H*Dh`` under ``D = H*Dh``) are decided by putting both
sides in one canonical form, which costs microseconds; only what normalisation cannot close is
handed to Z3 (``solver.py``), as a canonical, alpha-renamed :class:`Formula` the rule engine can
cache across files.

A :class:`Poly` is a sum of integer-weighted monomials over *atoms*: a variable name, or a
:class:`Div` (an exact quotient ``num/den`` that is not itself a polynomial; its divisibility is
an obligation where it is written and an assumption where it is declared). Terms are kept
sorted, so equal polynomials are equal values (and have equal fingerprints).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from math import gcd

from kinac.rules.codec import record


class DimEvalError(ValueError):
    """A dim expression has no value at concrete dims (inexact division, unbound variable)."""


@record
class Div:
    """The exact quotient ``num / den`` kept as an atom; ``key`` is its canonical text."""

    num: Poly
    den: Poly
    key: str


@record
class Poly:
    """A canonical polynomial: ``terms`` are ``(monomial, coeff)`` with non-zero coeffs.

    A monomial is a tuple of ``(atom, exponent)`` sorted by atom; the constant term has the
    empty monomial and comes last.
    """

    terms: tuple[tuple[tuple[tuple[str | Div, int], ...], int], ...]


Atom = str | Div
Mono = tuple[tuple[Atom, int], ...]

ZERO = Poly(())


def _akey(a: Atom) -> tuple[int, str]:
    return (0, a) if isinstance(a, str) else (1, a.key)


def _mkey(m: Mono) -> tuple[int, tuple[tuple[tuple[int, str], int], ...]]:
    return (-sum(e for _, e in m), tuple((_akey(a), e) for a, e in m))


def _freeze(d: Mapping[Mono, int]) -> Poly:
    items = [(m, c) for m, c in d.items() if c != 0]
    items.sort(key=lambda mc: _mkey(mc[0]))
    return Poly(tuple(items))


def const(k: int) -> Poly:
    """The constant polynomial ``k``."""
    return Poly((((), k),)) if k else ZERO


def var(name: str) -> Poly:
    """The polynomial made of the variable ``name``."""
    return Poly(((((name, 1),), 1),))


def as_const(p: Poly) -> int | None:
    """The value of a constant polynomial, else None."""
    if not p.terms:
        return 0
    if len(p.terms) == 1 and p.terms[0][0] == ():
        return p.terms[0][1]
    return None


def as_var(p: Poly) -> str | None:
    """The name if ``p`` is exactly one variable, else None."""
    if len(p.terms) == 1:
        m, c = p.terms[0]
        if c == 1 and len(m) == 1 and m[0][1] == 1 and isinstance(m[0][0], str):
            return m[0][0]
    return None


def _mono_mul(a: Mono, b: Mono) -> Mono:
    if not a:
        return b
    if not b:
        return a
    d: dict[Atom, int] = dict(a)
    for x, e in b:
        d[x] = d.get(x, 0) + e
    return tuple(sorted(d.items(), key=lambda ae: _akey(ae[0])))


def add(*ps: Poly) -> Poly:
    """Sum of polynomials."""
    d: dict[Mono, int] = {}
    for p in ps:
        for m, c in p.terms:
            d[m] = d.get(m, 0) + c
    return _freeze(d)


def neg(p: Poly) -> Poly:
    """``-p``."""
    return Poly(tuple((m, -c) for m, c in p.terms))


def sub(a: Poly, b: Poly) -> Poly:
    """``a - b``."""
    return add(a, neg(b))


def scale(p: Poly, k: int) -> Poly:
    """``k * p``."""
    return Poly(tuple((m, c * k) for m, c in p.terms)) if k else ZERO


def mul(*ps: Poly) -> Poly:
    """Product of polynomials."""
    acc: dict[Mono, int] = {(): 1}
    for p in ps:
        nxt: dict[Mono, int] = {}
        for m1, c1 in acc.items():
            for m2, c2 in p.terms:
                m = _mono_mul(m1, m2)
                nxt[m] = nxt.get(m, 0) + c1 * c2
        acc = nxt
    return _freeze(acc)


def content(p: Poly) -> int:
    """Gcd of the coefficients (0 for the zero polynomial)."""
    g = 0
    for _, c in p.terms:
        g = gcd(g, c)
    return g


def _mono_div(m: Mono, d: Mono) -> Mono | None:
    md = dict(m)
    for x, e in d:
        if md.get(x, 0) < e:
            return None
        md[x] -= e
    return tuple(sorted(((x, e) for x, e in md.items() if e), key=lambda ae: _akey(ae[0])))


def exact_div(a: Poly, b: Poly) -> Poly | None:
    """``a / b`` if ``b`` divides ``a`` as polynomials over the integers, else None."""
    if not b.terms:
        return None
    if not a.terms:
        return ZERO
    k = as_const(b)
    if k is not None:
        if all(c % k == 0 for _, c in a.terms):
            return Poly(tuple((m, c // k) for m, c in a.terms))
        return None
    order = sorted({x for m, _ in (*a.terms, *b.terms) for x, _e in m}, key=_akey)

    def lead_key(m: Mono) -> tuple[int, tuple[int, ...]]:  # graded lex: a monomial order
        d = dict(m)
        return (sum(d.values()), tuple(d.get(x, 0) for x in order))

    bl_m, bl_c = max(b.terms, key=lambda mc: lead_key(mc[0]))
    rem: dict[Mono, int] = dict(a.terms)
    quo: dict[Mono, int] = {}
    for _ in range(8 * len(a.terms) + 64):
        if not rem:
            return _freeze(quo)
        lm = max(rem, key=lead_key)
        lc = rem[lm]
        qm = _mono_div(lm, bl_m)
        if qm is None or lc % bl_c:
            return None
        qc = lc // bl_c
        quo[qm] = quo.get(qm, 0) + qc
        for m, c in b.terms:
            mm = _mono_mul(qm, m)
            v = rem.get(mm, 0) - qc * c
            if v:
                rem[mm] = v
            else:
                rem.pop(mm, None)
    return None


def div(a: Poly, b: Poly) -> Poly:
    """``a / b``: a polynomial when the division is exact, else a :class:`Div` atom."""
    q = exact_div(a, b)
    if q is not None:
        return q
    g = gcd(content(a), content(b))
    if g > 1:
        a, b = scale_down(a, g), scale_down(b, g)
    key = fmt_quot(a, b)
    return Poly(((((Div(a, b, key), 1),), 1),))


def clear_divs(p: Poly) -> Poly:
    """``p`` with every term ``k * (n/d) * rest`` whose ``k * rest`` is a multiple of ``d``
    rewritten to ``(k * rest / d) * n``: an exact quotient times its divisor is its dividend.

    Why: ``S*KV*(D/KV) = S*D`` (a reshape through ``D/KV``) then closes by normal forms alone
    instead of going to the solver as a nonlinear equality.
    """
    if not any(isinstance(a, Div) for m, _ in p.terms for a, _e in m):
        return p
    parts: list[Poly] = []
    changed = False
    for m, c in p.terms:
        term = Poly(((m, c),))
        for i, (a, e) in enumerate(m):
            if not isinstance(a, Div):
                continue
            rest_m = m[:i] + (((a, e - 1),) if e > 1 else ()) + m[i + 1 :]
            q = exact_div(Poly(((rest_m, c),)), a.den)
            if q is not None:
                term = mul(q, a.num)
                changed = True
                break
        parts.append(term)
    out = add(*parts)
    return clear_divs(out) if changed else out


def scale_down(p: Poly, k: int) -> Poly:
    """``p / k`` for a ``k`` that divides every coefficient."""
    return Poly(tuple((m, c // k) for m, c in p.terms))


def variables(p: Poly) -> frozenset[str]:
    """All variable names of ``p``, those inside divisions included."""
    out: set[str] = set()
    for m, _ in p.terms:
        for a, _e in m:
            if isinstance(a, str):
                out.add(a)
            else:
                out |= variables(a.num) | variables(a.den)
    return frozenset(out)


def divs(p: Poly) -> list[Div]:
    """The division atoms of ``p`` (innermost first)."""
    out: list[Div] = []
    for m, _ in p.terms:
        for a, _e in m:
            if isinstance(a, Div):
                out.extend(divs(a.num))
                out.extend(divs(a.den))
                if a not in out:
                    out.append(a)
    return out


def _pow(p: Poly, e: int) -> Poly:
    return mul(*([p] * e)) if e > 1 else p


def subst(p: Poly, s: Mapping[str, Poly]) -> Poly:
    """Replace variables by polynomials (divisions are re-normalised, so may become exact)."""
    if not s:
        return p
    parts: list[Poly] = []
    for m, c in p.terms:
        factors: list[Poly] = [const(c)]
        for a, e in m:
            if isinstance(a, str):
                f = s.get(a)
                factors.append(_pow(f, e) if f is not None else Poly(((((a, e),), 1),)))
            else:
                factors.append(_pow(div(subst(a.num, s), subst(a.den, s)), e))
        parts.append(mul(*factors))
    return add(*parts)


def evaluate(p: Poly, env: Mapping[str, int]) -> int:
    """The integer value of ``p`` at concrete dims; raises :class:`DimEvalError`."""
    total = 0
    for m, c in p.terms:
        v = c
        for a, e in m:
            if isinstance(a, str):
                if a not in env:
                    raise DimEvalError(f"dimension `{a}` has no value")
                x = env[a]
            else:
                n, d = evaluate(a.num, env), evaluate(a.den, env)
                if d == 0 or n % d:
                    raise DimEvalError(
                        f"{fmt_infix(a.num)} = {n} is not divisible by {fmt_infix(a.den)} = {d}"
                    )
                x = n // d
            v *= x**e
        total += v
    return total


def linear_in(p: Poly, x: str) -> tuple[Poly, Poly] | None:
    """``(A, R)`` with ``p = A*x + R`` and neither mentioning ``x``; None if not linear in x."""
    a: dict[Mono, int] = {}
    r: dict[Mono, int] = {}
    for m, c in p.terms:
        e = 0
        rest: list[tuple[Atom, int]] = []
        for at, k in m:
            if at == x:
                e = k
            else:
                if isinstance(at, Div) and x in (variables(at.num) | variables(at.den)):
                    return None
                rest.append((at, k))
        if e > 1:
            return None
        tgt = a if e == 1 else r
        tgt[tuple(rest)] = tgt.get(tuple(rest), 0) + c
    if not a:
        return None
    return _freeze(a), _freeze(r)


def lower_bound(p: Poly) -> int | None:
    """A lower bound of ``p`` over atoms >= 1 when every non-constant coefficient is >= 0."""
    lb = 0
    for m, c in p.terms:
        if m and c < 0:
            return None
        lb += c
    return lb


def poly_prod(ps: Iterable[Poly]) -> Poly:
    """Product of an iterable of polynomials (1 when empty)."""
    return mul(*ps)


def map_divs(p: Poly, f: Callable[[Div], Poly | None]) -> Poly:
    """Replace each division atom ``a`` for which ``f(a)`` is a polynomial by that polynomial."""
    if not any(isinstance(a, Div) for m, _ in p.terms for a, _e in m):
        return p
    parts: list[Poly] = []
    for m, c in p.terms:
        factors: list[Poly] = [const(c)]
        for a, e in m:
            r = f(a) if isinstance(a, Div) else None
            factors.append(_pow(r, e) if r is not None else Poly(((((a, e),), 1),)))
        parts.append(mul(*factors))
    return add(*parts)


# Printing lives in ``dimtext`` (kept apart for size); re-exported so callers keep writing
# ``D.fmt_infix``. Imported last: ``dimtext`` uses the algebra above.
from kinac.check import dimtext as _text  # noqa: E402

fmt_infix = _text.fmt_infix
fmt_kina = _text.fmt_kina
fmt_kina_rel = _text.fmt_kina_rel
fmt_quot = _text.fmt_quot
