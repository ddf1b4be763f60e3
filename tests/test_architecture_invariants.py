"""Invariants docs/architecture.md and docs/CONTRIBUTING-helpers.md state that no test
enforced (each layer states its invariant, and a test enforces it):

* **No pickle anywhere**: no kinac module imports ``pickle``, ``marshal``, ``shelve``, ``dill``,
  ``cloudpickle`` or ``joblib``, or calls ``np.load(..., allow_pickle=True)``: a cache file or
  an inputs file can never run code.
* **Each heavy dependency has one home, imported lazily**: ``z3`` only in
  ``kinac/check/solver.py``, cuda-python only in ``kinac/rt/cuda/driver.py``, ``pydantic`` only
  in ``kinac/workspace/schema.py`` (all inside functions), and ``torch`` nowhere (the runtime
  uses the caller's, from ``sys.modules``). xDSL and llvmlite are
  ``tests/test_host_runtime.py::test_heavy_imports_stay_lazy_and_contained``'s.
* **The library leaves its caller's garbage collector alone** (``kinac.compile``), while
  the command line raises its thresholds (``kinac/compiler_gc.py``).

Imports are read with ``ast`` (lazy ones inside functions included, ``TYPE_CHECKING`` ones
too: a type-only import of pickle is still a smell). Each rule is shown to fail on a planted
violation.
"""

from __future__ import annotations

import ast
import gc
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

import kinac

KINAC = Path(kinac.__file__).parent

UNPICKLERS = frozenset({"pickle", "_pickle", "cPickle", "marshal", "shelve", "dill", "cloudpickle", "joblib"})  # fmt: skip
HOMES: dict[str, frozenset[str]] = {
    "z3": frozenset({"kinac/check/solver.py"}),
    "cuda": frozenset({"kinac/rt/cuda/driver.py"}),
    "pydantic": frozenset({"kinac/workspace/schema.py"}),
    "torch": frozenset(),
}


# files that may break a rule (parsing all ~500 modules took ~2 s; this reads them only)
_SUSPECT = re.compile(
    rf"^\s*(?:import|from)\s[^\n]*\b(?:{'|'.join(sorted(UNPICKLERS | HOMES.keys()))})\b|allow_pickle",
    re.MULTILINE,
)


def _imports(tree: ast.Module) -> Iterator[tuple[str, int, bool]]:
    """Each imported top-level package, its line, and whether the import is at module level."""
    top = {id(n) for n in tree.body}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module]
        else:
            continue
        for name in names:
            yield name.split(".")[0], node.lineno, id(node) in top


def violations(root: Path) -> list[str]:
    """Every breach of the rules above in the package tree ``root`` (``.../kinac``)."""
    out = []
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root.parent).as_posix()
        text = path.read_text(encoding="utf-8")
        if not _SUSPECT.search(text):
            continue
        tree = ast.parse(text)
        for pkg, line, at_top in _imports(tree):
            if pkg in UNPICKLERS:
                out.append(f"{rel}:{line}: imports {pkg} (no pickle anywhere)")
            elif pkg in HOMES and rel not in HOMES[pkg]:
                homes = ", ".join(sorted(HOMES[pkg])) or "no kinac module"
                out.append(f"{rel}:{line}: imports {pkg} (its home: {homes})")
            elif pkg in HOMES and at_top:
                out.append(f"{rel}:{line}: imports {pkg} at module level (heavy: import lazily)")
        for node in ast.walk(tree):
            if isinstance(node, ast.keyword) and node.arg == "allow_pickle":
                if not (isinstance(node.value, ast.Constant) and node.value.value is False):
                    out.append(f"{rel}:{node.value.lineno}: allow_pickle other than False")
    return out


def test_no_pickle_and_heavy_dependencies_in_their_homes() -> None:
    assert violations(KINAC) == []


@pytest.mark.parametrize(
    ("rel", "text", "needle"),
    [
        ("kinac/rules/x.py", "def f():\n    import pickle\n", "imports pickle"),
        ("kinac/run2.py", "import numpy as np\nnp.load('a', allow_pickle=True)\n", "allow_pickle"),
        ("kinac/check/other.py", "def f():\n    from z3 import Solver\n", "imports z3"),
        ("kinac/check/solver.py", "import z3\n", "at module level"),
        ("kinac/rt/host/t.py", "def f():\n    import torch.nn\n", "no kinac module"),
        ("kinac/api2.py", "def f():\n    from cuda.bindings import driver\n", "imports cuda"),
    ],
)
def test_a_planted_violation_is_caught(tmp_path: Path, rel: str, text: str, needle: str) -> None:
    path = tmp_path / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    (found,) = violations(tmp_path / "kinac")
    assert needle in found and found.startswith(rel), found


def test_the_library_leaves_the_callers_collector_alone(tmp_path: Path) -> None:
    """``kinac.compile`` (and the import of the API) keeps the caller's thresholds; the
    command line's ``main`` raises them (its process exists to compile)."""
    saved = gc.get_threshold()
    try:
        gc.set_threshold(701, 11, 12)
        src = tmp_path / "f.kina"
        src.write_text("(defn f [(x : (tensor f32 [N]))] -> (tensor f32 [N]) x)\n")
        import kinac.api

        kinac.api.compile(src, "f", no_cache=True)
        assert gc.get_threshold() == (701, 11, 12)
        from kinac.cli import main

        assert main(["check", str(src), "--no-cache"]) == 0
        assert gc.get_threshold() == (50_000, 50, 50)
    finally:
        gc.set_threshold(*saved)
