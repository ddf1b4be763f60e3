"""The command line's dispatch: ``main`` finds each command's handler by name
(``cmd_<command>`` in :mod:`kinac.cli`'s namespace), so a command whose handler moved to
another module, or is defined after the ``__main__`` guard, fails only when it is run.

``python -m kinac.cli launch ...`` and ``... train ...`` were internal errors
(``KeyError: 'cmd_launch'``): the guard sat mid-file and ran ``main`` before those two
handlers were defined."""

from __future__ import annotations

import argparse
import ast
import subprocess
import sys
from pathlib import Path

import kinac
from kinac import cli

KINAC = Path(kinac.__file__).parent


def test_every_command_has_a_handler() -> None:
    (sub,) = (a for a in cli.build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    missing = [name for name in sub.choices if not callable(getattr(cli, f"cmd_{name}", None))]
    assert not missing, missing
    assert "cache" in sub.choices and cli.cmd_cache.__module__ == "kinac.cli_cache"


def test_main_guards_come_last() -> None:
    """In every kinac module with an ``if __name__ == "__main__"`` block, it is the last
    top-level statement: what follows it is not defined when it runs."""
    late = []
    for path in sorted(KINAC.rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        if "__main__" not in text:
            continue
        body = ast.parse(text).body
        for i, node in enumerate(body):
            if (
                isinstance(node, ast.If)
                and isinstance(node.test, ast.Compare)
                and isinstance(node.test.left, ast.Name)
                and node.test.left.id == "__name__"
                and i != len(body) - 1
            ):
                late.append(f"{path.relative_to(KINAC.parent)}:{node.lineno}")
    assert not late, late


def test_python_m_kinac_cli_runs_a_command_defined_late_in_the_file(tmp_path: Path) -> None:
    run = subprocess.run(
        [sys.executable, "-m", "kinac.cli", "launch", "-n", "1", "--", sys.executable, "-c", ""],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert run.returncode == 0, run.stderr
    assert "internal error" not in run.stderr
