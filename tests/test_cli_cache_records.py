"""A cached record decodes in a process that has not imported its module yet.

``kinac build --target cuda`` caches ``gpu_lowered`` (a ``GpuLoweredEntry``); a later
``kinac run --target cuda`` reads it before anything imports ``kinac.artifacts.gpu``. On a
machine without a GPU this warned "cache entry ... does not decode (unknown record tag
'artifacts.gpu.GpuLoweredEntry')" and recomputed. The codec now imports a tag's module before
decoding; this reproduces the user's two commands, no GPU needed.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from cli_support import kinac_process

ROOT = Path(__file__).resolve().parent.parent


def test_gpu_build_then_gpu_run_reuses_the_cached_gpu_lowering(tmp_path: Path) -> None:
    ws = tmp_path / "mlp"
    shutil.copytree(ROOT / "workspaces" / "mlp", ws, ignore=shutil.ignore_patterns(".kinac-cache"))
    cache = str(tmp_path / "cache")
    built = kinac_process("build", str(ws), "--target", "cuda", "--cache-dir", cache)
    assert built.returncode == 0, built.stderr
    ran = kinac_process(
        "run", str(ws), "mlp", "--target", "cuda", "--repeat", "1", "--cache-dir", cache
    )
    assert "does not decode" not in ran.stderr and "unknown record tag" not in ran.stderr, (
        ran.stderr
    )
    assert "Traceback" not in ran.stderr
    # with a GPU it runs; without one it says so in one line (exit 1), after reading the cache
    assert ran.returncode == 0 or (
        ran.returncode == 1 and ran.stderr.startswith("kinac: error:")
    ), ran.stderr
