"""Snapshot tests of the checker (tests/golden/check): ill-typed programs with their rendered
diagnostics, well-typed ones with their inferred types and graphs; corpus coverage of every
code and primitive; and counterexample validity, judged by the concrete interpreter."""

from __future__ import annotations

import itertools
import random
from pathlib import Path

import pytest
from check_golden import GOLDEN, golden_compare, run_case

from kinac.check import CODES, DefnRef
from kinac.check.concrete import eval_all, eval_defn
from kinac.check.formula import holds
from kinac.check.prims.base import PRIMS
from kinac.check.sig import analyse
from kinac.diag.model import NodeRef
from kinac.reader import ast

BAD = sorted((GOLDEN / "bad").glob("*.kina"))
GOOD = sorted((GOLDEN / "good").glob("*.kina"))
_CACHE: dict = {}


@pytest.mark.parametrize("path", BAD, ids=lambda p: p.stem)
def test_ill_typed(path: Path) -> None:
    out, diags, _ws = run_case(path, _CACHE)
    assert any(d.is_error for d in diags), path.name
    golden_compare(path, out)


@pytest.mark.parametrize("path", GOOD, ids=lambda p: p.stem)
def test_well_typed(path: Path) -> None:
    out, diags, _ws = run_case(path, _CACHE)
    assert diags == [], out
    golden_compare(path, out)


def _heads(e: ast.Expr, out: set[str]) -> None:
    if isinstance(e, ast.Call):
        out.add(e.head)
        for a in (*e.args, *(k.value for k in e.kwargs)):
            _heads(a, out)
    elif isinstance(e, ast.Let):
        for b in e.bindings:
            _heads(b.value, out)
        _heads(e.body, out)
    elif isinstance(e, ast.The):
        _heads(e.expr, out)
    elif isinstance(e, ast.ListLit):
        for it in e.items:
            _heads(it, out)


def test_corpus_size_and_coverage() -> None:
    assert len(BAD) >= 40 and len(GOOD) >= 20
    codes: set[str] = set()
    bad_heads: set[str] = set()
    good_heads: set[str] = set()
    for path in BAD:
        _out, diags, ws = run_case(path, _CACHE)
        codes |= {d.code for d in diags}
        for d in ws.env.file(path.name).defns:  # type: ignore[union-attr]
            _heads(d.body, bad_heads)
    for path in GOOD:
        ws = run_case(path, _CACHE)[2]
        for d in ws.env.file(path.name).defns:  # type: ignore[union-attr]
            _heads(d.body, good_heads)
    for d in ws.env.file("@kinac/std/nn.kina").defns:  # type: ignore[union-attr]
        _heads(d.body, good_heads)
    assert set(CODES) <= codes, sorted(set(CODES) - codes)
    assert set(PRIMS) <= bad_heads, sorted(set(PRIMS) - bad_heads)
    missing_good = set(PRIMS) - good_heads - {"all-gather", "reduce-scatter", "all-to-all"}
    assert not missing_good, sorted(missing_good)


def test_prelude_checks_clean() -> None:
    ws = run_case(GOOD[0], _CACHE)[2]
    checked = ws.env.check_file("@kinac/std/nn.kina")
    names = {c.ref.name for c in checked}
    assert {"rms-norm", "layer-norm", "swiglu", "rope", "causal-mask"} <= names
    for c in checked:
        assert c.ok, (c.ref.name, c.diagnostics)
        assert c.sig.dtype_vars in ((), ("T",))


# ---------------------------------------------------------------- counterexample validity


def _complete(sig, fixed: dict[str, int]) -> dict[str, int] | None:
    """Values for the defn's other dims (1..8) that satisfy its assumptions, if any."""
    free = [v for v in sig.dim_vars if v not in fixed]
    for combo in itertools.product(range(1, 9), repeat=min(len(free), 4)):
        env = dict(fixed)
        env.update(zip(free, combo, strict=False))
        for v in free[4:]:
            env[v] = 1
        if _satisfies(sig, env):
            return env
    return None


