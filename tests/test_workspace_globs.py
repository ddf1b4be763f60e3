"""``kina.toml``'s ``sources``/``exclude`` globs (kinac/workspace/globs.py): path globs, not
``fnmatch`` (whose ``*`` crosses ``/``: ``sources = ["*.kina"]`` took every subfolder's files).

Checked three ways: a table of the documented rules, a differential test against the standard
library's path globbing (``glob.glob(..., recursive=True)``) on a real tree, and the command
line on a workspace whose subfolder holds a file with an error.
"""

from __future__ import annotations

import glob
import random
from pathlib import Path

import pytest

from kinac.cli import main
from kinac.workspace.globs import glob_match

IDENTITY = "(defn f [(x : (tensor f32 [N]))] -> (tensor f32 [N]) x)\n"
BAD = "(defn g [(x : (tensor f32 [N]))] -> (tensor f32 [N]) y)\n"  # K02xx: unknown name


@pytest.mark.parametrize(
    ("path", "pattern", "want"),
    [
        ("a.kina", "*.kina", True),
        ("sub/a.kina", "*.kina", False),  # fnmatch said True
        ("sub/deep/a.kina", "*.kina", False),
        ("a.kina", "**/*.kina", True),  # ** matches zero folders
        ("x/y/a.kina", "**/*.kina", True),
        ("src/a.kina", "src/*.kina", True),
        ("src/x/a.kina", "src/*.kina", False),  # fnmatch said True
        ("src/x/a.kina", "src/**", True),
        ("a/c.kina", "a/**/c.kina", True),
        ("a/b/b/c.kina", "a/**/c.kina", True),
        ("gen/s/a.kina", "gen", True),  # a matched folder takes what is under it
        ("gen/s/a.kina", "gen/", True),
        ("gen/s/a.kina", "gen/*", True),
        ("general/a.kina", "gen", False),
        ("m1/a.kina", "m?/*.kina", True),
        ("m10/a.kina", "m?/*.kina", False),
        ("b.kina", "[!a].kina", True),
        ("A.kina", "a.kina", False),  # case-sensitive everywhere
        ("x.kina", "./x.kina", True),
        ("ab/c.kina", "a**/c.kina", True),  # ** inside a segment is two *
        ("a/b/c.kina", "a**/c.kina", False),
    ],
)
def test_glob_rules(path: str, pattern: str, want: bool) -> None:
    assert glob_match(path, pattern) is want


def test_globs_agree_with_the_standard_librarys_path_globbing(tmp_path: Path) -> None:
    """Random patterns over a random tree select exactly the files ``glob.glob`` with
    ``recursive=True`` finds (its ``*`` stays in a folder, ``**`` spans any number), and the
    files under the folders it finds."""
    rng = random.Random(20261202)
    names = ["a", "b", "ab", "m1", "m22"]
    files: list[str] = []
    for _ in range(40):
        depth = rng.randint(0, 3)
        parts = [rng.choice(names) + "d" for _ in range(depth)]
        rel = "/".join([*parts, rng.choice(names) + rng.choice([".kina", ".txt"])])
        files.append(rel)
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text("")
    files = sorted(set(files))
    dirpats = ["", "**/", "ad/", "*d/", "ad/**/", "?d/*/", "**/m1d/", "*/*/"]
    filepats = ["*.kina", "a*", "?.kina", "m[0-9]*.kina", "*b.*", "[!a]*"]
    for dp in dirpats:
        for fp in filepats:
            pattern = dp + fp
            found = [
                p.replace("\\", "/") for p in glob.glob(pattern, root_dir=tmp_path, recursive=True)
            ]  # files and folders; a matched folder takes the files under it
            want = {f for f in files for p in found if f == p or f.startswith(p + "/")}
            got = {f for f in files if glob_match(f, pattern)}
            assert got == want, (pattern, sorted(got ^ want))


def _check(capsys: pytest.CaptureFixture[str], root: Path) -> tuple[int, str]:
    rc = main(["check", str(root), "--no-cache"])
    got = capsys.readouterr()
    return rc, got.out + got.err


def test_star_kina_reads_the_top_folder_only(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``sources = ["*.kina"]`` with a broken ``old/bad.kina``: the check read it (and
    failed) before; now one file is checked. ``**/*.kina`` still reads both, and
    ``exclude = ["old"]`` leaves the whole folder out."""
    (tmp_path / "a.kina").write_text(IDENTITY)
    (tmp_path / "old" / "deep").mkdir(parents=True)
    (tmp_path / "old" / "deep" / "bad.kina").write_text(BAD)
    toml = tmp_path / "kina.toml"
    toml.write_text('[workspace]\nname = "w"\nsources = ["*.kina"]\n')
    rc, text = _check(capsys, tmp_path)
    assert rc == 0 and "checked 1 file: no errors" in text, text
    toml.write_text('[workspace]\nname = "w"\nsources = ["**/*.kina"]\n')
    rc, text = _check(capsys, tmp_path)
    assert rc == 1 and "checked 2 files: 1 error" in text, text
    toml.write_text('[workspace]\nname = "w"\nexclude = ["old"]\n')
    rc, text = _check(capsys, tmp_path)
    assert rc == 0 and "checked 1 file: no errors" in text, text


def test_a_star_pattern_that_only_fnmatch_matched_is_warned_with_the_deeper_pattern(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A workspace written for the old ``fnmatch`` globs (``src/*.kina`` with every file in
    ``src/a/``) reads nothing now: the warning says why and what to write."""
    (tmp_path / "src" / "a").mkdir(parents=True)
    (tmp_path / "src" / "a" / "m.kina").write_text(IDENTITY)
    (tmp_path / "kina.toml").write_text('[workspace]\nname = "w"\nsources = ["src/*.kina"]\n')
    rc, text = _check(capsys, tmp_path)
    assert rc == 0 and "checked 0 files" in text, text
    assert (
        "kinac: warning: kina.toml: workspace.sources[0] = 'src/*.kina' matches none of the 1 "
        f".kina file under {tmp_path} (src/a/m.kina); patterns are relative to the workspace "
        "root, and `*` stays within one folder (for files at any depth: 'src/**/*.kina')"
    ) in text, text
