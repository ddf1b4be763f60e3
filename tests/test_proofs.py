"""The Coq development (proofs/) builds with no axioms, and its rules are the ones kinac runs.

Why: the soundness proof is about the broadcasting and elementwise dtype rules written in
proofs/Rules.v; these tests compare them, through ``coqc``-evaluated outputs, against kinac's
checker (the real symbolic rules, end to end on generated defns) and its concrete helpers
(``c_broadcast``, ``c_dtype``), so the proof is about the rules kinac runs, not a paraphrase.
"""

from __future__ import annotations

import re

from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from test_proofs_support import (
    COMPARE,
    DTYPES,
    PROOFS,
    PROVED,
    RULE_CODES,
    SKIP_WITHOUT_COQ,
    _build,
    _coq_dtype,
    _coq_eval,
    _coq_ty,
    _kina_ty,
    _kinac_verdict,
    _parse_ty,
    case_st,
)

from kinac.check.prims.base import ShapeError
from kinac.check.prims.common import c_broadcast, c_dtype
from kinac.tir.graph import TType

pytestmark = SKIP_WITHOUT_COQ


def test_proofs_build_and_use_no_axioms() -> None:
    out = _build()
    listed = re.findall(r"^Print Assumptions (\S+)\.", (PROOFS / "Assumptions.v").read_text(), re.M)
    assert tuple(listed) == PROVED
    verdicts = [ln for ln in out.splitlines() if "global context" in ln or "Axioms:" in ln]
    assert verdicts == ["Closed under the global context"] * len(PROVED), out
    sources = (PROOFS / "_CoqProject").read_text().split()[3:]
    assert sources and all((PROOFS / v).exists() for v in sources), sources
    for v in sources:
        text = (PROOFS / v).read_text()
        assert not re.search(r"\bAdmitted\.|\badmit\b|^\s*(Axiom|Parameter)\b", text, re.M), v


@settings(
    max_examples=3, deadline=None, phases=[Phase.generate], suppress_health_check=list(HealthCheck)
)
@given(cases=st.lists(case_st, min_size=60, max_size=60))
def test_checker_rules_agree_with_the_mechanised_rules(cases: list[tuple]) -> None:
    """Each generated primitive application: Coq's executable symbolic rule (s_binary /
    s_unary, an instance of the proved relation) and kinac's checker accept the same ones
    with the same result type, and reject the same ones with a rule diagnostic."""
    cases = [c for c in cases if not all(isinstance(x, str) for x in c[1:])]
    terms = []
    for op, *xs in cases:
        if len(xs) == 1:
            terms.append(f"s_unary ({_coq_ty(xs[0])})")
        else:
            k = "Compare" if op in COMPARE else "Arith"
            terms.append(f's_binary {k} "{op}" ({_coq_ty(xs[0])}) ({_coq_ty(xs[1])})')
    for (op, *xs), out in zip(cases, _coq_eval(terms), strict=True):
        want = _parse_ty(out)
        declared = "f32" if want is None else _kina_ty(want)
        ok, got, info = _kinac_verdict(op, xs, declared)
        if want is None:
            assert not ok and set(info) & RULE_CODES, (op, xs, info)
        else:
            assert ok and got == want, (op, xs, want, got, info)


@settings(
    max_examples=2, deadline=None, phases=[Phase.generate], suppress_health_check=list(HealthCheck)
)
@given(
    pairs=st.lists(
        st.tuples(
            st.lists(st.integers(1, 3), max_size=4),
            st.lists(st.integers(1, 3), max_size=4),
            st.sampled_from(DTYPES[:6] + ("~f", "~i")),
            st.sampled_from(DTYPES[:6] + ("~f", "~i")),
        ),
        min_size=80,
        max_size=80,
    )
)
def test_concrete_rules_agree(pairs: list[tuple]) -> None:
    """kinac's concrete ``c_broadcast`` and ``c_dtype`` against Coq's ``c_broadcast`` and
    ``join_dtype`` (the run-time rules of the semantics)."""
    coq_dt = {"~f": "WeakF", "~i": "WeakI"}
    terms = []
    for a, b, da, db in pairs:
        terms.append(f"c_broadcast {a!r} {b!r}".replace(",", ";"))
        terms.append(
            f"join_dtype ({coq_dt.get(da) or _coq_dtype(da)}) ({coq_dt.get(db) or _coq_dtype(db)})"
        )
    outs = _coq_eval(terms)
    for k, (a, b, da, db) in enumerate(pairs):
        try:
            want_s: object = list(c_broadcast([tuple(a), tuple(b)]))
        except ShapeError:
            want_s = None
        got_s = outs[2 * k]
        assert got_s == ("None" if want_s is None else f"Some {want_s}".replace(",", ";")), (
            a,
            b,
            got_s,
        )
        try:
            want_d: str | None = c_dtype([TType(da, (), ""), TType(db, (), "")])
        except ShapeError:
            want_d = None
        got = outs[2 * k + 1]
        coq_want = (
            "None"
            if want_d is None
            else "Some "
            + (
                coq_dt.get(want_d)
                or (_coq_dtype(want_d) if want_d in ("bool",) else f"({_coq_dtype(want_d)})")
            )
        )
        assert got.replace("(", "").replace(")", "") == coq_want.replace("(", "").replace(
            ")", ""
        ), (da, db, got)
