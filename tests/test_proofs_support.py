"""Shared by the proof tests (tests/test_proofs*.py): building proofs/ once, evaluating Coq
terms with ``coqc``, encoding kinac types as Coq terms and parsing Coq's printed results, and the
hypothesis strategies of generated cases."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from check_support import Workspace
from hypothesis import strategies as st

from kinac.check import DefnRef
from kinac.check import dims as D
from kinac.prims.elementwise import names

ROOT = Path(__file__).resolve().parent.parent
PROOFS = ROOT / "proofs"
PROVED = (
    "Rules.s_broadcast_sound",
    "Rules.s_mm_shape_sound",
    "Instances.broadcast_sound",
    "Instances.mm_shape_sound",
    "Soundness.instantiate",
    "Soundness.preservation",
    "Soundness.progress",
    "Soundness.subject_reduction",
    "Soundness.type_safety",
    "Calls.call_sound",
    "MoreRules.reduce_sound",
    "MoreRules.where_sound",
)
SKIP_WITHOUT_COQ = pytest.mark.skipif(
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


def _coq_ty(op: Any) -> str:
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
    dims = " ".join([g] if g else [] + []) + (" " if g and ds else "") + " ".join(map(str, ds))  # type: ignore[has-type]
    ann = {"": "", "cpu": " @cpu"}.get(dev, f" @cuda({dev[5:]})")  # type: ignore[has-type]
    return f"(tensor {dt} [{dims}]{ann})"  # type: ignore[has-type]


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


REDUCE = ("sum", "mean", "max", "min")


def _coq_axis(z: int) -> str:
    return f"(AFront {z})" if z >= 0 else f"(ABack {-z})"
