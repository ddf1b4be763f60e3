"""docs/architecture.md, "Workspaces": two stated invariants no test enforced.

* ``kina.toml`` is validated with pydantic inside the ``config`` query, so pydantic is imported
  only when the file changed: a no-op build in a fresh process never imports it (and one after
  an edit of ``kina.toml`` does, which shows the check can fail).
* The cache directory is chosen by ``--cache-dir``, then ``KINAC_CACHE_DIR``, then
  ``workspace.cache_dir``, then ``WORKSPACE/.kinac-cache``: each level over every later one.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from cli_support import kinac_process

from kinac.cli import main
from kinac.session import choose_cache_dir, locate

IDENTITY = "(defn f [(x : (tensor f32 [N]))] -> (tensor f32 [N]) x)\n"


def _imports_pydantic(ws: Path, cache: Path) -> bool:
    p = kinac_process(
        "build",
        str(ws),
        "--no-server",
        "--cache-dir",
        str(cache),
        env={"PYTHONPROFILEIMPORTTIME": "1"},
    )
    assert p.returncode == 0 and "built 1 file" in p.stderr, p.stderr
    return any(line.rsplit("|", 1)[-1].strip() == "pydantic" for line in p.stderr.splitlines())


def test_pydantic_is_imported_only_when_kina_toml_changed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ws, cache = tmp_path / "ws", tmp_path / "cache"
    ws.mkdir()
    (ws / "kina.toml").write_text('[workspace]\nname = "p"\n')
    (ws / "a.kina").write_text(IDENTITY)
    assert main(["build", str(ws), "--no-server", "--cache-dir", str(cache)]) == 0  # cold
    capsys.readouterr()
    assert not _imports_pydantic(ws, cache)  # a no-op
    (ws / "kina.toml").write_text('[workspace]\nname = "p"  # edited\n')
    assert _imports_pydantic(ws, cache)


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX paths")
def test_cache_dir_precedence_at_every_level(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "a.kina").write_text(IDENTITY)
    monkeypatch.delenv("KINAC_CACHE_DIR", raising=False)
    assert choose_cache_dir(locate(ws), None) == ws.resolve() / ".kinac-cache"
    (ws / "kina.toml").write_text('[workspace]\nname = "p"\ncache_dir = "from-toml"\n')
    assert choose_cache_dir(locate(ws), None) == ws.resolve() / "from-toml"
    monkeypatch.setenv("KINAC_CACHE_DIR", str(tmp_path / "from-env"))
    assert choose_cache_dir(locate(ws), None) == tmp_path / "from-env"
    assert choose_cache_dir(locate(ws), str(tmp_path / "flag")) == tmp_path / "flag"
    # a file inside the workspace uses the workspace's setting
    monkeypatch.delenv("KINAC_CACHE_DIR")
    assert choose_cache_dir(locate(ws / "a.kina"), None) == ws.resolve() / "from-toml"
