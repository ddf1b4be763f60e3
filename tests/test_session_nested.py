"""``kinac check DIR`` on a folder whose ``.kina`` files all sit in nested workspaces (folders
with their own ``kina.toml``, which a listing skips): the error said "it has no kina.toml and
no .kina files", untrue and with no way forward. It now names the nested workspaces and the
command to run on each (kinac/session.py, ``not_a_workspace``)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from kinac.cli import main

IDENTITY = "(defn f [(x : (tensor f32 [N]))] -> (tensor f32 [N]) x)\n"


def _nested(root: Path, rel: str, files: int = 1) -> None:
    d = root / rel
    d.mkdir(parents=True)
    (d / "kina.toml").write_text(f'[workspace]\nname = "{d.name}"\n')
    for i in range(files):
        (d / f"m{i}.kina").write_text(IDENTITY)


def _error(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    assert main(list(argv)) == 2
    (line,) = [x for x in capsys.readouterr().err.splitlines() if x.startswith("kinac: ")]
    return line


def test_files_only_in_a_nested_workspace_name_it_and_the_command(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    _nested(tmp_path / "d", "examples/sub")
    assert _error(capsys, "check", "d", "--no-cache") == (
        "kinac: error: d is not a kinac workspace: it has no kina.toml, and its 1 .kina file "
        "belongs to the nested workspace d/examples/sub, which has its own kina.toml; run "
        "`kinac check d/examples/sub`, or remove its kina.toml to read its files as d's"
    )
    # the command the user ran is the one suggested; nothing was created in the folder
    assert "run `kinac build d/examples/sub`" in _error(capsys, "build", "d", "--no-cache")
    assert sorted(os.listdir(tmp_path / "d")) == ["examples"]


def test_several_nested_workspaces_are_each_named(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    _nested(tmp_path / "d", "a", files=2)
    _nested(tmp_path / "d", "b/c")
    assert _error(capsys, "check", "d", "--no-cache") == (
        "kinac: error: d is not a kinac workspace: it has no kina.toml, and its 3 .kina files "
        "belong to 2 nested workspaces (d/a, d/b/c), each with its own kina.toml; run "
        "`kinac check d/a`, `kinac check d/b/c` (one per workspace), or remove a nested "
        "kina.toml to read that workspace's files as d's"
    )


def test_a_folder_with_nothing_keeps_the_plain_message(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert _error(capsys, "check", str(tmp_path), "--no-cache") == (
        f"kinac: error: {tmp_path} is not a kinac workspace: it has no kina.toml and no .kina "
        "files (give a workspace directory or a .kina file)"
    )


def test_the_suggestion_fits_the_command(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """``kinac cache stats d`` suggests ``kinac cache stats d/sub``; ``kinac run`` and the
    Python API (which take more than a path) name the folder to give instead."""
    import kinac
    from kinac.errors import KinaUsageError

    monkeypatch.chdir(tmp_path)
    _nested(tmp_path / "d", "sub")
    assert "run `kinac cache stats d/sub`, or" in _error(capsys, "cache", "stats", "d")
    assert "; give d/sub instead, or remove its kina.toml" in _error(capsys, "run", "d", "f")
    with pytest.raises(KinaUsageError, match="give d/sub instead"):
        kinac.compile("d", "f", no_cache=True)
    assert sorted(os.listdir(tmp_path / "d")) == ["sub"]


def test_a_workspace_whose_files_all_sit_in_nested_workspaces_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """With its own kina.toml the folder is a workspace, and it read nothing: "checked 0
    files: no errors" alone hid where the files went."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "e").mkdir()
    (tmp_path / "e" / "kina.toml").write_text('[workspace]\nname = "e"\n')
    _nested(tmp_path / "e", "sub", files=2)
    for command in ("check", "build"):
        assert main([command, "e", "--no-cache", "--no-server"]) == 0
        err = capsys.readouterr().err
        assert (
            "kinac: warning: this workspace reads no .kina file: the 2 .kina files below it "
            "belong to the nested workspace e/sub, which has its own kina.toml; give that "
            "folder to kinac instead"
        ) in err, err
    for f in (tmp_path / "e" / "sub").glob("*.kina"):
        f.unlink()
    assert main(["check", "e", "--no-cache"]) == 0
    assert "warning" not in capsys.readouterr().err  # an empty new workspace: nothing to say
