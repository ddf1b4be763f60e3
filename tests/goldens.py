"""The one place that decides whether golden files may be written.

A golden is written only under ``pytest --update-goldens`` (``conftest.py`` sets the switch);
otherwise a missing golden fails like a differing one, so a test cannot pass by writing the
answer it is compared with. Review the diff of ``tests/golden/`` after an update.
"""

from __future__ import annotations

from pathlib import Path

OPTION = "--update-goldens"
HOW = f"run `python3 -m pytest {OPTION} TESTS` and review the diff"
_update = False


def set_update(on: bool) -> None:
    """Called once by ``conftest.py`` from the command line option."""
    global _update
    _update = on


def updating() -> bool:
    """Whether this run writes goldens (``--update-goldens``)."""
    return _update


def compare(golden: Path, got: str, what: str = "") -> None:
    """Assert ``got`` equals the golden file (UTF-8, ``\\n`` line ends); write it when updating.

    A missing golden is a failure, never a silent first write.
    """
    if _update:
        golden.parent.mkdir(parents=True, exist_ok=True)
        golden.write_text(got, encoding="utf-8", newline="\n")
    assert golden.exists(), f"missing golden {golden}: {HOW}"
    want = golden.read_text(encoding="utf-8")
    assert got == want, f"{what or golden.name}: output differs from {golden} ({HOW})\n{got}"