def _satisfies(sig, env: dict[str, int]) -> bool:
    """Whether ``env`` meets the defn's assumptions (one that cannot be evaluated does not)."""
    try:
        return all(holds(r, env) for r in sig.assumptions)
    except Exception:
        return False


def _refuted_cases() -> list[tuple[Path, int]]:
    out = []
    for path in BAD:
        _o, diags, _ws = run_case(path, _CACHE)
        for i, d in enumerate(diags):
            if d.counterexample is not None:
                out.append((path, i))
    return out


REFUTED = _refuted_cases()


def test_enough_refutations() -> None:
    assert len(REFUTED) >= 20


@pytest.mark.parametrize("path,i", REFUTED, ids=lambda x: x.stem if isinstance(x, Path) else str(x))
def test_counterexample_breaks_the_program(path: Path, i: int) -> None:
    _o, diags, ws = run_case(path, _CACHE)
    d = diags[i]
    loc = d.primary.loc
    assert isinstance(loc, NodeRef)
    defn = ws.env.defn(DefnRef(loc.file, loc.defn))
    assert defn is not None
    sig = analyse(loc.file, defn.signature, ws.env.meshes(loc.file))
    cex = dict(d.counterexample or ())
    # the counterexample satisfies the assumptions (all dims >= 1)
    assert all(v >= 1 for v in cex.values())
    env = _complete(sig, cex)
    assert env is not None, f"no completion of {cex} satisfies the assumptions"
    dims: dict[str, int | tuple[int, ...]] = dict(env)
    for g in sig.groups:
        dims[g] = (2,)
    dtypes = {t: "f32" for t in sig.dtype_vars}
    _out, fails = eval_all(loc.file, defn, dims, dtypes, ws.env)
    # the program fails concretely, and at the very node the diagnostic points at
    assert any(loc.nid in f.nids for f in fails), (cex, [(str(f), f.nids) for f in fails])


@pytest.mark.parametrize("path", GOOD, ids=lambda p: p.stem)
def test_well_typed_evaluate_concretely(path: Path) -> None:
    """Every defn of a well-typed case evaluates at three dim sets that meet its assumptions.

    The dims come from a generator seeded by the case and defn names (the same in every
    process, unlike ``hash()``); a defn for which no dims are found fails, never skips.
    """
    _o, _d, ws = run_case(path, _CACHE)
    pf = ws.env.file(path.name)
    for defn in pf.defns:  # type: ignore[union-attr]
        sig = analyse(path.name, defn.signature, ws.env.meshes(path.name))
        rng = random.Random(f"{path.name}/{defn.name}")
        for trial in range(3):
            env = _complete(sig, {}) if trial == 0 else _search(sig, rng)
            assert env is not None, f"{defn.name}: no dims up to 8 meet {sig.assumptions}"
            dims: dict[str, int | tuple[int, ...]] = dict(env)
            for g in sig.groups:
                dims[g] = (2, 3)[:trial]
            dtypes = {t: "f32" for t in sig.dtype_vars}
            eval_defn(path.name, defn, dims, dtypes, ws.env)


def _search(sig, rng: random.Random) -> dict[str, int] | None:
    """Random dims meeting the assumptions: base values 2..4, scaled by 1..5 until they do,
    else any small completion (a defn whose assumptions fix every dim has only that one)."""
    base = {v: rng.randint(2, 4) for v in sig.dim_vars}
    for scale in range(1, 6):
        env = {v: b * scale for v, b in base.items()}
        if _satisfies(sig, env):
            return env
    return _complete(sig, {})


def test_every_golden_has_its_case() -> None:
    """A ``.out`` without its ``.kina`` is a stale golden (a renamed or deleted case)."""
    outs = sorted(GOLDEN.glob("*/*.out"))
    assert outs and not [o for o in outs if not o.with_suffix(".kina").exists()]


def test_every_code_has_an_explain_page() -> None:
    from kinac.diag.explain import explanation

    for code, title in CODES.items():
        page = explanation(code)
        assert page is not None, code
        assert page.startswith(f"# {code}: {title}"), code
