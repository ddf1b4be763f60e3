"""``kinac profile`` and ``kinac.profile``: every kernel timed on the host, a rich table, and
a Chrome/Perfetto trace whose schema is checked (Trace Event Format, ``X`` events in µs)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from observe_support import mlp_workspace

import kinac
from kinac.cli import main
from kinac.observe.profile import MARK, instrument_ir


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    return mlp_workspace(tmp_path, b=64, d=64, f=256)


def check_trace(doc: Any, steps: list[str], calls: int) -> None:
    """The Trace Event Format as Perfetto and chrome://tracing read it."""
    assert set(doc) >= {"traceEvents"}
    events = doc["traceEvents"]
    for e in events:
        assert e["ph"] in ("X", "M"), e
        assert isinstance(e["name"], str) and isinstance(e["pid"], int)
        assert isinstance(e["tid"], int)
        if e["ph"] == "X":
            assert isinstance(e["ts"], (int, float)) and isinstance(e["dur"], (int, float))
            assert e["ts"] >= 0 and e["dur"] >= 0
    entries = [e for e in events if e.get("cat") == "entry"]
    kernels = [e for e in events if e.get("cat") == "kernel"]
    assert len(entries) == calls
    assert [k["name"] for k in kernels] == steps * calls  # every kernel of every call, in order
    for i, call in enumerate(entries):  # each call's kernels lie inside it, on its track
        mine = kernels[i * len(steps) : (i + 1) * len(steps)]
        for k in mine:
            assert k["tid"] == call["tid"]
            assert call["ts"] <= k["ts"] and k["ts"] + k["dur"] <= call["ts"] + call["dur"] + 1
        assert sum(k["dur"] for k in mine) <= call["dur"] + 1
    names = {e["tid"] for e in events if e["ph"] == "M" and e["name"] == "thread_name"}
    assert {e["tid"] for e in kernels} <= names  # every track is named


def test_cli_profile_table_and_trace(ws: Path, capsys: pytest.CaptureFixture[str]) -> None:
    trace = ws / "t.json"
    rc = main(
        [
            "profile",
            str(ws),
            "mlp",
            "--repeat",
            "3",
            "--trace",
            str(trace),
            "--cache-dir",
            str(ws / ".c"),
        ]
    )
    out = capsys.readouterr().out
    assert rc == 0, out
    assert "mlp on cpu" in out and "GB/s" in out and "share" in out
    doc = json.loads(trace.read_text())
    kernels = [e for e in doc["traceEvents"] if e.get("cat") == "kernel"]
    steps = [e["name"] for e in kernels[: len(kernels) // 3]]
    assert len(steps) == 3  # matmul, gelu, matmul
    check_trace(doc, steps, 3)
    for name in steps:
        assert name in out


def test_python_profile_matches_steps(ws: Path) -> None:
    fn = kinac.compile(str(ws), "mlp", cache_dir=str(ws / ".c"))
    rng = np.random.default_rng(0)
    x, w1, w2 = (
        rng.standard_normal(s).astype(np.float32) for s in [(64, 64), (64, 256), (256, 64)]
    )
    prof = kinac.profile(fn, x, w1, w2, repeat=4)
    assert [k.kind for k in prof.kernels] == ["matmul", "map", "matmul"]
    assert all(k.ms > 0 for k in prof.kernels)
    assert abs(sum(k.share for k in prof.kernels) - 100.0) < 1e-6
    # bytes: each buffer read once, the output written once (f32)
    assert prof.kernels[0].nbytes == 4 * (64 * 64 + 64 * 256 + 64 * 256)
    assert prof.kernels[1].nbytes == 4 * (64 * 256 * 2)
    check_trace(prof.trace(), [k.name for k in prof.kernels], 4)
    # the profiled build computes what the plain entry does
    assert np.allclose(fn(x, w1, w2), np.asarray(fn(x, w1, w2)))


def test_instrument_marks_each_step_once_outside_tasks() -> None:
    ir = "\n".join(
        [
            'define internal void @"e"(ptr %".1") nounwind',
            "{",
            '  call ccc void @"ka"(ptr %".1")',
            '  call ccc void @"kinac_parallel"(ptr @"kb__task", ptr %".2", i64 4)',
            '  call ccc void @"ka"(ptr %".1")',
            "  ret void",
            "}",
            'define internal void @"kb__task"(ptr %".1", i64 %".2") nounwind',
            "{",
            '  call ccc void @"kb"(ptr %".1")',
            "  ret void",
            "}",
        ]
    )
    out = instrument_ir(ir, ("ka", "kb", "ka"))
    marks = [ln.strip() for ln in out.splitlines() if MARK in ln and "declare" not in ln]
    assert marks == [f"call void @{MARK}(i64 {i})" for i in range(6)]
    task = out[out.index('define internal void @"kb__task"') :]
    assert MARK not in task.split("declare")[0]  # task bodies are not instrumented
    with pytest.raises(ValueError, match="expected 4"):
        instrument_ir(ir, ("ka", "kb", "ka", "kc"))


def test_profile_bad_trace_path_is_a_usage_error(
    ws: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rc = main(
        [
            "profile",
            str(ws),
            "mlp",
            "--repeat",
            "1",
            "--trace",
            str(ws / "no" / "t.json"),
            "--cache-dir",
            str(ws / ".c"),
        ]
    )
    got = capsys.readouterr()
    # refused before the build and the profile (it was 'cannot write' after them)
    assert rc == 2 and f"kinac: error: --trace: the directory {ws / 'no'} does not exist" in got.err
    assert "per call" not in got.out


@pytest.mark.gpu
def test_gpu_profile_times_every_kernel_from_a_cuda_graph(ws: Path) -> None:
    """The GPU path reuses the runtime's per-step CUDA-graph timing; one stream track."""
    from kinac.rt import cuda

    if not cuda.available():
        pytest.skip("no CUDA GPU")
    trace = ws / "g.json"
    rc = main(
        [
            "profile",
            str(ws),
            "mlp",
            "--target",
            "cuda",
            "--repeat",
            "5",
            "--trace",
            str(trace),
            "--cache-dir",
            str(ws / ".c"),
        ]
    )
    assert rc == 0
    doc = json.loads(trace.read_text())
    kernels = [e for e in doc["traceEvents"] if e.get("cat") == "kernel"]
    assert kernels and all(e["args"]["cuda_graph"] for e in kernels)
    check_trace(doc, [e["name"] for e in kernels], 1)
    fn = kinac.compile(str(ws), "mlp", target="cuda", cache_dir=str(ws / ".c"))
    rng = np.random.default_rng(0)
    x, w1, w2 = (
        rng.standard_normal(s).astype(np.float32) for s in [(64, 64), (64, 256), (256, 64)]
    )
    prof = kinac.profile(fn, x, w1, w2, repeat=5)
    assert len(prof.kernels) >= 2 and all(k.ms > 0 and k.from_graph for k in prof.kernels)
