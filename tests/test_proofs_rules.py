"""The Coq run-time rules and reductions are kinac's: ``c_unary``/``c_binary``/``c_reduce``
against every primitive's concrete evaluator (what specialisation runs) and ``s_reduce``
against the checker, on generated cases (see tests/test_proofs.py)."""

from __future__ import annotations

from check_support import Workspace
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from test_proofs_support import (
    _SOLVE,
    COMPARE,
    REDUCE,
    RULE_CODES,
    SKIP_WITHOUT_COQ,
    _coq_axis,
    _coq_device,
    _coq_dtype,
    _coq_eval,
    _coq_ty,
    _dim_atom,
    _kina_ty,
    _parse_cty,
    _parse_ty,
    ccase_st,
    ctensor_st,
    tensor_st,
)

from kinac.check import DefnRef
from kinac.check.prims.base import ShapeError
from kinac.tir.graph import TType

pytestmark = SKIP_WITHOUT_COQ


@settings(
    max_examples=2, deadline=None, phases=[Phase.generate], suppress_health_check=list(HealthCheck)
)
@given(cases=st.lists(ccase_st, min_size=80, max_size=80))
def test_concrete_primitive_rules_agree(cases: list[tuple]) -> None:
    """The run-time rules of the semantics (Coq ``c_unary``/``c_binary``) are the concrete
    evaluators kinac's specialisation runs (each primitive's ``concrete``)."""
    from kinac.check.prims.base import CArgs, find

    coq_dt = {"~f": "WeakF", "~i": "WeakI"}
    # kinac's concrete pow refuses two weak integers that its symbolic rule accepts (folding
    # resolves them first); proofs/README.md lists the difference.
    cases = [c for c in cases if not (c[0] == "pow" and all(x[0] == "~i" for x in c[1:]))]

    def cty(x: tuple) -> str:
        dt, shape, dev = x
        dts = coq_dt.get(dt) or _coq_dtype(dt)
        return f"CTy ({dts}) {list(shape)!r} ({_coq_device(dev)})".replace(",", ";")

    terms = []
    for op, *xs in cases:
        if len(xs) == 1:
            terms.append(f"c_unary ({cty(xs[0])})")
        else:
            k = "Compare" if op in COMPARE else "Arith"
            terms.append(f'c_binary {k} "{op}" ({cty(xs[0])}) ({cty(xs[1])})')
    for (op, *xs), out in zip(cases, _coq_eval(terms), strict=True):
        p = find(op, len(xs), set())
        assert p is not None, op
        try:
            t, _ = p.concrete(CArgs([TType(*x) for x in xs], {}))
            want: object = (t.dtype, tuple(t.shape), t.device)
        except ShapeError:
            want = None
        assert _parse_cty(out) == want, (op, xs, out, want)


@settings(
    max_examples=2, deadline=None, phases=[Phase.generate], suppress_health_check=list(HealthCheck)
)
@given(
    sym=st.lists(
        st.tuples(st.sampled_from(REDUCE), tensor_st, st.integers(-4, 3), st.booleans()),
        min_size=40,
        max_size=40,
    ),
    conc=st.lists(
        st.tuples(st.sampled_from(REDUCE), ctensor_st, st.integers(-4, 3), st.booleans()),
        min_size=40,
        max_size=40,
    ),
)
def test_reduction_rules_agree(sym: list[tuple], conc: list[tuple]) -> None:
    """``sum mean max min`` with ``:axis`` and ``:keepdims``: Coq's ``s_reduce`` against
    kinac's checker (as for the elementwise rules) and ``c_reduce`` against the primitives'
    concrete evaluators."""
    from kinac.check.prims.base import CArgs, find

    coq_dt = {"~f": "WeakF", "~i": "WeakI"}
    terms = [
        f'(s_reduce "{op}" {str(keep).lower()} {_coq_axis(z)} ({_coq_ty(x)}))'
        for op, x, z, keep in sym
    ]
    for op, (dt, shape, dev), z, keep in conc:
        c = f"CTy ({coq_dt.get(dt) or _coq_dtype(dt)}) {list(shape)!r} ({_coq_device(dev)})"
        terms.append(f'c_reduce "{op}" {str(keep).lower()} {_coq_axis(z)} ({c})'.replace(",", ";"))
    outs = _coq_eval(terms)
    for (op, x, z, keep), out in zip(sym, outs[: len(sym)], strict=True):
        want = _parse_ty(out)
        declared = "f32" if want is None else _kina_ty(want)
        src = (
            f"(defn f [(x0 : {_kina_ty(x)})] -> {declared} "
            f"({op} x0 :axis {z} :keepdims {str(keep).lower()}))"
        )
        c = Workspace({"p.kina": src}, solve_cache=_SOLVE).env.checked(DefnRef("p.kina", "f"))  # type: ignore[assignment]
        codes = {d.code for d in c.diagnostics}  # type: ignore[attr-defined]
        if want is None:
            assert not c.ok and codes & (RULE_CODES | {"K0405"}), (src, codes)  # type: ignore[attr-defined]
        else:
            assert c.ok and c.body is not None, (src, codes)  # type: ignore[attr-defined]
            t = c.body.type  # type: ignore[attr-defined]
            got = (t.dtype, t.shape.group, tuple(_dim_atom(p) for p in t.shape.dims), t.device)
            assert got == want, (src, got, want)
    for (op, x, z, keep), out in zip(conc, outs[len(sym) :], strict=True):
        p = find(op, 1, {"axis", "keepdims"})
        assert p is not None
        try:
            t, _ = p.concrete(CArgs([TType(*x)], {"axis": z, "keepdims": keep}))
            want_c: object = (t.dtype, tuple(t.shape), t.device)
        except ShapeError:
            want_c = None
        assert _parse_cty(out) == want_c, (op, x, z, keep, out, want_c)


