"""Adversarial checks of ``kinac profile`` / ``kinac.profile`` and their trace file: calls the
Python API refuses with a clear error, where a trace cannot go (said before anything runs), a
failed write that leaves the earlier trace whole, and a sample workspace's trace checked as
Perfetto reads it (schema, nesting, one named track per thread, shares summing to 100%)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from observe_support import mlp_workspace
from test_observe_profile import check_trace

import kinac
from kinac.cli import main
from kinac.observe.profile import profile_call
from kinac.observe.trace import trace_target_problem, write_trace_file

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def compiled(tmp_path_factory: pytest.TempPathFactory) -> tuple[Any, tuple[Any, ...]]:
    ws = mlp_workspace(tmp_path_factory.mktemp("ws"), b=4, d=8, f=16)
    rng = np.random.default_rng(0)
    arrays = tuple(rng.standard_normal(s).astype(np.float32) for s in ((4, 8), (8, 16), (16, 8)))
    return kinac.compile(str(ws / "m.kina"), "mlp", cache_dir=str(ws / ".c")), arrays


@pytest.mark.parametrize("repeat", [0, -2, True, 1.5])
def test_repeat_below_one_is_refused(compiled: tuple[Any, tuple[Any, ...]], repeat: Any) -> None:
    """``repeat=0`` profiled nothing and returned every kernel at 0 ms and a 0% share."""
    fn, arrays = compiled
    with pytest.raises(ValueError, match=r"repeat must be an integer >= 1"):
        kinac.profile(fn, *arrays, repeat=repeat)


def test_a_plain_function_is_refused() -> None:
    with pytest.raises(TypeError, match=r"compiled defn \(kinac.compile\(path, name\)\)"):
        kinac.profile(lambda a: a, np.zeros(3, np.float32))


def test_api_profile_shares_and_trace(compiled: tuple[Any, tuple[Any, ...]]) -> None:
    fn, arrays = compiled
    prof = kinac.profile(fn, *arrays, repeat=3)
    assert abs(sum(k.share for k in prof.kernels) - 100.0) < 1e-6
    check_trace(prof.trace(), [k.name for k in prof.kernels], 3)


def test_where_a_trace_cannot_go(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("x")
    assert trace_target_problem(tmp_path / "t.json") is None
    assert trace_target_problem(tmp_path / "file") is None  # overwritten
    said = trace_target_problem(tmp_path)
    assert said == f"{tmp_path} is a directory; give a file name, e.g. {tmp_path / 'trace.json'}"
    assert trace_target_problem(tmp_path / "no" / "t.json") == (
        f"the directory {tmp_path / 'no'} does not exist"
    )
    assert (
        trace_target_problem(tmp_path / "file" / "t.json")
        == f"{tmp_path / 'file'} is not a directory"
    )
    assert trace_target_problem("") == "an empty file name; give one, e.g. trace.json"


def test_a_failed_write_keeps_the_earlier_trace(tmp_path: Path) -> None:
    """A write that fails part way (here: past a file-size limit, as a full disk would) used to
    leave a truncated JSON file in place of the earlier trace."""
    path = tmp_path / "t.json"
    write_trace_file(path, {"traceEvents": [], "displayTimeUnit": "ms"})
    before = path.read_text()
    script = f"""
import resource, signal, sys
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
resource.setrlimit(resource.RLIMIT_FSIZE, (4096, 4096))
from kinac.observe.trace import write_trace_file
big = {{"traceEvents": [{{"name": "k" * 100, "ph": "M", "pid": 1, "tid": i}} for i in range(200)]}}
try:
    write_trace_file({str(path)!r}, big)
except OSError as e:
    print("refused", e.errno)
