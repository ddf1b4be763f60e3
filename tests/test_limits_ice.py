"""A failure inside lowering or codegen on a checked program is one internal-compiler-error
report (a ``KinaCompileError``) naming the entry, the stage and the kernel, never a library's
traceback: the pipeline's lowering and codegen queries are the one place that wraps it."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import kinac
from kinac import cli, pipeline
from kinac.errors import EXIT_INTERNAL, KinaCompileError
from kinac.ice import InternalCompilerError
from kinac.ir.gpu.kernels import KernelGen
from kinac.ir.host.kernel_loops import KernelLowering
from kinac.pipeline_support import EntryKey
from kinac.session import Session

SRC = "(defn f [(x : (tensor f32 [N]))] -> (tensor f32 [N]) (exp (add x 1.0)))\n"


@pytest.fixture()
def ws(tmp_path: Path) -> Path:
    (tmp_path / "f.kina").write_text(SRC)
    (tmp_path / "kina.toml").write_text('[[entry]]\nname = "e"\ndefn = "f"\ndims = { N = 8 }\n')
    return tmp_path


def _boom(*_: object, **__: object) -> None:
    raise ValueError("boom: an xDSL verifier, llvmlite or numpy failure")


def test_host_lowering_failure_is_one_report(ws: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(KernelLowering, "_map", _boom)
    f = kinac.compile(str(ws), "f", no_cache=True)
    with pytest.raises(KinaCompileError) as info:
        f(np.ones(8, np.float32))
    e = info.value
    assert isinstance(e, InternalCompilerError) and e.exit_code == EXIT_INTERNAL
    msg = str(e)
    assert "entry `f at N=8 (f.kina)`" in msg and "host lowering" in msg
    assert "kernel k0_map" in msg and "ValueError: boom" in msg
    assert isinstance(e.__cause__, ValueError)


def test_gpu_lowering_failure_names_the_kernel(ws: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(KernelGen, "generate", _boom)
    db = Session(ws, no_cache=True).db
    with pytest.raises(InternalCompilerError, match=r"GPU lowering, kernel k0_map"):
        pipeline.gpu_lowered(db, EntryKey("f.kina", "f", (("N", 8),), (), "cuda"))


def test_codegen_failure_is_one_report(ws: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import kinac.codegen.llvm as llvm

    monkeypatch.setattr(llvm, "optimize_ir", _boom)
    db = Session(ws, no_cache=True).db
    with pytest.raises(InternalCompilerError, match=r"host code generation \(LLVM\)"):
        pipeline.object_code(db, EntryKey("f.kina", "f", (("N", 8),), (), "cpu"))


def test_cli_prints_one_line_and_exits_3(
    ws: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(KernelLowering, "_map", _boom)
    monkeypatch.delenv("KINAC_DEBUG", raising=False)
    assert cli.main(["build", str(ws), "--no-cache"]) == EXIT_INTERNAL
    err = capsys.readouterr().err
    assert "Traceback" not in err
    assert "kinac: error: internal compiler error (entry `f at N=8 (f.kina)`" in err
    assert "kernel k0_map" in err
