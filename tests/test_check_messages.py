"""Dims and relations in diagnostics read as a user writes them (issue 15, smaller things):
types in Kina syntax (a difference is ``(- (* 2 N) 1)``, not ``(+ (* 2 N) (- 1))``), a
suggested ``where`` clause that is valid source, quotients never ambiguous (``(N/2)*N``), and
an explanation that does not repeat values a side already states."""

from __future__ import annotations

from kinac.check import dims as D
from kinac.check.formula import Rel
from kinac.check.oblig import explain
from kinac.check.types import SShape, SType, fmt_type

N, M, J, K = (D.var(n) for n in ("N", "M", "J", "K"))
ONE = D.const(1)


def test_differences_print_as_kina() -> None:
    assert D.fmt_kina(D.sub(D.scale(N, 2), ONE)) == "(- (* 2 N) 1)"
    assert D.fmt_kina(D.sub(D.add(N, M), D.const(3))) == "(- (+ M N) 3)"
    assert D.fmt_kina(D.sub(N, D.mul(M, M))) == "(- N (* M M))"
    assert D.fmt_kina(D.add(D.scale(N, 2), ONE)) == "(+ (* 2 N) 1)"
    t = SType("f32", SShape(None, (D.sub(D.scale(N, 2), ONE), N)))
    assert fmt_type(t) == "(tensor f32 [(- (* 2 N) 1) N])"


def test_suggested_where_clauses_are_valid_source() -> None:
    assert D.fmt_kina_rel("le", ONE, D.sub(N, M)) == "(<= (+ M 1) N)"
    assert D.fmt_kina_rel("lt", N, M) == "(< N M)"
    assert D.fmt_kina_rel("eq", N, D.sub(M, ONE)) == "(= (+ N 1) M)"
    assert D.fmt_kina_rel("dvd", D.const(2), N) == "(divides 2 N)"


def test_quotients_are_grouped() -> None:
    half = D.div(N, D.const(2))
    assert D.fmt_infix(half) == "N/2"
    assert D.fmt_infix(D.mul(half, N)) == "N*(N/2)"
    assert D.fmt_infix(D.scale(half, 2)) == "2*(N/2)"
    assert D.fmt_infix(D.div(N, D.scale(N, 2))) == "N/(2*N)"
    assert D.fmt_quot(D.scale(N, 2), D.scale(M, 2)) == "(2*N)/(2*M)"
    assert D.fmt_infix(D.sub(N, M)) == "N - M"


def test_explanations_do_not_repeat_themselves() -> None:
    assert explain(Rel("eq", K, J), {"K": 2, "J": 1}) == "K = 2 but J = 1"
    assert explain(Rel("eq", D.scale(K, 2), J), {"K": 2, "J": 1}) == "2*K = 4 but J = 1 with K = 2"
    assert explain(Rel("le", D.const(8), N), {"N": 4}) == "8 exceeds N = 4"
