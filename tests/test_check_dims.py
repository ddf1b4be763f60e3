"""The dimension algebra, canonical formulas, the Z3 back end and concrete binding."""

from __future__ import annotations

import pytest
from check_support import Workspace, ws_sources
from hypothesis import given, settings
from hypothesis import strategies as st

from kinac.check import bind_call_types, solve_formula
from kinac.check import dims as D
from kinac.check.bind import CallBinding
from kinac.check.formula import Facts, Rel, canon_rel, decide_cheap, holds, make_formula
from kinac.rules.codec import decode, encode
from kinac.tir.graph import TType

A, B, C, H, Dh = (D.var(n) for n in ("A", "B", "C", "H", "Dh"))


def test_canonical_forms() -> None:
    assert D.mul(D.add(A, B), D.add(A, B)) == D.add(
        D.mul(A, A), D.scale(D.mul(A, B), 2), D.mul(B, B)
    )
    assert D.sub(D.add(A, B), B) == A and D.sub(A, A) == D.ZERO
    assert D.exact_div(D.mul(H, Dh), H) == Dh
    assert D.exact_div(D.add(D.mul(A, B), A), D.add(B, D.const(1))) == A
    assert D.exact_div(A, H) is None
    q = D.div(A, H)
    assert D.as_var(q) is None and D.fmt_infix(q) == "A/H"
    assert D.subst(q, {"A": D.mul(H, Dh)}) == Dh  # a division becomes exact
    assert D.evaluate(q, {"A": 12, "H": 4}) == 3
    with pytest.raises(D.DimEvalError):
        D.evaluate(q, {"A": 10, "H": 4})
    assert D.fmt_kina(D.mul(D.const(2), A)) == "(* 2 A)"
    assert D.linear_in(D.sub(A, D.mul(H, Dh)), "Dh") == (D.neg(H), A)
    assert D.linear_in(D.mul(Dh, Dh), "Dh") is None
    assert decode(encode(q)) == q


_atoms = st.sampled_from(["A", "B", "C"])


@st.composite
def polys(draw: st.DrawFn, depth: int = 2) -> D.Poly:
    if depth == 0 or draw(st.booleans()):
        return D.var(draw(_atoms)) if draw(st.booleans()) else D.const(draw(st.integers(-3, 5)))
    a, b = draw(polys(depth - 1)), draw(polys(depth - 1))
    return draw(st.sampled_from([D.add(a, b), D.mul(a, b), D.sub(a, b)]))


@settings(max_examples=200, deadline=None)
@given(p=polys(), q=polys(), a=st.integers(1, 9), b=st.integers(1, 9), c=st.integers(1, 9))
def test_algebra_agrees_with_integers(p: D.Poly, q: D.Poly, a: int, b: int, c: int) -> None:
    env = {"A": a, "B": b, "C": c}
    ev = D.evaluate
    assert ev(D.add(p, q), env) == ev(p, env) + ev(q, env)
    assert ev(D.mul(p, q), env) == ev(p, env) * ev(q, env)
    s = D.subst(p, {"A": D.add(B, C)})
    assert ev(s, env) == ev(p, {**env, "A": b + c})
    r = D.exact_div(D.mul(p, q), q)
    if q != D.ZERO:
        assert r is not None and ev(r, env) == ev(p, env)


def test_facts_and_cheap_decisions() -> None:
    f = Facts(
        [Rel("eq", D.var("D"), D.mul(H, Dh)), Rel("eq", H, D.mul(A, B)), Rel("le", A, D.const(8))]
    )
    assert f.normal(D.var("D")) == D.mul(A, B, Dh)
    assert f.residual == (Rel("le", A, D.const(8)),)
    assert decide_cheap(canon_rel(Rel("eq", f.normal(D.var("D")), D.mul(H, Dh)))) is None
    assert decide_cheap(canon_rel(Rel("eq", f.normal(D.var("D")), f.normal(D.mul(H, Dh)))))
    assert decide_cheap(canon_rel(Rel("lt", A, D.add(A, B)))) is True
    assert decide_cheap(canon_rel(Rel("le", D.const(1), D.sub(A, B)))) is None
    assert decide_cheap(canon_rel(Rel("dvd", D.const(2), D.scale(A, 4)))) is True
    assert decide_cheap(canon_rel(Rel("eq", D.const(3), D.const(5)))) is False