mm_tensor_st = st.tuples(
    st.sampled_from(("f32", "f64", "i32", "bool", "T")),
    st.sampled_from([None, None, "..b"]),
    st.lists(st.sampled_from([1, 2, 3, "A", "B"]), max_size=4),
    st.sampled_from(("", "", "cpu")),
)
mm_ctensor_st = st.tuples(
    st.sampled_from(("f32", "f64", "i32", "bool")),
    st.lists(st.integers(1, 3), max_size=4).map(tuple),
    st.sampled_from(("", "", "cpu")),
)


@settings(
    max_examples=2, deadline=None, phases=[Phase.generate], suppress_health_check=list(HealthCheck)
)
@given(
    sym=st.lists(st.tuples(mm_tensor_st, mm_tensor_st), min_size=40, max_size=40),
    conc=st.lists(st.tuples(mm_ctensor_st, mm_ctensor_st), min_size=60, max_size=60),
)
def test_matmul_rules_agree(sym: list[tuple], conc: list[tuple]) -> None:
    """``matmul`` (batch broadcasting, the contraction, the ``[..b K] x [K N]`` rows case):
    Coq's ``s_matmul`` (an instance of the proved relation) against kinac's checker and
    ``c_matmul`` against the primitive's concrete evaluator."""
    from kinac.check.prims.base import CArgs, find

    terms = [f"s_matmul ({_coq_ty(a)}) ({_coq_ty(b)})" for a, b in sym]
    for a, b in conc:
        ca, cb = (
            f"CTy ({_coq_dtype(x[0])}) {list(x[1])!r} ({_coq_device(x[2])})".replace(",", ";")
            for x in (a, b)
        )
        terms.append(f"c_matmul ({ca}) ({cb})")
    outs = _coq_eval(terms)
    for (a, b), out in zip(sym, outs[: len(sym)], strict=True):
        want = _parse_ty(out)
        declared = "f32" if want is None else _kina_ty(want)
        src = f"(defn f [(x0 : {_kina_ty(a)}) (x1 : {_kina_ty(b)})] -> {declared} (matmul x0 x1))"
        c = Workspace({"p.kina": src}, solve_cache=_SOLVE).env.checked(DefnRef("p.kina", "f"))
        codes = {d.code for d in c.diagnostics}
        if want is None:
            assert not c.ok and codes & (RULE_CODES | {"K0403"}), (src, codes)
        else:
            assert c.ok and c.body is not None, (src, codes)
            t = c.body.type
            got = (t.dtype, t.shape.group, tuple(_dim_atom(p) for p in t.shape.dims), t.device)
            assert got == want, (src, got, want)
    p = find("matmul", 2, set())
    assert p is not None
    for (a, b), out in zip(conc, outs[len(sym) :], strict=True):
        try:
            t, _ = p.concrete(CArgs([TType(*a), TType(*b)], {}))  # type: ignore[assignment]
            want_c: object = (t.dtype, tuple(t.shape), t.device)  # type: ignore[arg-type]
        except ShapeError:
            want_c = None
        assert _parse_cty(out) == want_c, (a, b, out, want_c)
