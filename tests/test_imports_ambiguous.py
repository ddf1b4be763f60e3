"""Two imports defining one name (lead's list, 2026-12-02e): a call of it is K0210.

``main.kina`` imported ``a/ops.kina`` and ``b/ops.kina``, both defining ``scale``, and
``(scale x)`` silently used the first import. Now the call is an error whose primary span is
the call and whose secondary spans are the two definitions; the file's own defns still shadow
its imports (docs/language.md, "Names and modules").
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from goldens import compare

GOLDEN = Path(__file__).resolve().parent / "golden" / "imports"
CASE = GOLDEN / "ambiguous"


def _check(ws: Path, tmp_path: Path, *files: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "KINAC_SERVER": "0", "KINAC_CACHE_DIR": str(tmp_path / "cache")}
    return subprocess.run(
        [sys.executable, "-m", "kinac", "check", *files],
        capture_output=True,
        text=True,
        cwd=ws,
        env=env,
        check=False,
    )


def _workspace(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    shutil.copytree(CASE, ws)
    return ws


def test_a_call_of_a_name_two_imports_define_is_k0210(tmp_path: Path) -> None:
    ws = _workspace(tmp_path)
    r = _check(ws, tmp_path, "main.kina")
    assert r.returncode == 1, r.stderr
    compare(GOLDEN / "ambiguous.out", r.stdout, "ambiguous import")
    assert r.stdout.count("error[") == 1  # `shift` is this file's own; `bias` only a's
    assert "main.kina:6:17" in r.stdout  # the use
    assert "a/ops.kina:2" in r.stdout and "b/ops.kina:2" in r.stdout  # both definitions


def test_own_defns_shadow_and_unused_clashes_are_fine(tmp_path: Path) -> None:
    ws = _workspace(tmp_path)
    (ws / "main.kina").write_text(
        '(import "a/ops.kina")\n(import "b/ops.kina")\n\n'
        "(defn f [(x : (tensor f32 [4]))] -> (tensor f32 [4])\n  (bias (shift x)))\n\n"
        "(defn shift [(x : (tensor f32 [4]))] -> (tensor f32 [4])\n  (sub x 1.0))\n"
    )
    r = _check(ws, tmp_path, "main.kina")
    assert r.returncode == 0 and "no errors" in r.stderr and "error[" not in r.stdout, (
        r.stdout + r.stderr
    )


def test_the_shadowing_defn_is_the_one_that_runs(tmp_path: Path) -> None:
    """Values: the file's own `shift` (x - 1) runs, not an import's (x + 1, x + 3)."""
    import numpy as np

    import kinac

    ws = _workspace(tmp_path)
    (ws / "main.kina").write_text(
        '(import "a/ops.kina")\n(import "b/ops.kina")\n\n'
        "(defn f [(x : (tensor f32 [4]))] -> (tensor f32 [4])\n  (shift x))\n\n"
        "(defn shift [(x : (tensor f32 [4]))] -> (tensor f32 [4])\n  (sub x 1.0))\n"
    )
    fn = kinac.compile(str(ws / "main.kina"), "f", target="cpu", cache_dir=str(tmp_path / "c"))
    x = np.arange(4, dtype=np.float32)
    np.testing.assert_array_equal(np.asarray(fn(x)), x - 1.0)
