"""The library guide's own commands build and test the example library (examples/normlib).

Why: docs/library-guide.md promises that every command in it runs as written from the
repository root. This test extracts its ``console`` blocks (lines ``$ CMD``) and its ``python``
blocks and runs them; ``python gpu`` blocks run only under ``-m gpu`` on a GPU machine.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
GUIDE = ROOT / "docs" / "library-guide.md"


def blocks(info: str) -> list[str]:
    """The bodies of the fenced blocks whose info string is exactly ``info``."""
    return re.findall(rf"^```{re.escape(info)}\n(.*?)^```$", GUIDE.read_text(), re.S | re.M)


def _commands() -> list[str]:
    cmds = [ln[2:] for b in blocks("console") for ln in b.splitlines() if ln.startswith("$ ")]
    assert cmds, "the guide has no console commands"
    return cmds


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    return env


def test_the_guide_names_every_example_file() -> None:
    text = GUIDE.read_text()
    files = [
        p.relative_to(ROOT / "examples" / "normlib").as_posix()
        for p in (ROOT / "examples" / "normlib").rglob("*")
        if p.is_file() and ".kinac-cache" not in p.parts and "__pycache__" not in p.parts
    ]
    for f in files:
        assert f in text, f"docs/library-guide.md does not mention examples/normlib/{f}"


@pytest.fixture(scope="module")
def fresh_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One cache for the guide's commands, empty at the first (as on a fresh machine)."""
    return tmp_path_factory.mktemp("guide-cache")


@pytest.mark.parametrize("cmd", _commands())
def test_guide_command_runs_as_written(cmd: str, fresh_cache: Path) -> None:
    env = _env()
    env["KINAC_CACHE_DIR"] = str(fresh_cache)
    r = subprocess.run(
        cmd, shell=True, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300
    )
    assert r.returncode == 0, f"$ {cmd}\n{r.stdout}\n{r.stderr}"
    assert "Traceback" not in r.stderr


@pytest.mark.parametrize("k", range(len(blocks("python"))))
def test_guide_python_block_runs(k: int, fresh_cache: Path) -> None:
    env = _env()
    # the guide's cache: what its commands (pytest included) compiled is reused, and nothing
    # is written into the checkout's examples/normlib/.kinac-cache
    env["KINAC_CACHE_DIR"] = str(fresh_cache)
    r = subprocess.run(
        [sys.executable, "-c", blocks("python")[k]],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode == 0, blocks("python")[k] + "\n" + r.stdout + r.stderr


@pytest.mark.gpu
@pytest.mark.parametrize("k", range(len(blocks("python gpu"))))
def test_guide_gpu_block_runs(k: int) -> None:
    from kinac.rt import cuda

    if not cuda.available():
        pytest.skip(cuda.unavailable_reason())
    r = subprocess.run(
        [sys.executable, "-c", blocks("python gpu")[k]],
        cwd=ROOT,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode == 0, blocks("python gpu")[k] + "\n" + r.stdout + r.stderr
