"""Issue 15, set-up and dependencies: the README's first command installs what running needs
(not the 1.4 GB test set), the test command what testing needs at the locked versions with an
audit, and a CycloneDX SBOM is one documented command.

Static checks (no install, no network): running the SBOM tool takes ~20 s, too slow here; the
lock and the audit summary have their own tests (``test_dev_governance.py``).
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parent.parent
TEST_ONLY = {"torch", "mypy", "pytest", "hypothesis", "ruff", "pip-audit", "cyclonedx-bom"}


def _commands(text: str) -> list[str]:
    return re.findall(r"```sh\n(.*?)```", text, re.S)


def test_the_first_command_installs_only_what_running_needs() -> None:
    first, second = _commands((ROOT / "README.md").read_text())[:2]
    install = next(part for part in first.split("&&") if "pip install" in part)
    assert "[" not in install, install  # no extra: the runtime set only
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    runtime = {Requirement(r).name.lower() for r in project["dependencies"]}
    assert not runtime & TEST_ONLY, runtime & TEST_ONLY
    assert TEST_ONLY <= {
        Requirement(r).name.lower() for r in project["optional-dependencies"]["test"]
    }
    assert second.strip() == "bash scripts/test.sh"


def test_the_test_command_installs_the_locked_test_set_and_audits_it() -> None:
    script = (ROOT / "scripts" / "test.sh").read_text()
    assert "-c constraints.txt -e '.[test]'" in script
    assert "bash scripts/audit.sh" in script
    assert (ROOT / "constraints.txt").is_file()


def test_the_sbom_is_one_documented_command() -> None:
    script = (ROOT / "scripts" / "sbom.sh").read_text()
    assert "cyclonedx_py environment" in script and "-c constraints.txt" in script
    assert "bash scripts/sbom.sh" in (ROOT / "docs" / "development.md").read_text()
