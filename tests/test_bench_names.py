"""No bench script may carry the name of a package kinac or its benches import.

Why: several tests put ``benches/`` at the head of ``sys.path`` to import bench helpers, and a
script run as ``python3 benches/x.py`` has its own directory there too. A ``benches/nccl.py``
then shadowed nccl4py's ``nccl`` package, and every NCCL test on the H200 skipped with "'nccl' is
not a package" (2026-12-01). The list is the top-level import names of the dependencies in
pyproject.toml (and the reference libraries the benches import), so CI catches a bad name without
the package installed.
"""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# top-level import names of kinac's dependencies, its extras and the benches' references
PACKAGE_NAMES = {
    "pydantic", "z3", "xdsl", "llvmlite", "cuda", "diskcache", "rich", "pytest", "watchfiles",
    "hypothesis", "nvmath", "nccl", "prometheus_client", "nvtx", "torch", "numpy", "triton",
    "kinac", "cupy", "jax", "matplotlib",
}  # fmt: skip


def test_no_bench_is_named_for_a_package() -> None:
    stems = {p.stem for p in (ROOT / "benches").glob("*.py")} | {
        p.name for p in (ROOT / "benches").iterdir() if p.is_dir()
    }
    assert not stems & PACKAGE_NAMES, f"rename benches/{sorted(stems & PACKAGE_NAMES)}"
