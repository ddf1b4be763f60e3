"""Bad inputs are reported, never silently accepted or read as something else.

Sources that are not UTF-8 or cannot be read, a single file's imports, flags of ``kinac run``
(``--repeat``, ``--seed``, ``--dims``, ``--dtypes``), the arrays of an ``.npz``, directories
that are not workspaces, unknown entry names. In-process through :func:`kinac.cli.main`.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

from kinac.cli import main

ROOT = Path(__file__).resolve().parent.parent
WS = ROOT / "workspaces"
GATHER = "(defn emb [(t : (tensor f32 [V D])) (i : (tensor i32 [N]))] -> (tensor f32 [N D])\n  (gather t i))\n"
IDENT = "(defn f [(x : (tensor f32 [N]))] -> (tensor f32 [N])\n  ; caf\xe9\n  x)\n"


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    rc = main(list(args))
    out = capsys.readouterr()
    assert "Traceback" not in out.err
    return rc, out.out, out.err


def test_source_not_utf8_is_k0153_at_the_first_bad_byte(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    src = tmp_path / "a.kina"
    src.write_bytes(IDENT.encode("latin-1"))
    rc, out, _ = run(capsys, "check", str(src), "--no-cache")
    assert rc == 1
    assert (
        "error[K0153]: cannot read `a.kina`: it is not valid UTF-8: byte 0xe9 at line 2, column 8"
        in out
    )
    assert "--> a.kina:2:8" in out


def test_workspace_with_a_non_utf8_file_and_a_dangling_link(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "lib.kina").write_bytes(IDENT.encode("latin-1"))
    (tmp_path / "main.kina").write_text(
        '(import "lib.kina")\n(defn g [(x : (tensor f32 [N]))] -> (tensor f32 [N]) (f x))\n'
    )
    (tmp_path / "gone.kina").symlink_to(tmp_path / "nowhere.kina")
    rc, out, _ = run(capsys, "check", str(tmp_path), "--no-cache")
    assert rc == 1
    assert "cannot read `lib.kina`: it is not valid UTF-8" in out
    assert "cannot read `gone.kina`: No such file or directory" in out


def test_kina_toml_not_utf8_is_a_config_error_not_no_config(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "a.kina").write_text("(defn f [(x : (tensor f32 [N]))] -> (tensor f32 [N]) x)\n")
    (tmp_path / "kina.toml").write_bytes(b'[workspace]\nname = "caf\xe9"\n')
    rc, out, err = run(capsys, "build", str(tmp_path), "--no-cache", "--json")
    assert rc == 2
    assert "kinac: error: kina.toml: it is not valid UTF-8: byte 0xe9 at line 2" in err
    assert '"code": "K0154"' in out  # --json: the error is on stdout too


def test_single_file_resolves_its_sibling_imports(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for f in ("block.kina", "attention.kina", "ffn.kina"):
        shutil.copy(WS / "transformer" / f, tmp_path / f)
    rc, _, err = run(capsys, "check", str(tmp_path / "block.kina"), "--no-cache")
    assert rc == 0, err
    assert "checked 1 file: no errors" in err


def test_single_file_of_a_workspace_uses_its_root_and_builds_its_entries(
    capsys: pytest.CaptureFixture[str],
) -> None:
    rc, _, err = run(capsys, "build", str(WS / "transformer" / "block.kina"), "--no-cache")
    assert rc == 0, err
    assert "built 1 file, 3 artifacts: no errors" in err


@pytest.mark.parametrize(
    ("flags", "needle"),
    [
        (["--repeat", "0"], "argument --repeat: must be at least 1, got 0"),
        (["--repeat", "-3"], "argument --repeat: must be at least 1"),
        (["--seed", "-1"], "argument --seed: must be at least 0, got -1"),
    ],
)
def test_run_counts_are_checked_by_the_parser(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], flags: list[str], needle: str
) -> None:
    with pytest.raises(SystemExit) as e:
        main(["run", str(tmp_path), "f", *flags])
    assert e.value.code == 2 and needle in capsys.readouterr().err


@pytest.mark.parametrize(
    ("flags", "needle"),
    [
        (["--dims", "V=4,D=3,N=2,Q=5"], "`Q` is not a dim of `emb`; its dims: V, D, N"),
        (["--dims", "V=4,D=3,n=2"], "`n` is not a dim of `emb` (did you mean `N`?)"),
        (["--dims", "V=4,D=3,N=0"], "--dims takes NAME=POSITIVE_INT pairs"),
        (["--dims", "V=4,D=3,N=-2"], "--dims takes NAME=POSITIVE_INT pairs"),
        (["--dims", "V=4,D=3,N"], "--dims takes NAME=VALUE pairs"),
        (["--dims", "V=4,D=3,N=2", "--dtypes", "T=f99"], "'f99' is not a Kina dtype"),
        (["--dims", "V=4,D=3,N=2", "--dtypes", "T=f32"], "`T` is not a dtype variable of `emb`"),
    ],
)
def test_run_refuses_unknown_or_bad_dims_and_dtypes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], flags: list[str], needle: str
) -> None:
    (tmp_path / "g.kina").write_text(GATHER)
    rc, _, err = run(capsys, "run", str(tmp_path / "g.kina"), "emb", "--no-cache", *flags)
    assert rc == 2 and needle in err, err


def test_npz_with_extra_or_missing_arrays_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "g.kina").write_text(GATHER)
    t, i = np.ones((4, 3), np.float32), np.array([0, 1], np.int32)
    np.savez(tmp_path / "extra.npz", t=t, i=i, bias=t)
    np.savez(tmp_path / "missing.npz", t=t)
    base = [
        "run",
        str(tmp_path / "g.kina"),
        "emb",
        "--no-cache",
        "--dims",
        "V=4,D=3,N=2",
        "--repeat",
        "1",
    ]
    rc, _, err = run(capsys, *base, "--inputs", str(tmp_path / "extra.npz"))
    assert rc == 2 and "has arrays the entry does not take: bias" in err
    rc, _, err = run(capsys, *base, "--inputs", str(tmp_path / "missing.npz"))
    assert rc == 2 and "lacks arrays named i" in err
    rc, out, err = run(capsys, *base, "--save", str(tmp_path / "no" / "dir" / "out.npz"))
    assert rc == 2 and "--save: cannot write" in err


def test_bad_input_shape_blames_the_argument_against_the_entry(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ws = tmp_path / "mlp"
    shutil.copytree(WS / "mlp", ws, ignore=shutil.ignore_patterns(".kinac-cache"))
    (ws / "kina.toml").write_text(
        (ws / "kina.toml")
        .read_text()
        .replace("B = 4, S = 128, D = 256, F = 1024", "B = 2, S = 3, D = 8, F = 16")
    )
    z = np.zeros
    np.savez(
        tmp_path / "in.npz",
        x=z((2, 3, 9), np.float32),
        w1=z((8, 16), np.float32),
        b1=z(16, np.float32),
        w2=z((16, 8), np.float32),
        b2=z(8, np.float32),
    )
    rc, _, err = run(
        capsys, "run", str(ws), "mlp", "--no-cache", "--inputs", str(tmp_path / "in.npz")
    )
    assert rc == 1
    assert (
        "argument `x` has shape [2, 3, 9], but entry `mlp` expects [2, 3, 8]: axis 2 (D) is 9, "
        "the entry fixes D = 8"
    ) in err
    assert "w1" not in err and "b2" not in err


def test_directory_without_kina_toml_or_sources_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rc, _, err = run(capsys, "build", str(tmp_path))
    assert rc == 2 and "has no kina.toml and no .kina files" in err
    assert list(tmp_path.iterdir()) == []  # no cache created
    rc, _, err = run(capsys, "check", str(tmp_path / "nope"))
    assert rc == 2 and "no such file or directory" in err
    (tmp_path / "a.kina").write_text("(defn f [(x : (tensor f32 [N]))] -> (tensor f32 [N]) x)\n")
    rc, _, err = run(capsys, "build", str(tmp_path), "--no-cache")
    assert rc == 0 and "built 1 file, 0 artifacts: no errors" in err  # sources alone: checked


def test_unknown_entry_lists_the_entries_with_a_suggestion(
    capsys: pytest.CaptureFixture[str],
) -> None:
    rc, _, err = run(capsys, "run", str(WS / "transformer"), "block_smal", "--no-cache")
    assert rc == 2
    assert "no entry or defn named `block_smal`" in err and "(did you mean `block_small`?)" in err
    assert "entries (kina.toml): block_small, attention_small" in err


def test_run_dims_fix_the_shapes_of_npz_inputs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "g.kina").write_text(GATHER)
    np.savez(tmp_path / "in.npz", t=np.ones((5, 3), np.float32), i=np.array([0, 1], np.int32))
    rc, _, err = run(
        capsys,
        "run",
        str(tmp_path / "g.kina"),
        "emb",
        "--no-cache",
        "--dims",
        "V=4,D=3,N=2",
        "--inputs",
        str(tmp_path / "in.npz"),
    )
    assert rc == 1  # the array's V = 5 is not silently taken over --dims V=4
    assert (
        "argument `t` has shape [5, 3], but `emb` at --dims expects [4, 3]: axis 0 (V) is 5, --dims fixes V = 4"
        in err
    )


@pytest.mark.parametrize("content", [b"PK\x03\x04", b"\x93NUMPY\x01\x00", b"", b"not numpy"])
def test_a_corrupt_inputs_file_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], content: bytes
) -> None:
    (tmp_path / "g.kina").write_text(GATHER)
    (tmp_path / "in.npz").write_bytes(content)
    rc, _, err = run(
        capsys,
        "run",
        str(tmp_path / "g.kina"),
        "emb",
        "--no-cache",
        "--dims",
        "V=4,D=3,N=2",
        "--inputs",
        str(tmp_path / "in.npz"),
    )
    assert rc == 2 and err.startswith("kinac: error: cannot read"), err
