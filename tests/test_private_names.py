"""No kinac module uses another kinac module's underscore names (the style guide: "never cut a
file in two so that private names cross between the halves").

Why a test: a name with a leading underscore says "only this module relies on me", so its
module may change it freely; a second module that imports it breaks that promise silently, and
such imports came back one file split at a time (``kinac/rt`` had ten, of six names, until
2026-12-02e). The scan reads every file under ``kinac/`` with :mod:`ast`: ``from m import _x``
anywhere in a file (lazy imports inside functions included, relative imports resolved, and
``TYPE_CHECKING`` imports too: they tie the modules together just the same) and ``m._x`` where
``m`` names a kinac module. A name used by other modules is part of its module's interface and
gets a public name; a name that only one other module needs moves there.

``KNOWN`` lists the crossings that predate this test outside ``kinac/rt`` (files other areas
own), with who imports each name; it may only shrink: a new crossing fails, and so does an entry
that no longer occurs (remove it when its owner renames the name). ``kinac/rt`` has none.
"""

from __future__ import annotations

import ast
from pathlib import Path

import kinac

KINAC_DIR = Path(kinac.__file__).parent


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def _module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _is_module(name: str, root: Path) -> bool:
    if "." not in name:
        return True  # the package itself
    rel = Path(*name.split(".")[1:])
    return (root / rel).with_suffix(".py").is_file() or (root / rel / "__init__.py").is_file()


def _source(node: ast.ImportFrom, me: str, path: Path) -> str:
    """The absolute module a ``from ... import`` reads (relative levels resolved)."""
    if node.level == 0:
        return node.module or ""
    base = me.split(".") if path.name == "__init__.py" else me.split(".")[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join([*base, *([node.module] if node.module else [])])


def crossings(root: Path) -> set[tuple[str, str]]:
    """``(importer, "module._name")`` for every use of another kinac module's underscore name
    in the package at ``root``."""
    top = root.name
    out: set[tuple[str, str]] = set()
    for path in sorted(root.rglob("*.py")):
        me = _module_name(path, root)
        tree = ast.parse(path.read_text(), str(path))
        modules: dict[str, str] = {}  # local name -> the kinac module it is bound to
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                src = _source(node, me, path)
                if src != top and not src.startswith(top + "."):
                    continue
                for alias in node.names:
                    full = f"{src}.{alias.name}"
                    if _private(alias.name) and src != me:
                        out.add((me, full))
                    elif _is_module(full, root):
                        modules[alias.asname or alias.name] = full
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.name == top or alias.name.startswith(top + "."):
                        # ``import kinac.x.y`` binds ``kinac``; ``import kinac.x.y as m``, ``m``
                        modules[alias.asname or top] = alias.name if alias.asname else top
        for node in ast.walk(tree):
            if not (isinstance(node, ast.Attribute) and _private(node.attr)):
                continue
            chain, value = [], node.value
            while isinstance(value, ast.Attribute):
                chain.append(value.attr)
                value = value.value
            if isinstance(value, ast.Name) and value.id in modules:
                src = ".".join([modules[value.id], *reversed(chain)])
                if src != me and _is_module(src, root):
                    out.add((me, f"{src}.{node.attr}"))
    return out


def _debt(reason: str, names: dict[str, tuple[str, ...]]) -> dict[str, tuple[str, frozenset[str]]]:
    return {name: (reason, frozenset(users)) for name, users in names.items()}


# "module._name" -> (why it is still allowed, the modules that use it)
OWNED_ELSEWHERE = "predates this test, in files another area owns: to be renamed by its owner"
KNOWN: dict[str, tuple[str, frozenset[str]]] = {}


def test_no_module_uses_another_modules_private_names() -> None:
    known = {(user, name) for name, (_, users) in KNOWN.items() for user in users}
    new = sorted(crossings(KINAC_DIR) - known)
    assert not new, (
        "these modules use another kinac module's underscore names: give the name a public one "
        "(used by several modules) or move it where it is used:\n"
        + "\n".join(f"  {user}: {name}" for user, name in new)
    )


def test_known_crossings_still_occur() -> None:
    """The allow-list only shrinks: an entry whose name was made public or moved goes."""
    found = crossings(KINAC_DIR)
    known = {(user, name) for name, (_, users) in KNOWN.items() for user in users}
    gone = sorted(known - found)
    assert not gone, "fixed, so remove from KNOWN:\n" + "\n".join(f"  {u}: {n}" for u, n in gone)


def test_runtime_has_no_allowed_crossings() -> None:
    """``kinac/rt`` (cuda, host, comm) is clean: nothing there is allow-listed."""
    assert all(reason for reason, _ in KNOWN.values())
    assert not [n for n, (_, users) in KNOWN.items() if n.startswith("kinac.rt.")]
    assert not [u for _, users in KNOWN.values() for u in users if u.startswith("kinac.rt.")]


def test_scan_sees_every_form(tmp_path: Path) -> None:
    """The scan catches what it must on a planted package (the real files are never edited):
    a top-level, a lazy, a relative and a ``TYPE_CHECKING`` import of a private name, and a
    private attribute of an imported module; a module's own names and dunders are fine."""
    pkg = tmp_path / "kinac"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "sub" / "__init__.py").write_text("")
    (pkg / "sub" / "a.py").write_text("_x = 1\n_y = 2\n__all__ = ['_x']\n")
    (pkg / "sub" / "b.py").write_text(
        "from __future__ import annotations\n"
        "from typing import TYPE_CHECKING\n"
        "from kinac.sub.a import _x, __all__\n"
        "from kinac.sub import a as mod\n"
        "import kinac.sub.a as alias\n"
        "import kinac.sub.a\n"
        "if TYPE_CHECKING:\n"
        "    from kinac.sub.a import _t\n"
        "_own = 3\n"
        "def f() -> int:\n"
        "    from .a import _y\n"
        "    from kinac.sub.b import _own\n"
        "    return _x + _y + _own + mod._z + alias._w + kinac.sub.a._v + mod.__name__.count('_')\n"
    )
    assert crossings(pkg) == {
        ("kinac.sub.b", f"kinac.sub.a.{n}") for n in ("_x", "_y", "_t", "_z", "_w", "_v")
    }
