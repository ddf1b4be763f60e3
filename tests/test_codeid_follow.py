"""Code identity follows a name to where it is defined (lead's list, 2026-12-02e).

Editing only ``kinac/check/callsite.py`` (K0203's help) left ``check_defn``'s memos valid: the
scan stopped at ``from kinac.check import check_defn`` (a re-export in ``check/__init__``), so
``infer.check_defn`` and the lazy ``from kinac.check.callsite import check_call`` inside the
checker were never read, and ``kinac check`` kept printing the old help from the cache.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from kinac.rules.codeid import KINAC_DIR, CodeIndex, FileScan
from kinac.rules.query import REGISTRY

QUERY_SKIP = [(q.fn.__module__, q.fn.__name__) for q in REGISTRY.values()]
CALLSITE_HELP = "pass arguments in declared order, dim parameters included"


def _edited(rel: str, old: str, new: str) -> CodeIndex:
    """An index reading ``rel`` as if ``old`` were ``new`` (no file is edited)."""
    target = KINAC_DIR / rel
    text = target.read_text()
    assert old in text, f"{old!r} not in {rel}"
    return CodeIndex(
        read=lambda p: text.replace(old, new, 1).encode() if p == target else p.read_bytes()
    )


def test_check_defn_covers_the_lazily_imported_callsite() -> None:
    base = CodeIndex()
    closure = base.closure("kinac.pipeline", "check_defn", QUERY_SKIP)
    assert {"kinac.check.infer", "kinac.check.callsite"} <= set(closure)
    edited = _edited("check/callsite.py", CALLSITE_HELP, "pass every argument")
    key = ("kinac.pipeline", "check_defn", QUERY_SKIP)
    assert edited.identity(*key) != base.identity(*key)
    assert edited.identity("kinac.pipeline", "parse", QUERY_SKIP) == base.identity(
        "kinac.pipeline", "parse", QUERY_SKIP
    )  # still precise: the reader does not run the checker


def _fake(tmp_path: Path, files: dict[str, str]) -> Path:
    root = tmp_path / "kinac"
    for rel, text in {"__init__.py": "", **files}.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return root


FAKE = {
    # the query module: a re-export, a submodule imported by name, a dotted use
    "q.py": (
        "from kinac.pkg import run\n"
        "from kinac.pkg import sub\n"
        "import kinac.deep.inner\n\n"
        "def query():\n    return run()\n\n"
        "def dotted():\n    return kinac.deep.inner.go()\n\n"
        "def whole():\n    return sub\n"
    ),
    "pkg/__init__.py": "from kinac.pkg.impl import run\n",
    "pkg/impl.py": "def run():\n    from kinac.pkg.lazy import helper\n    return helper()\n",
    "pkg/lazy.py": "def helper():\n    return 1\n",
    "pkg/sub.py": "X = 1\n",
    "deep/__init__.py": "",
    "deep/inner.py": "def go():\n    from kinac.deep.far import f\n    return f()\n\ndef other():\n    import kinac.never\n",
    "deep/far.py": "def f():\n    return 2\n",
    "never.py": "",
}


def test_reexports_lazy_imports_submodules_and_dotted_uses(tmp_path: Path) -> None:
    root = _fake(tmp_path, FAKE)
    index = CodeIndex(root=root)
    query = index.closure("kinac.q", "query")
    assert {"kinac.pkg", "kinac.pkg.impl", "kinac.pkg.lazy"} <= set(query)
    assert "kinac.pkg.sub" not in query  # imported by name, used only by ``whole``
    assert "kinac.pkg.sub" in index.closure("kinac.q", "whole")
    dotted = index.closure("kinac.q", "dotted")
    assert {"kinac.deep.inner", "kinac.deep.far"} <= set(dotted)
    assert "kinac.never" not in dotted  # inner.other does not run
    before = index.identity("kinac.q", "query")
    (root / "pkg/lazy.py").write_text("def helper():\n    return 3\n")
    os.utime(root / "pkg/lazy.py", ns=(1, 1))  # a new stat: the index rescans it
    assert CodeIndex(root=root).identity("kinac.q", "query") != before


def test_scans_by_older_rules_are_redone(tmp_path: Path) -> None:
    """A persisted table from before these rules would keep the old, incomplete closures."""
    root = _fake(tmp_path, FAKE)
    first = CodeIndex(root=root)
    want = first.closure("kinac.q", "query")
    old: dict[str, list[object]] = {
        rel: [m, c, s, [1, *scan.to_doc()[1:]]]  # scans by the rules of version 1
        for rel, (m, c, s, scan) in first._table.items()
    }
    old["q.py"][3] = [1, "0" * 32, {"query": [[], []]}, {}]  # as if query imported nothing
    second = CodeIndex(root=root)
    second.seed({}, lambda: old)
    assert second.closure("kinac.q", "query") == want
    assert (
        FileScan.from_doc(first._table["q.py"][3].to_doc()).units == first._table["q.py"][3].units
    )


def test_kinac_check_shows_an_edited_help_after_a_cached_check(tmp_path: Path) -> None:
    """End to end, as the user saw it: a copy of kinac, checked, edited, checked again."""
    copy = tmp_path / "site"
    shutil.copytree(KINAC_DIR, copy / "kinac", ignore=shutil.ignore_patterns("__pycache__"))
    src = tmp_path / "main.kina"
    src.write_text(
        "(defn f [(N : dim) (x : (tensor f32 [N]))] -> (tensor f32 [N])\n  (add x x))\n"
        "(defn g [(x : (tensor f32 [4]))] -> (tensor f32 [4])\n  (f x))\n"
    )
    env = {
        **os.environ,
        "PYTHONPATH": str(copy),
        "KINAC_CACHE_DIR": str(tmp_path / "cache"),
        "PYTHONDONTWRITEBYTECODE": "1",
    }
    env.pop("KINAC_SERVER", None)

    def check() -> str:
        out = subprocess.run(
            [sys.executable, "-m", "kinac", "check", str(src), "--no-server"],
            capture_output=True,
            text=True,
            env=env,
            cwd=tmp_path,
            check=False,
        )
        assert "K0203" in out.stdout + out.stderr, out.stdout + out.stderr
        return out.stdout + out.stderr

    assert "pass its value too" in check()
    callsite = copy / "kinac/check/callsite.py"
    text = callsite.read_text()
    assert "pass {'its value' if" in text
    callsite.write_text(text.replace("pass {'its value' if", "give {'its value' if", 1))
    again = check()
    assert "give its value too" in again and "pass its value too" not in again
