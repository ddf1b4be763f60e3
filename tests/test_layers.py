"""The layers of kinac, enforced from the import graph (``docs/architecture.md`` states them).

Why a test: a layer rule written only in prose erodes one convenient import at a time (the host
runtime used to compile graphs itself, importing the IR passes and the concrete graph). The
graph is read with the engine's own scanner (:class:`kinac.rules.codeid.CodeIndex`, which
derives every query's code identity from it), so lazy imports inside functions and
``importlib.import_module`` calls count, and ``TYPE_CHECKING`` imports do not. For each module of
a layer the closure is everything running any of its code may import, transitively. Each rule
is also shown to fail: the same check runs on a copy of the tree with one violating import
planted (the real files are never edited).
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

import pytest

from kinac.rules.codeid import ALL, KINAC_DIR, CodeIndex, module_file


@dataclass(frozen=True)
class Layer:
    """A package and what its code may import outside itself: ``allowed`` prefixes (an
    allow-list) or, where that is the clearer contract, ``forbidden`` prefixes."""

    package: str
    why: str
    allowed: tuple[str, ...] = ()
    forbidden: tuple[str, ...] = ()
    exact: tuple[str, ...] = ()  # allowed as themselves, not their submodules (a package init)

    def breaks(self, module: str) -> bool:
        if module == self.package or module.startswith(self.package + ".") or module in self.exact:
            return False
        under = lambda p: module == p or module.startswith(p + ".")  # noqa: E731
        if self.forbidden:
            return any(under(p) for p in self.forbidden)
        return not any(under(p) for p in self.allowed)


ENGINE = ("kinac.rules",)
# ``kinac`` (the top package), ``kinac.errors`` (the exception types) and ``kinac.dtypes`` (dtype
# names and sizes) import nothing heavy and are shared by every layer.
BASE = ("kinac", "kinac.errors", "kinac.dtypes")

LAYERS = (
    Layer(
        "kinac.rules",
        "the engine knows no language: it learns records by registration, code by scanning",
        allowed=("kinac.errors",),
    ),
    Layer(
        "kinac.prims",
        "one definition per primitive, read by every stage, so it imports no stage",
        allowed=("kinac.errors",),
    ),
    Layer(
        "kinac.artifacts",
        "plain records between the compiler and the runtime: the codec only",
        allowed=(*ENGINE, "kinac.errors"),
    ),
    Layer(
        "kinac.rt",
        "the runtime executes artifacts and loads objects; it never reads, checks or lowers "
        "a program. From codegen it uses only the llvmlite loader (kinac.codegen.llvm, which "
        "also compiles the runtime's own LLVM IR: the task pool) and hand-written test PTX",
        allowed=(
            *ENGINE,
            "kinac.errors",
            "kinac.ice",
            "kinac.artifacts",
            "kinac.codegen.llvm",
            "kinac.codegen.target",
            "kinac.codegen.ptx_testkernels",
        ),
        exact=("kinac.codegen",),
    ),
    Layer(
        "kinac.check",
        "the checker ends at the concrete Graph: no lowering, code generation or runtime",
        forbidden=("kinac.ir", "kinac.codegen", "kinac.rt", "kinac.artifacts"),
    ),
    Layer(
        "kinac.reader",
        "reading knows only the AST and diagnostics",
        forbidden=("kinac.check", "kinac.tir", "kinac.ir", "kinac.codegen", "kinac.rt"),
    ),
    Layer(
        "kinac.shard",
        "sharding propagation sits between specialisation and lowering: it reads the concrete "
        "graph and never lowers, generates code or runs; the one artifact it builds is the "
        "per-device program record (kinac.artifacts.sharded), cut into graphs lowered elsewhere",
        forbidden=(
            "kinac.ir",
            "kinac.codegen",
            "kinac.rt",
            "kinac.artifacts.host",
            "kinac.artifacts.gpu",
        ),
    ),
    Layer(
        "kinac.grad",
        "differentiation transforms the concrete graph (before sharding and lowering): it reads "
        "the graph and the primitives' VJP rules and never lowers, generates code or runs",
        forbidden=("kinac.ir", "kinac.codegen", "kinac.rt", "kinac.artifacts", "kinac.shard"),
    ),
    Layer(
        "kinac.tir",
        "the concrete graph and its reference evaluator sit below lowering and checking",
        forbidden=("kinac.check", "kinac.ir", "kinac.codegen", "kinac.rt"),
    ),
)


def modules_of(package: str, root: Path) -> list[str]:
    """Every module of ``package`` under the source tree ``root`` (a ``kinac`` directory)."""
    base = root.joinpath(*package.split(".")[1:])
    out = []
    for f in sorted(base.rglob("*.py")):
        parts = ["kinac", *f.relative_to(root).with_suffix("").parts]
        out.append(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    return out


def imports_of(index: CodeIndex, module: str) -> set[str]:
    """Every kinac module that running any code of ``module`` may import: the engine's closure
    (parent packages' ``__init__`` included), plus submodules named by ``from pkg import sub``
    (importing them runs their top level even when the name is never used, which a code
    identity need not count but a layer must)."""
    found = set(index.closure(module, ALL))
    todo = list(found)
    while todo:
        scan = index.scan(todo.pop())
        for base, name in scan.aliases.values() if scan is not None else ():
            sub = f"{base}.{name}"
            if name is not None and sub not in found and index.scan(sub) is not None:
                new = set(index.closure(sub)) - found
                found |= new
                todo += new
    return found


def violations(layer: Layer, root: Path = KINAC_DIR) -> list[str]:
    """``module -> imported`` for every import of ``layer`` that breaks its rule."""
    index = CodeIndex(root)
    found = []
    for mod in modules_of(layer.package, root):
        for dep in sorted(imports_of(index, mod)):
            if dep not in BASE and layer.breaks(dep):
                found.append(f"{mod} -> {dep}")
    return found


@pytest.mark.parametrize("layer", LAYERS, ids=[layer.package for layer in LAYERS])
def test_layer_holds(layer: Layer) -> None:
    assert violations(layer) == [], layer.why


def test_stage_packages_use_only_the_codec_of_the_engine() -> None:
    """Stages build ``@record`` values; the engine runs them (``kinac/pipeline.py``), they never
    call it: a direct import of ``kinac.rules`` from a stage is the codec or nothing."""
    index = CodeIndex()
    bad = []
    for package in (
        "reader",
        "check",
        "tir",
        "ir",
        "codegen",
        "rt",
        "prims",
        "artifacts",
        "diag",
        "shard",
        "grad",
    ):
        for mod in modules_of(f"kinac.{package}", KINAC_DIR):
            scan = index.scan(mod)
            assert scan is not None, mod
            for imported, _ in scan.units.values():
                bad += [
                    f"{mod} -> {m}"
                    for m in imported
                    if m.startswith("kinac.rules") and m != "kinac.rules.codec"
                ]
    assert bad == []


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of kinac's sources to plant violations in."""
    root = tmp_path_factory.mktemp("layers") / "kinac"
    shutil.copytree(KINAC_DIR, root, ignore=shutil.ignore_patterns("__pycache__", "*.kina", "*.md"))
    return root


PLANTS = [
    # (layer, module to edit, planted code, the edge the check must report)
    ("kinac.rules", "kinac.rules.query", "import kinac.check.sig\n", "kinac.check.sig"),
    (
        "kinac.rt",
        "kinac.rt.host.entry",
        "def _lazy():\n    from kinac.ir import lower_graph\n",
        "kinac.ir",
    ),
    (
        "kinac.rt",
        "kinac.rt.cuda.blas",
        "import importlib\n_g = importlib.import_module('kinac.tir.graph')\n",
        "kinac.tir.graph",
    ),
    (
        "kinac.rt",
        "kinac.rt.host.pool",
        "def _name(n):\n    import importlib\n    return importlib.import_module(n)\n"
        "_PTX = 'kinac.codegen.ptx'\n",
        "kinac.codegen.ptx",
    ),
    ("kinac.rt", "kinac.rt.cuda.module", "from kinac.codegen import ptx\n", "kinac.codegen.ptx"),
    ("kinac.check", "kinac.check.fold", "from kinac.codegen import llvm\n", "kinac.codegen.llvm"),
    ("kinac.prims", "kinac.prims.defs", "import kinac.check.types as t\n", "kinac.check.types"),
    (
        "kinac.grad",
        "kinac.grad.builder",
        "def _lazy():\n    import kinac.ir.from_graph\n",
        "kinac.ir",
    ),
]


@pytest.mark.parametrize(("package", "module", "code", "edge"), PLANTS)
def test_a_planted_import_is_caught(
    tree: Path, package: str, module: str, code: str, edge: str
) -> None:
    layer = next(layer for layer in LAYERS if layer.package == package)
    path = module_file(module, tree)
    assert path is not None
    original = path.read_text()
    try:
        assert violations(layer, tree) == []
        path.write_text(original + "\n\n" + code)
        assert f"{module} -> {edge}" in violations(layer, tree)
    finally:
        path.write_text(original)


def test_a_type_checking_import_is_not_a_dependency(tree: Path) -> None:
    """Annotations cost nothing at run time, so they do not break a layer."""
    layer = next(layer for layer in LAYERS if layer.package == "kinac.rt")
    path = module_file("kinac.rt.host.arrays", tree)
    assert path is not None
    original = path.read_text()
    try:
        path.write_text(
            original + "\n\nfrom typing import TYPE_CHECKING\n"
            "if TYPE_CHECKING:\n    from kinac.tir.graph import Graph\n"
        )
        assert violations(layer, tree) == []
    finally:
        path.write_text(original)


# -- what loading the pipeline costs ---------------------------------------------------------

HEAVY_AT_LOAD = (
    "kinac.check",  # the checker (its Z3 solver, its primitive tables)
    "kinac.shard",  # sharding (imports the checker's factor rules)
    "kinac.ir",
    "kinac.codegen",
    "kinac.rt",
    "z3",
    "xdsl",
    "llvmlite",
    "cuda",
    "numpy",
    "torch",
)
"""What ``import kinac.pipeline`` must not load: a no-op build and ``kinac --help`` pay for every
module the pipeline imports at its top level (and its stage modules'), so each stage imports
these inside the query that needs them."""


def heavy_modules_after(statement: str, root: Path) -> list[str]:
    """The modules of :data:`HEAVY_AT_LOAD` loaded by ``statement`` in a fresh interpreter whose
    ``kinac`` is the tree ``root``."""
    import subprocess
    import sys

    code = (
        f"import sys\n{statement}\n"
        f"print('\\n'.join(sorted(m for m in sys.modules if m.split('.')[0] in {HEAVY_AT_LOAD!r}"
        f" or any(m == p or m.startswith(p + '.') for p in {HEAVY_AT_LOAD!r}))))\n"
    )
    env = {k: v for k, v in __import__("os").environ.items() if k != "PYTHONPATH"}
    out = subprocess.run(
        [sys.executable, "-c", code],
        cwd=root.parent,
        env={**env, "PYTHONPATH": str(root.parent)},
        capture_output=True,
        text=True,
        check=True,
    )
    return out.stdout.split()


def test_loading_the_pipeline_imports_no_stage() -> None:
    """``kinac.pipeline`` and the ``kinac/pipeline_*.py`` stage modules it registers import the
    checker, sharding, xDSL, llvmlite, CUDA and numpy lazily (``pipeline_grad_shard`` used to
    import the shard package, hence the whole checker, at load: half of the pipeline's
    import time)."""
    assert heavy_modules_after("import kinac.pipeline", KINAC_DIR) == []


def test_an_eager_stage_import_in_the_pipeline_is_caught(tree: Path) -> None:
    path = module_file("kinac.pipeline_grad_shard", tree)
    assert path is not None
    original = path.read_text()
    try:
        path.write_text(original + "\n\nfrom kinac.shard.model import ShardPlan  # noqa\n")
        found = heavy_modules_after("import kinac.pipeline", tree)
        assert "kinac.shard.model" in found and "kinac.check" in found
    finally:
        path.write_text(original)
