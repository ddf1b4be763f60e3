"""A new user's bug round on the checker (2026-12-02e): snapshot cases under
``tests/golden/newuser`` (ill-typed ones render their diagnostics, well-typed ones their
types), and what every diagnostic a user sees must carry: a code, a primary span, a help."""

from __future__ import annotations

from pathlib import Path

import pytest
from check_golden import golden_compare, run_case

GOLDEN = Path(__file__).resolve().parent / "golden" / "newuser"
CASES = sorted(GOLDEN.glob("*.kina"))
_CACHE: dict = {}


@pytest.mark.parametrize("path", CASES, ids=lambda p: p.stem)
def test_newuser_case(path: Path) -> None:
    out, diags, _ws = run_case(path, _CACHE)
    for d in diags:
        assert d.code.startswith("K") and len(d.code) == 5, d
        assert d.primary is not None and d.primary.loc is not None, d
        assert d.help, f"{path.name}: {d.code} {d.message!r} has no help"
    golden_compare(path, out)


def test_where_contradiction_is_reported_at_a_minimal_core() -> None:
    _out, diags, _ws = run_case(GOLDEN / "where_contradiction.kina", _CACHE)
    by_defn = {d.primary.loc.defn: d for d in diags if d.code == "K0414"}  # type: ignore[union-attr]
    assert set(by_defn) == {"between", "none", "parity", "odd", "core", "quotient"}
    # core: (< M 3) and (divides 7 M) contradict; (< N M) and (> N 1) are not needed
    assert len(by_defn["core"].secondary) == 1
    assert by_defn["none"].secondary == ()


def test_consistent_where_clauses_are_not_reported() -> None:
    _out, diags, _ws = run_case(GOLDEN / "where_consistent.kina", _CACHE)
    assert diags == []


def test_every_checker_error_has_help() -> None:
    """The whole snapshot corpus of the checker: every error says what to do (a specific help
    at its site, else its code's ``DEFAULT_HELP``)."""
    root = GOLDEN.parent / "check"
    cases = sorted((root / "bad").glob("*.kina")) + CASES
    missing = []
    for path in cases:
        _out, diags, _ws = run_case(path, _CACHE)
        missing += [
            f"{path.name}: {d.code} {d.message}" for d in diags if d.is_error and not d.help
        ]
    assert missing == []


def test_python_call_of_a_lookalike_dtype_variable_names_the_dtype(tmp_path: Path) -> None:
    """From Python the warning is not shown, so the call error's help says it (it said to
    convert the array to float32)."""
    import numpy as np

    import kinac

    src = tmp_path / "m.kina"
    src.write_text("(defn h [(x : (tensor int32 [N]))] -> (tensor int32 [N]) (add x x))\n")
    f = kinac.compile(str(src), "h", target="cpu")
    with pytest.raises(kinac.KinaCallError) as e:
        f(np.arange(3, dtype=np.int32))
    assert "write `i32` in the signature of `h`" in str(e.value)
    assert "float32" not in str(e.value)
