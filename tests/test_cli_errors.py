"""One error hierarchy, one ``kinac: error:`` line per error, documented exit codes, colour.

Most tests call :func:`kinac.cli.main` in-process (fast); the ones about tracebacks and the
environment run ``python -m kinac`` as a user does.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from cli_support import kinac_process

import kinac
from kinac.cli import main

ROOT = Path(__file__).resolve().parent.parent
GATHER = "(defn emb [(t : (tensor f32 [V D])) (i : (tensor i32 [N]))] -> (tensor f32 [N D])\n  (gather t i))\n"
BAD = "(defn f [(x : (tensor f32 [N]))\n         (y : (tensor f32 [M]))] -> (tensor f32 [N])\n  (add x y))\n"


def test_every_error_class_is_a_kina_error_and_exported() -> None:
    from kinac.rt.cuda.entry_support import KinaGpuError
    from kinac.rt.cuda.errors import (
        CudaError,
        CudaUnavailableError,
        KinacRuntimeError,
        OutOfMemoryError,
    )
    from kinac.rt.host.errors import KinaRuntimeError as HostRuntimeError
    from kinac.session import UsageError

    for cls in (
        kinac.KinaCompileError,
        kinac.KinaCallError,
        kinac.KinaRuntimeError,
        kinac.KinaUsageError,
        kinac.KinaConfigError,
        HostRuntimeError,
        KinacRuntimeError,
        CudaUnavailableError,
        CudaError,
        OutOfMemoryError,
        UsageError,
    ):
        assert issubclass(cls, kinac.KinaError), cls
    runtime = (HostRuntimeError, CudaError, KinaGpuError)
    assert all(issubclass(c, kinac.KinaRuntimeError) for c in runtime)
    assert UsageError is kinac.KinaUsageError and issubclass(
        kinac.KinaConfigError, kinac.KinaUsageError
    )
    assert {
        kinac.KinaUsageError.exit_code,
        kinac.KinaCompileError.exit_code,
        kinac.KinaRuntimeError.exit_code,
    } == {1, 2}
    assert kinac.KinaUsageError.exit_code == 2 and kinac.KinaCallError.exit_code == 1
    # older code catches these as the builtins they used to be
    assert issubclass(kinac.KinaCallError, TypeError) and issubclass(
        kinac.KinaRuntimeError, RuntimeError
    )


def test_bad_path_from_python_is_a_kina_error(tmp_path: Path) -> None:
    with pytest.raises(kinac.KinaUsageError, match="no such file"):
        kinac.compile(tmp_path / "nope.kina", "f")
    with pytest.raises(kinac.KinaError):
        kinac.compile(tmp_path, "f")  # an empty directory is not a workspace
    assert list(tmp_path.iterdir()) == []  # and nothing was created there


def test_gather_out_of_range_is_one_error_line_exit_1(tmp_path: Path) -> None:
    src = tmp_path / "g.kina"
    src.write_text(GATHER)
    np.savez(tmp_path / "in.npz", t=np.ones((4, 3), np.float32), i=np.array([0, 9], np.int32))
    p = kinac_process(
        "run",
        str(src),
        "emb",
        "--dims",
        "V=4,D=3,N=2",
        "--inputs",
        str(tmp_path / "in.npz"),
        "--no-cache",
    )
    assert p.returncode == 1, p.stderr
    assert "Traceback" not in p.stderr
    assert p.stderr.startswith("kinac: error: emb: gather index 9") and p.stderr.count("\n") == 1
    with pytest.raises(kinac.KinaRuntimeError, match="gather index 9"):
        kinac.compile(src, "emb", no_cache=True)(
            np.ones((4, 3), np.float32), np.array([0, 9], np.int32)
        )


def test_internal_error_is_one_line_exit_3_traceback_only_when_debugging(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    src = tmp_path / "ok.kina"
    src.write_text("(defn f [(x : (tensor f32 [N]))] -> (tensor f32 [N]) x)\n")

    def broken(*_: object, **__: object) -> None:
        raise AssertionError("invariant broken")

    monkeypatch.setattr("kinac.session.Session.build", broken)
    monkeypatch.delenv("KINAC_DEBUG", raising=False)
    assert main(["check", str(src), "--no-cache"]) == 3
    err = capsys.readouterr().err
    assert (
        "kinac: internal error: AssertionError: invariant broken" in err and "bug in kinac" in err
    )
    assert "Traceback" not in err and "--debug" in err
    assert main(["check", str(src), "--no-cache", "--debug"]) == 3
    assert "Traceback" in capsys.readouterr().err
    assert main(["--debug", "check", str(src), "--no-cache"]) == 3
    assert "Traceback" in capsys.readouterr().err
    monkeypatch.setenv("KINAC_DEBUG", "1")
    assert main(["check", str(src), "--no-cache"]) == 3
    assert "Traceback" in capsys.readouterr().err


def test_exit_codes_are_documented() -> None:
    p = kinac_process("--help")
    assert (
        "exit codes: 0 clean, 1 errors in the program, 2 usage or configuration errors" in p.stdout
    )
    assert "3 internal error" in p.stdout and "NO_COLOR" in p.stdout
    readme = (ROOT / "README.md").read_text()
    assert "kinac.KinaError" in readme and "KINAC_DEBUG" in readme


@pytest.mark.parametrize(
    ("env", "flag", "coloured"),
    [
        ({"NO_COLOR": "1", "FORCE_COLOR": "1"}, "auto", False),  # NO_COLOR wins (no-color.org)
        ({"FORCE_COLOR": "1"}, "auto", True),
        ({"FORCE_COLOR": "1"}, "never", False),
        ({"NO_COLOR": "1"}, "always", True),  # an explicit flag beats the environment
        ({}, "auto", False),  # not a terminal
    ],
)
def test_colour_follows_flag_then_no_color_then_force_color(
    tmp_path: Path, env: dict[str, str], flag: str, coloured: bool
) -> None:
    bad = tmp_path / "bad.kina"
    bad.write_text(BAD)
    p = kinac_process("check", str(bad), "--no-cache", "--color", flag, env=env)
    assert p.returncode == 1 and "error[K0" in p.stdout
    assert ("\x1b[" in p.stdout) is coloured, p.stdout[:200]