"""
    run = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True)
    assert "refused" in run.stdout, run.stdout + run.stderr
    assert path.read_text() == before
    assert [p.name for p in tmp_path.iterdir()] == ["t.json"]  # no temporary file left


def test_a_link_stays_a_link(tmp_path: Path) -> None:
    (tmp_path / "real.json").write_text("{}")
    (tmp_path / "link.json").symlink_to(tmp_path / "real.json")
    write_trace_file(tmp_path / "link.json", {"traceEvents": []})
    assert (tmp_path / "link.json").is_symlink()
    assert json.loads((tmp_path / "real.json").read_text()) == {"traceEvents": []}


def test_sample_workspace_trace(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``workspaces/transformer attention_small`` as a user profiles it."""
    trace = tmp_path / "t.json"
    args = ["profile", str(ROOT / "workspaces" / "transformer"), "attention_small", "--repeat",
            "2", "--trace", str(trace), "--cache-dir", str(tmp_path / ".c")]  # fmt: skip
    assert main(args) == 0
    out = capsys.readouterr().out
    doc = json.loads(trace.read_text())
    steps = [e["name"] for e in doc["traceEvents"] if e.get("cat") == "kernel"]
    check_trace(doc, steps[: len(steps) // 2], 2)
    shares = [float(c.rstrip("%")) for c in out.split() if c.endswith("%")]
    assert shares and abs(sum(shares) - 100.0) < 0.1 * len(shares)


def test_a_dim_parameter_called_repeat(tmp_path: Path) -> None:
    """``kinac profile`` on such a defn was an internal error ('got multiple values for
    keyword argument repeat'); :func:`profile_call` takes the dims as a mapping."""
    (tmp_path / "m.kina").write_text(
        "(defn rep [(repeat : dim) (x : (tensor f32 [B]))] -> (tensor f32 [B]) (mul x repeat))\n"
    )
    fn = kinac.compile(str(tmp_path / "m.kina"), "rep", cache_dir=str(tmp_path / ".c"))
    x = np.arange(4, dtype=np.float32)
    prof = profile_call(fn, (x,), {"repeat": 3}, repeat=2)
    assert prof.calls == 2 and len(prof.kernels) == 1
    np.testing.assert_array_equal(np.asarray(fn(x, repeat=3)), 3 * x)


def test_gpu_trace_without_a_gpu() -> None:
    """:func:`profile_gpu`'s trace and table from an entry whose per-step device times are given
    (what :meth:`GpuEntry.profile` returns): one named stream track, the kernels back to back
    inside the entry's event, shares summing to 100 %, the launch shapes in the args."""
    from types import SimpleNamespace

    from kinac.artifacts.gpu import GpuLaunch, GpuStep
    from kinac.observe.profile import profile_entry

    la = GpuLaunch("k", 3, 128, ("param0",))
    steps = [
        GpuStep(f"k{i}_map", "map", "kernel", "f32", (4,), (), "out0", (la,), bytes_moved=32)
        for i in range(5)
    ]
    times = [0.1, 0.2, 0.3, 0.7, 1e-4]
    entry = SimpleNamespace(
        lowered=SimpleNamespace(name="e", steps=steps),
        capture_stream=object(),
        stream=SimpleNamespace(cu=0x5A),
        profile=lambda *arrays, reps: list(zip(steps, times, strict=True)),
    )
    prof = profile_entry(entry, (), repeat=3)
    assert prof.target == "cuda" and abs(sum(k.share for k in prof.kernels) - 100.0) < 1e-9
    doc = json.loads(json.dumps(prof.trace()))
    events = doc["traceEvents"]
    (call,) = [e for e in events if e.get("cat") == "entry"]
    kernels = [e for e in events if e.get("cat") == "kernel"]
    assert [k["name"] for k in kernels] == [s.sym for s in steps]
    assert all(k["args"]["launch"] == "3x128" and k["args"]["cuda_graph"] for k in kernels)
    for a, b in zip(kernels, kernels[1:], strict=False):
        assert a["ts"] + a["dur"] <= b["ts"]  # back to back, never overlapping
    assert kernels[-1]["ts"] + kernels[-1]["dur"] <= call["ts"] + call["dur"]
    assert abs(sum(k["dur"] for k in kernels) - call["dur"]) <= 0.001 * len(kernels)
    tracks = {e["tid"]: e["args"]["name"] for e in events if e["name"] == "thread_name"}
    assert tracks == {1: "cuda stream 0x5a"} and {k["tid"] for k in kernels} == {1}