def test_formulas_are_alpha_canonical() -> None:
    f1, back1 = make_formula(Rel("eq", D.mul(A, B), C), [Rel("le", A, D.const(4))])
    f2, back2 = make_formula(
        Rel("eq", D.mul(D.var("X"), D.var("Y")), D.var("Z")), [Rel("le", D.var("X"), D.const(4))]
    )
    assert f1 == f2 and back1 != back2
    # tied variables are tried in every order: the names never matter
    x, y, z = D.var("Z"), D.var("Y"), D.var("X")
    f4, _ = make_formula(Rel("eq", D.add(A, B), C), [Rel("le", A, B)])
    f5, _ = make_formula(Rel("eq", D.add(x, y), z), [Rel("le", x, y)])
    f6, _ = make_formula(Rel("eq", D.add(y, x), z), [Rel("le", y, x)])
    assert f4 == f5 == f6
    # an assumption that shares no variable with the goal is left out
    f3, _ = make_formula(Rel("eq", D.mul(A, B), C), [Rel("le", A, D.const(4)), Rel("lt", H, Dh)])
    assert f3 == f1


def test_solver_outcomes() -> None:
    f, back = make_formula(Rel("eq", D.mul(H, Dh), D.var("D")), [])
    r = solve_formula(f, 10_000)
    assert r.status == "refuted"
    env = {back[k]: v for k, v in r.model}
    assert not holds(Rel("eq", D.mul(H, Dh), D.var("D")), env) and sum(env.values()) == 4
    f, _ = make_formula(Rel("dvd", H, D.var("D")), [Rel("eq", D.var("D"), D.mul(H, Dh))])
    assert solve_formula(f, 10_000).status == "proved"
    f, back = make_formula(Rel("lt", A, D.const(5)), [Rel("le", D.const(3), A)])
    r = solve_formula(f, 10_000)
    assert r.status == "refuted" and dict(r.model)[next(iter(back))] == 5
    f, _ = make_formula(Rel("eq", A, D.const(1)), [Rel("eq", D.mul(A, A), D.mul(D.const(2), B, B))])
    r = solve_formula(f, 20)
    assert r.status == "unknown" and "budget" in r.reason


def test_solver_results_shared_across_files() -> None:
    body = """(defn {n} [(x : (tensor f32 [{a} {b}])) (y : (tensor f32 [{b} {a}]))]
  -> (tensor f32 [{a} {b}]) (add x y))
"""
    ws = Workspace(
        {"one.kina": body.format(n="f", a="A", b="B"), "two.kina": body.format(n="g", a="M", b="N")}
    )
    c1 = ws.env.check_file("one.kina")[0]
    calls = ws.env.solver_calls
    c2 = ws.env.check_file("two.kina")[0]
    assert not c1.ok and not c2.ok and calls >= 1
    assert ws.env.solver_calls == calls  # the same residues, renamed: solved once


def test_bind_call_types() -> None:
    ws = Workspace(ws_sources("transformer"))
    sig = ws.env.lookup("attention.kina", "attention")[1]  # type: ignore[index]
    good = (
        TType("f32", (2, 8, 32)),
        TType("f32", (32, 32)),
        TType("f32", (32, 16)),
        TType("f32", (32, 16)),
        TType("f32", (32, 32)),
    )
    r = bind_call_types("attention.kina", sig, good, {"H": 4, "KV": 2})
    assert isinstance(r, CallBinding)
    assert dict(r.dims) == {"B": 2, "S": 8, "D": 32, "H": 4, "KV": 2, "Dh": 8, "G": 2}
    assert dict(r.dtypes) == {"T": "f32"}
    bad = good[:3] + (TType("f32", (32, 12)),) + good[4:]
    r = bind_call_types("attention.kina", sig, bad, {"H": 4, "KV": 2})
    assert isinstance(r, tuple) and r[0].code == "K0801"
    assert "`wv`" in r[0].message and "KV*Dh = 16" in r[0].message.replace("Dh*KV", "KV*Dh")
    r = bind_call_types(
        "attention.kina", sig, good[:1] + (TType("i32", (32, 32)),) + good[2:], {"H": 4, "KV": 2}
    )
    assert isinstance(r, tuple) and "wq" in r[0].message
    r = bind_call_types("attention.kina", sig, good, {"H": 4})
    assert isinstance(r, tuple) and r[0].code == "K0802"
    rms = ws.env.lookup("ffn.kina", "rms-norm")[1]  # type: ignore[index]
    r = bind_call_types("@kinac/std/nn.kina", rms, (TType("bf16", (2, 3, 4)), TType("bf16", (4,))))
    assert isinstance(r, CallBinding) and dict(r.dims)["..b"] == (2, 3)
