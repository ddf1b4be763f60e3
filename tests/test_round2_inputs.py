"""Round 2 of the new-user and random-program findings: command-line and workspace inputs
that were accepted, or reported twice, where a user expects one clear error."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from kinac.cli import main

IDENTITY = "(defn f [(x : (tensor f32 [N]))] -> (tensor f32 [N]) x)\n"


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    rc = main(list(argv))
    got = capsys.readouterr()
    return rc, got.out + got.err


def test_unreadable_source_says_cannot_read_once(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A source that vanished (a dangling link) said "cannot read `gone.kina`: cannot read it:
    ..." (3225622 removed the same repetition for kina.toml)."""
    (tmp_path / "a.kina").write_text(IDENTITY)
    (tmp_path / "gone.kina").symlink_to(tmp_path / "nowhere.kina")
    rc, text = _run(capsys, "check", str(tmp_path), "--no-cache")
    assert rc == 1
    (line,) = [x for x in text.splitlines() if "K0153" in x]
    assert line == "error[K0153]: cannot read `gone.kina`: No such file or directory", line


@pytest.mark.parametrize(
    ("flags", "needle"),
    [
        (["--dims", ",,,"], "--dims takes NAME=VALUE pairs separated by single commas, got ',,,'"),
        (["--dims", "N=2,"], "(an empty pair)"),
        (["--dims", "N=\uff14"], "--dims takes NAME=POSITIVE_INT pairs"),  # full-width 4
        (["--dims", "..b=2x\u0663"], "--dims takes NAME=POSITIVE_INT pairs"),  # Arabic-Indic 3
        (["--dims", "N=4", "--dtypes", ",,"], "--dtypes takes NAME=VALUE pairs separated"),
    ],
)
def test_run_refuses_empty_pairs_and_non_ascii_digits(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], flags: list[str], needle: str
) -> None:
    """``--dims ,,,`` ran as if no dims were given and ``N=４`` as ``N=4``: both are slips a
    user wants named (``kinac: error:``, exit 2), not silently read."""
    (tmp_path / "f.kina").write_text(IDENTITY)
    rc, text = _run(capsys, "run", str(tmp_path / "f.kina"), "f", "--no-cache", *flags)
    assert rc == 2, text
    (line,) = [x for x in text.splitlines() if x.startswith("kinac: error:")]
    assert needle in line, line


def test_serve_refuses_an_invalid_kina_toml(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``kinac serve`` warmed up and listened over a kina.toml every build then refused; it
    says the configuration error and exits 2, and removes the "starting" marker a build's
    auto-start left (else later builds would wait for it to go stale)."""
    from kinac.server.address import socket_path, starting_marker
    from kinac.server.client import claim_start

    (tmp_path / "a.kina").write_text(IDENTITY)
    (tmp_path / "kina.toml").write_text('[workspace]\nname = "w"\n[target]\nkind = "tpu"\n')
    cache = tmp_path / "cache"
    cache.mkdir()
    sock = socket_path(tmp_path.resolve(), cache.resolve(), os.environ)
    assert claim_start(sock) and starting_marker(sock).exists()  # as KINAC_SERVER=auto does
    argv = ["serve", str(tmp_path), "--cache-dir", str(cache), "--idle-timeout", "0.2"]
    rc, text = _run(capsys, *argv)
    assert rc == 2, text
    (line,) = [x for x in text.splitlines() if x.startswith("kinac: error:")]
    assert line.startswith("kinac: error: kina.toml: target.kind"), line
    assert "listening" not in text
    assert not starting_marker(sock).exists()


@pytest.mark.parametrize(
    ("workspace", "needle"),
    [
        (
            'exclude = ["gen/*"]',
            "kinac: error: kina.toml: entry[0].file: 'gen/a.kina' is excluded by "
            "workspace.exclude[0] = 'gen/*'",
        ),
        (
            'sources = ["src/**"]',
            "kinac: error: kina.toml: entry[0].file: 'gen/a.kina' matches none of "
            "workspace.sources ('src/**')",
        ),
    ],
)
def test_entry_file_the_workspace_does_not_read_is_a_config_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], workspace: str, needle: str
) -> None:
    """An entry whose ``file`` is excluded (or outside ``sources``) was built anyway, so
    ``exclude`` silently meant "unless an entry says otherwise": one of the two settings is a
    slip, and the error names both."""
    (tmp_path / "gen").mkdir()
    (tmp_path / "gen" / "a.kina").write_text(IDENTITY)
    (tmp_path / "b.kina").write_text(IDENTITY.replace("defn f", "defn g"))
    (tmp_path / "kina.toml").write_text(
        f'[workspace]\nname = "w"\n{workspace}\n'
        '[[entry]]\nname = "f"\nfile = "gen/a.kina"\ndims = { N = 4 }\n'
    )
    rc, text = _run(capsys, "check", str(tmp_path), "--no-cache")
    assert rc == 2, text
    assert needle in text, text


def test_a_nested_workspace_is_its_own(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A folder with its own kina.toml below a workspace is a separate workspace: the parent's
    ``**/*.kina`` read its files too (checked twice, under two configurations: here its
    error failed the parent's check). Each builds alone; a plain folder is still included."""
    (tmp_path / "kina.toml").write_text('[workspace]\nname = "parent"\n')
    (tmp_path / "a.kina").write_text(IDENTITY)
    sub = tmp_path / "examples" / "sub"
    sub.mkdir(parents=True)
    (sub / "kina.toml").write_text('[workspace]\nname = "child"\n')
    (sub / "a.kina").write_text(IDENTITY)
    (sub / "deeper").mkdir()
    (sub / "deeper" / "bad.kina").write_text(
        "(defn g [(x : (tensor f32 [N]))] -> (tensor f32 [N]) y)\n"
    )
    (tmp_path / "examples" / "plain.kina").write_text(IDENTITY.replace("defn f", "defn h"))
    rc, text = _run(capsys, "check", str(tmp_path), "--no-cache")
    assert rc == 0 and "checked 2 files: no errors" in text, text  # a.kina, examples/plain.kina
    rc, text = _run(capsys, "check", str(sub), "--no-cache")
    assert rc == 1 and "checked 2 files: 1 error" in text, text  # its own files, and only those
    (tmp_path / "kina.toml").write_text(
        '[workspace]\nname = "parent"\nsources = ["*.kina", "examples/sub/*.kina"]\n'
    )
    rc, text = _run(capsys, "check", str(tmp_path), "--no-cache")
    assert rc == 0, text
    assert (
        "kinac: warning: kina.toml: workspace.sources[1] = 'examples/sub/*.kina' names files of "
        "the nested workspace examples/sub (it has its own kina.toml)" in text
    ), text
