"""A new user's command-line round (2026-12-02e): `kinac explain` with the code's digits only,
and the new checker codes' pages."""

from __future__ import annotations

import subprocess
import sys


def _explain(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "kinac", "explain", code], capture_output=True, text=True
    )


def test_explain_takes_the_digits_alone() -> None:
    r = _explain("0414")
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines()[0] == "# K0414: the where clauses contradict each other"
    bad = _explain("414")
    assert bad.returncode == 2 and "no explanation for '414'" in bad.stderr


def test_new_codes_have_pages() -> None:
    for code, title in (
        ("K0304", "a dtype variable named like a dtype"),
        ("k0414", "the where clauses contradict each other"),
    ):
        r = _explain(code)
        assert r.returncode == 0 and r.stdout.startswith(f"# {code.upper()}: {title}"), r
