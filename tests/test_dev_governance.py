"""Dependency governance: the lock pins every requirement, the audit fails on a vulnerability.

Static checks (no network, no install): ``constraints.txt`` pins each requirement of
``pyproject.toml`` (runtime and ``test`` extra) to a version the requirement accepts, and the
audit summary (``scripts/audit_summary.py``) fails on a known vulnerability and says when
nothing could be audited.
"""

from __future__ import annotations

import importlib.util
import tomllib
from pathlib import Path
from types import ModuleType

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parent.parent


def _script(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, ROOT / "scripts" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _pins() -> dict[str, str]:
    lines = (ROOT / "constraints.txt").read_text().splitlines()
    pairs = [ln.split("==") for ln in lines if ln and not ln.startswith("#")]
    assert all(len(p) == 2 for p in pairs), "constraints.txt: one name==version a line"
    return {canonicalize_name(n): v for n, v in pairs}


def test_lock_pins_every_requirement() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    pins = _pins()
    for text in project["dependencies"] + project["optional-dependencies"]["test"]:
        req = Requirement(text)
        name = canonicalize_name(req.name)
        assert name in pins, f"{name} is not locked: run python3 scripts/lock.py"
        assert req.specifier.contains(pins[name], prereleases=True), (text, pins[name])
    assert pins["torch"] == "2.13.0"  # the CPU reference, exactly


def test_audit_fails_on_a_known_vulnerability() -> None:
    summarise = _script("audit_summary").summarise
    clean = {"dependencies": [{"name": "numpy", "version": "2.4.6", "vulns": []}]}
    assert summarise(clean, strict=True)[0] == 0
    vuln = {"id": "PYSEC-0000-1", "fix_versions": ["2.4.7"], "aliases": [], "description": ""}
    bad = {"dependencies": [{"name": "numpy", "version": "2.4.6", "vulns": [vuln]}]}
    status, lines = summarise(bad, strict=False)
    assert status == 1 and "numpy 2.4.6: PYSEC-0000-1 (fixed in: 2.4.7)" in lines[0]


def test_audit_says_when_nothing_was_audited() -> None:
    summarise = _script("audit_summary").summarise
    skipped = {"dependencies": [{"name": "rich", "skip_reason": "not found on PyPI"}]}
    status, lines = summarise(skipped, strict=False)
    assert status == 0 and "0 of 1" in lines[0] and "WARNING: 1 pins" in lines[1]
    assert summarise(skipped, strict=True)[0] == 1
