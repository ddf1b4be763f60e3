"""One home per shared constant (``docs/architecture.md``, "Layers"): a fact every layer needs
(``GATHER_OOB``, ``ITEMSIZE``, ``FLOAT_DTYPES``, ``NVPTX_TRIPLE``) is defined once, its value is
written nowhere else under any name, and no module spells out the list of float dtypes or of
all dtypes again (a pydantic ``Literal[...]`` must: exempt). A copy drifts.

Read with ``ast`` from every kinac module (split from ``tests/test_layers.py``, which checks
the import graph).
"""

from __future__ import annotations

import ast
from pathlib import Path

from test_layers import modules_of

from kinac.rules.codeid import KINAC_DIR, module_file

# A fact every layer needs has one home; a copy elsewhere (under any name) drifts.
HOMES = {
    "GATHER_OOB": "kinac.artifacts.host",
    "ITEMSIZE": "kinac.dtypes",
    "FLOAT_DTYPES": "kinac.dtypes",
    "NVPTX_TRIPLE": "kinac.codegen.target",
}
VALUES = {  # literal values that may only appear in their home's definition
    repr(("f64", "f32", "f16", "bf16")): "kinac.dtypes",
    repr({"f64": 8, "f32": 4, "f16": 2, "bf16": 2, "i64": 8, "i32": 4, "bool": 1}): "kinac.dtypes",
    repr("nvptx64-nvidia-cuda"): "kinac.codegen.target",
}


def constant_definitions(root: Path = KINAC_DIR) -> list[tuple[str, str, str]]:
    """``(module, name, repr of the literal value or "")`` for every top-level assignment."""
    out = []
    for mod in modules_of("kinac", root):
        path = module_file(mod, root)
        assert path is not None
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, ast.Assign | ast.AnnAssign) and node.value is not None:
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                try:
                    value = repr(ast.literal_eval(node.value))
                except ValueError:
                    value = ""
                out += [(mod, t.id, value) for t in targets if isinstance(t, ast.Name)]
    return out


def test_shared_constants_have_one_home() -> None:
    defs = constant_definitions()
    misplaced = [
        f"{mod}.{name}"
        for mod, name, value in defs
        if HOMES.get(name, mod) != mod or VALUES.get(value, mod) != mod
    ]
    assert misplaced == []
    for name, home in HOMES.items():
        assert (home, name) in {(m, n) for m, n, _ in defs}, f"{name} is not defined in {home}"


def dtype_lists(root: Path = KINAC_DIR) -> list[str]:
    """``module:line`` of every literal tuple, list or set spelling the float dtypes or all the
    dtypes, outside :mod:`kinac.dtypes` (a ``Literal[...]`` type must spell them: exempt)."""
    floats, every = (
        {"f64", "f32", "f16", "bf16"},
        {"f64", "f32", "f16", "bf16", "i64", "i32", "bool"},
    )
    found = []
    for mod in modules_of("kinac", root):
        path = module_file(mod, root)
        assert path is not None
        tree = ast.parse(path.read_text())
        exempt = {
            id(n.slice)
            for n in ast.walk(tree)
            if isinstance(n, ast.Subscript)
            and isinstance(n.value, ast.Name)
            and n.value.id == "Literal"
        }
        for n in ast.walk(tree):
            if isinstance(n, ast.Tuple | ast.List | ast.Set) and id(n) not in exempt:
                values = {e.value for e in n.elts if isinstance(e, ast.Constant)}
                if (
                    len(values) == len(n.elts)
                    and values in (floats, every)
                    and mod != "kinac.dtypes"
                ):
                    found.append(f"{mod}:{n.lineno}")
    return found


def test_dtype_lists_are_not_spelled_out_again() -> None:
    assert dtype_lists() == []
