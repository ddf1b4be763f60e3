"""The Coq development (proofs/) builds with no axioms, and its rules are the ones kinac runs.

Why: the soundness proof is about the broadcasting and elementwise dtype rules written in
proofs/Rules.v; these tests compare them, through ``coqc``-evaluated outputs, against kinac's
checker (the real symbolic rules, end to end on generated defns) and its concrete helpers
(``c_broadcast``, ``c_dtype``), so the proof is about the rules kinac runs, not a paraphrase.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from check_support import Workspace
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from kinac.check import DefnRef
from kinac.check import dims as D
from kinac.check.prims.base import ShapeError
from kinac.check.prims.common import c_broadcast, c_dtype
from kinac.prims.elementwise import names
from kinac.tir.graph import TType

ROOT = Path(__file__).resolve().parent.parent
PROOFS = ROOT / "proofs"
PROVED = (
    "Rules.s_broadcast_sound",
    "Soundness.broadcast_sound",
    "Soundness.instantiate",
    "Soundness.preservation",
    "Soundness.progress",
    "Soundness.subject_reduction",
    "Soundness.type_safety",
    "Calls.call_sound",
    "MoreRules.reduce_sound",
    "MoreRules.matmul_sound",
    "MoreRules.where_sound",
)
pytestmark = pytest.mark.skipif(
    shutil.which("coqc") is None and not os.environ.get("KINAC_REQUIRE_COQ"),
    reason="coqc not installed (.ci/run installs it and sets KINAC_REQUIRE_COQ)",
)
_BUILT: list[str] = []


def _build() -> str:
    """``make -C proofs`` once per session; its output (Print Assumptions) is returned."""
    if not _BUILT:
        r = subprocess.run(["make", "-C", str(PROOFS)], capture_output=True, text=True, timeout=600)
        assert r.returncode == 0, r.stdout + r.stderr
        _BUILT.append(r.stdout)
    return _BUILT[0]


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


def _coq_eval(terms: list[str]) -> list[str]:
    """Evaluate each Coq term with the development loaded; one printed result per term."""
    _build()
    src = [
        "From Coq Require Import List String.",
        "From Kina Require Import Dims Types Rules.",
        "Import ListNotations.",
        "Open Scope string_scope.",
        "Set Printing Width 100000.",
    ]
    src += [f"Compute ({t})." for t in terms]
    f = PROOFS / "_agree_cases.v"
    try:
        f.write_text("\n".join(src) + "\n")
        r = subprocess.run(
            ["coqc", "-R", ".", "Kina", f.name],
            cwd=PROOFS,
            capture_output=True,
            text=True,
            timeout=300,
        )
    finally:
        for p in PROOFS.glob("_agree_cases.*"):
            p.unlink()
    assert r.returncode == 0, r.stderr
    outs = re.findall(r"^\s+= (.*)$", r.stdout, re.M)
    assert len(outs) == len(terms), r.stdout
    return outs


# ---------------------------------------------------------------- operands

DTYPES = ("f32", "f64", "bf16", "i32", "i64", "bool", "T", "U")
DEVICES = ("", "cpu", "cuda:0")
dim_st = st.sampled_from([1, 2, 3, "A", "B"])
tensor_st = st.tuples(
    st.sampled_from(DTYPES),
    st.sampled_from([None, "..b", "..c"]),
    st.lists(dim_st, max_size=3),
    st.sampled_from(DEVICES),
)
operand_st = st.one_of(st.sampled_from(["1.0", "2"]), tensor_st)


def _coq_dtype(d: str) -> str:
    if d in ("T", "U"):
        return f'DTVar "{d}"'
    return "DT " + {"bf16": "BF16"}.get(d, d.capitalize() if d == "bool" else d.upper())


def _coq_dim(d: int | str) -> str:
    return f"DLit {d}" if isinstance(d, int) else f'DVar "{d}"'


def _coq_device(dev: str) -> str:
    return {"": "DevAny", "cpu": "DevCpu"}.get(dev, f"DevCuda {dev[5:] or 0}")


def _coq_ty(op: object) -> str:
    if op == "1.0":
        return "Ty WeakF scalar DevAny"
    if op == "2":
        return "Ty WeakI scalar DevAny"
    dt, g, ds, dev = op  # type: ignore[misc]
    group = f'Some "{g}"' if g else "None"
    fixed = "[" + "; ".join(_coq_dim(d) for d in ds) + "]"
    return f"Ty ({_coq_dtype(dt)}) (Shape ({group}) {fixed}) ({_coq_device(dev)})"


def _kina_ty(op: object) -> str:
    dt, g, ds, dev = op  # type: ignore[misc]
    dims = " ".join([g] if g else [] + []) + (" " if g and ds else "") + " ".join(map(str, ds))
    ann = {"": "", "cpu": " @cpu"}.get(dev, f" @cuda({dev[5:]})")
    return f"(tensor {dt} [{dims}]{ann})"


_DT = {
    "F64": "f64",
    "F32": "f32",
    "F16": "f16",
    "BF16": "bf16",
    "I64": "i64",
    "I32": "i32",
    "Bool": "bool",
}


def _parse_ty(out: str) -> tuple[str, str | None, tuple[object, ...], str] | None:
    """A Coq-printed ``option ty`` as (dtype, group, dims, device)."""
    if out.startswith("None"):
        return None
    m = re.search(r'ty_dtype := (?:DT (\w+)|DTVar "(\w+)"|(Weak\w))', out)
    g = re.search(r'group := (?:None|Some "([^"]*)")', out)
    f = re.search(r"fixed := \[(.*?)\]", out)
    dv = re.search(r"ty_device := (DevAny|DevCpu|DevCuda (\d+))", out)
    assert m and g and f and dv, out
    dt = _DT[m.group(1)] if m.group(1) else (m.group(2) or m.group(3))
    dims: list[object] = []
    for item in filter(None, (s.strip() for s in f.group(1).split(";"))):
        lit = re.fullmatch(r"DLit (\d+)", item)
        dims.append(int(lit.group(1)) if lit else re.fullmatch(r'DVar "(\w+)"', item).group(1))  # type: ignore[union-attr]
    dev = {"DevAny": "", "DevCpu": "cpu"}.get(dv.group(1), f"cuda:{dv.group(2)}")
    return dt, g.group(1), tuple(dims), dev


def _kinac_verdict(op: str, xs: list[object], declared: str) -> tuple[bool, object, list[str]]:
    params, args = [], []
    for k, x in enumerate(xs):
        if isinstance(x, str):
            args.append(x)
        else:
            params.append(f"(x{k} : {_kina_ty(x)})")
            args.append(f"x{k}")
    src = f"(defn f [{' '.join(params)}] -> {declared} ({op} {' '.join(args)}))"
    ws = Workspace({"p.kina": src}, solve_cache=_SOLVE)
    c = ws.env.checked(DefnRef("p.kina", "f"))
    t = c.body.type if c.ok and c.body is not None else None
    if t is None:
        return False, src, [d.code for d in c.diagnostics]
    dims = tuple(_dim_atom(p) for p in t.shape.dims)
    return True, (t.dtype, t.shape.group, dims, t.device), [src]


def _dim_atom(p: D.Poly) -> object:
    """A literal or a lone variable (the generated cases use no other dims)."""
    c = D.as_const(p)
    if c is not None:
        return c
    ((mono, coeff),) = p.terms
    ((name, power),) = mono
    assert coeff == 1 and power == 1, p
    return name


_SOLVE: dict = {}
RULE_CODES = {"K0401", "K0402", "K0601", "K0602", "K0603", "K0701"}
ARITH, COMPARE = names("arith"), names("compare")
case_st = st.one_of(
    st.tuples(st.sampled_from(ARITH + COMPARE), operand_st, operand_st),
    st.tuples(st.sampled_from(names("float") + names("numeric")), tensor_st),
)


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


def _parse_cty(out: str) -> tuple[str, tuple[int, ...], str] | None:
    """A Coq-printed ``option cty`` as (dtype, shape, device) in kinac's spelling."""
    if out.startswith("None"):
        return None
    m = re.search(r"c_dtype := (?:DT (\w+)|(Weak\w))", out)
    s = re.search(r"c_shape := \[(.*?)\]", out)
    dv = re.search(r"c_device := (DevAny|DevCpu|DevCuda (\d+))", out)
    assert m and s and dv, out
    dt = _DT[m.group(1)] if m.group(1) else {"WeakF": "~f", "WeakI": "~i"}[m.group(2)]
    shape = tuple(int(n) for n in filter(None, (x.strip() for x in s.group(1).split(";"))))
    dev = {"DevAny": "", "DevCpu": "cpu"}.get(dv.group(1), f"cuda:{dv.group(2)}")
    return dt, shape, dev


ctensor_st = st.one_of(
    st.sampled_from([("~f", (), ""), ("~i", (), "")]),
    st.tuples(
        st.sampled_from(DTYPES[:6]),
        st.lists(st.integers(1, 3), max_size=3).map(tuple),
        st.sampled_from(DEVICES),
    ),
)
ccase_st = st.one_of(
    st.tuples(st.sampled_from(ARITH + COMPARE), ctensor_st, ctensor_st),
    st.tuples(st.sampled_from(names("float") + names("numeric")), ctensor_st),
)


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


REDUCE = ("sum", "mean", "max", "min")


def _coq_axis(z: int) -> str:
    return f"(AFront {z})" if z >= 0 else f"(ABack {-z})"


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
        c = Workspace({"p.kina": src}, solve_cache=_SOLVE).env.checked(DefnRef("p.kina", "f"))
        codes = {d.code for d in c.diagnostics}
        if want is None:
            assert not c.ok and codes & (RULE_CODES | {"K0405"}), (src, codes)
        else:
            assert c.ok and c.body is not None, (src, codes)
            t = c.body.type
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
