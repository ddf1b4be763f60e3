"""The autotuner's candidates are timed in child processes (kinac.rt.cuda.kernel_timer_isolated):
with a fake timing function in the child (``KINAC_KERNEL_TIMER_FAKE``, this module's
:func:`fake_each`), results come back in order; a child that hangs on a candidate is killed
after the timeout, one that dies (exit, signal) or loses its CUDA context is replaced, and the
failed candidate is ``inf`` while the others are timed by a new child; the job travels as JSON,
never pickle; the parent imports no CUDA; and through ``attention_tiles`` the failure is named
once on stderr and cached with the query's value.

The fake reads its plan from ``KINAC_TEST_FAKE_PLAN`` (kernel function name -> milliseconds, or
``hang`` / ``exit`` / ``segv`` / ``lost``) and logs what each child received to
``KINAC_TEST_FAKE_LOG`` (one JSON line per candidate started, with the child's pid)."""

from __future__ import annotations

import ast
import json
import math
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kinac.rt.cuda.kernel_timer import FAKE_ENV, TimedKernel, time_isolated

TESTS = Path(__file__).resolve().parent
ROOT = TESTS.parent


def fake_each(
    kernels: tuple[TimedKernel, ...],
    buffer_bytes: tuple[int, ...],
    fill: bytes,
    round_ms: float,
    rounds: int,
    device: int,
) -> Iterator[tuple[float, str]]:
    """The child's timing, faked (runs in the child: see the module docstring)."""
    plan = json.loads(os.environ["KINAC_TEST_FAKE_PLAN"])
    for k in kernels:
        with open(os.environ["KINAC_TEST_FAKE_LOG"], "a", encoding="utf-8") as log:
            entry = {"pid": os.getpid(), "function": k.function, "ptx": k.ptx,
                     "grid": list(k.grid), "block": k.block, "shared": k.shared,
                     "fill": fill.hex(), "buffers": list(buffer_bytes), "device": device,
                     "round_ms": round_ms, "rounds": rounds}  # fmt: skip
            log.write(json.dumps(entry) + "\n")
        what = plan[k.function]
        if what == "hang":
            time.sleep(600)
        elif what == "exit":
            os._exit(7)
        elif what == "segv":
            os.kill(os.getpid(), signal.SIGSEGV)
        elif what == "lost":
            yield math.inf, "CUDA_ERROR_ILLEGAL_ADDRESS"
            return
        yield float(what), ""


@pytest.fixture
def fake(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    """Install the fake in children; returns (set the plan, read the log)."""
    log = tmp_path / "log.jsonl"
    monkeypatch.setenv(FAKE_ENV, "test_autotune_child:fake_each")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(TESTS), os.environ.get("PYTHONPATH", "")]))  # fmt: skip
    monkeypatch.setenv("KINAC_TEST_FAKE_LOG", str(log))

    class Fake:
        def plan(self, plan: dict[str, Any]) -> None:
            monkeypatch.setenv("KINAC_TEST_FAKE_PLAN", json.dumps(plan))

        def log(self) -> list[dict[str, Any]]:
            if not log.exists():
                return []
            return [json.loads(x) for x in log.read_text().splitlines()]

    return Fake()


def _kernels(n: int) -> tuple[TimedKernel, ...]:
    return tuple(TimedKernel(f"// ptx {i}\n", f"k{i}", (i + 1, 2, 3), 128, 1024 * i) for i in range(n))  # fmt: skip


FAST = {"timeout_s": 1.5, "startup_s": 30.0}


def test_results_come_back_in_order_with_the_jobs_data(fake: Any) -> None:
    """One child times everything, in order, and receives the jobs exactly (PTX, geometry,
    buffer sizes, every byte value of the fill, device, timing parameters)."""
    ks = _kernels(5)
    fake.plan({k.function: 0.5 + i for i, k in enumerate(ks)})
    fill = bytes(range(256)) * 3
    ms, failed = time_isolated(ks, (10, 20, 30), fill, device=0, round_ms=2.5, rounds=4, **FAST)  # type: ignore[arg-type]
    assert ms == (0.5, 1.5, 2.5, 3.5, 4.5) and failed == ()
    log = fake.log()
    assert len({e["pid"] for e in log}) == 1 and log[0]["pid"] != os.getpid()
    for e, k in zip(log, ks, strict=True):
        assert (e["function"], e["ptx"], tuple(e["grid"]), e["block"], e["shared"]) == (
            k.function, k.ptx, k.grid, k.block, k.shared,
        )  # fmt: skip
        assert bytes.fromhex(e["fill"]) == fill and e["buffers"] == [10, 20, 30]
        assert (e["device"], e["round_ms"], e["rounds"]) == (0, 2.5, 4)


def _pids(log: list[dict[str, Any]]) -> list[int]:
    return [e["pid"] for e in log]


def test_a_hanging_candidate_is_killed_and_the_rest_timed_in_a_new_child(fake: Any) -> None:
    ks = _kernels(5)
    fake.plan({"k0": 1.0, "k1": 2.0, "k2": "hang", "k3": 4.0, "k4": 5.0})
    t0 = time.monotonic()
    ms, failed = time_isolated(ks, (8,), b"\1\2", **FAST)  # type: ignore[arg-type]
    assert time.monotonic() - t0 < 15
    assert ms[:2] == (1.0, 2.0) and math.isinf(ms[2]) and ms[3:] == (4.0, 5.0)
    assert [(f.index, f.what) for f in failed] == [(2, "hung")]
    assert "1.5 s" in failed[0].detail
    pids = _pids(fake.log())
    assert [e["function"] for e in fake.log()] == ["k0", "k1", "k2", "k3", "k4"]
    assert pids[0] == pids[1] == pids[2] != pids[3] == pids[4]
    with pytest.raises(ProcessLookupError):  # the hung child is gone (killed and reaped)
        os.kill(pids[2], 0)


def test_a_child_that_dies_midway_is_replaced(fake: Any) -> None:
    """``os._exit`` and a segfault: each failed candidate is ``inf``, named with how its
    process died, and a new child times the rest."""
    ks = _kernels(5)
    fake.plan({"k0": 1.0, "k1": "exit", "k2": 3.0, "k3": "segv", "k4": 5.0})
    ms, failed = time_isolated(ks, (8,), b"\0", **FAST)  # type: ignore[arg-type]
    assert (
        ms[0] == 1.0 and ms[2] == 3.0 and ms[4] == 5.0 and math.isinf(ms[1]) and math.isinf(ms[3])
    )
    assert [(f.index, f.what) for f in failed] == [(1, "crashed"), (3, "crashed")]
    assert (
        "exit status 7" in failed[0].detail and f"signal {int(signal.SIGSEGV)}" in failed[1].detail
    )
    pids = _pids(fake.log())
    assert pids[0] == pids[1] != pids[2] == pids[3] != pids[4]


def test_a_lost_context_ends_that_child(fake: Any) -> None:
    """A candidate that broke the CUDA context (sticky error) is ``inf`` and ``faulted``; the
    candidates after it are not timed in that context but in a new child."""
    ks = _kernels(3)
    fake.plan({"k0": "lost", "k1": 2.0, "k2": 3.0})
    ms, failed = time_isolated(ks, (8,), b"\0", **FAST)  # type: ignore[arg-type]
    assert math.isinf(ms[0]) and ms[1:] == (2.0, 3.0)
    assert [(f.index, f.what) for f in failed] == [(0, "faulted")]
    assert "CUDA_ERROR_ILLEGAL_ADDRESS" in failed[0].detail
    pids = _pids(fake.log())
    assert pids[0] != pids[1] == pids[2]


def test_restarts_and_time_are_bounded(fake: Any) -> None:
    ks = _kernels(4)
    fake.plan({k.function: "exit" for k in ks})
    ms, failed = time_isolated(ks, (8,), b"\0", max_children=2, **FAST)  # type: ignore[arg-type]
    assert all(math.isinf(t) for t in ms) and len(fake.log()) == 2
    assert [f.what for f in failed] == ["crashed", "crashed", "not timed", "not timed"]
    fake.plan({"k0": 1.0, "k1": "hang", "k2": 3.0, "k3": 4.0})
    t0 = time.monotonic()
    ms, failed = time_isolated(ks, (8,), b"\0", timeout_s=30.0, startup_s=30.0, total_s=2.0)
    assert time.monotonic() - t0 < 12
    assert ms[0] == 1.0 and all(math.isinf(t) for t in ms[1:])
    assert [(f.index, f.what) for f in failed] == [(1, "not timed"), (2, "not timed"), (3, "not timed")]  # fmt: skip
    assert "time cap of 2 s" in failed[0].detail


def test_the_job_is_json_never_pickle() -> None:
    """What a child reads is one JSON document (the fill as base64), and the child is a
    plain ``python -m`` module, not multiprocessing (which pickles)."""
    from kinac.rt.cuda import kernel_timer_isolated as iso

    fill = bytes(range(256))
    doc = iso.job_document(_kernels(2), (4, 5), fill, [0, 1], 0, 3.0, 3)
    data = json.loads(doc)
    assert data["kernels"][1]["function"] == "k1" and data["todo"] == [0, 1]
    import base64

    assert base64.b64decode(data["fill"]) == fill
    assert iso.child_command() == [sys.executable, "-m", "kinac.rt.cuda.kernel_timer_child"]
    for mod in ("kernel_timer", "kernel_timer_isolated", "kernel_timer_child"):
        tree = ast.parse((ROOT / "kinac" / "rt" / "cuda" / f"{mod}.py").read_text())
        imported = {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
        imported |= {n.module or "" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
        assert not {m.split(".")[0] for m in imported} & {"pickle", "multiprocessing", "marshal", "shelve"}, mod  # fmt: skip


def test_the_parent_imports_no_cuda(fake: Any) -> None:
    """A fresh parent times through children and never loads cuda-python or the driver."""
    fake.plan({"k0": 1.0, "k1": "exit", "k2": 3.0})
    code = (
        "import sys\n"
        "from kinac.rt.cuda import driver\n"
        "from kinac.rt.cuda.kernel_timer import TimedKernel, time_isolated\n"
        "ks = tuple(TimedKernel('', f'k{i}', (1, 1, 1), 32, 0) for i in range(3))\n"
        "ms, failed = time_isolated(ks, (8,), b'0', timeout_s=5.0)\n"
        "assert ms[0] == 1.0 and ms[2] == 3.0 and [f.index for f in failed] == [1], (ms, failed)\n"
        "assert not [m for m in sys.modules if m == 'cuda' or m.startswith('cuda.')]\n"
        "assert driver._api is None and not driver._initialised\n"
        "print('ok')\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr


def test_gpu_timer_notes_a_hung_variant_once_and_the_failure_is_cached(
    fake: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Through ``attention_tiles`` with the real :class:`GpuTimer` (real PTX, fake child
    timing): the hung variant is ``inf`` in the cached choice, named in one note; another
    database on the same store (the next process) times nothing; timing it again in this
    process notes nothing new."""
    from kinac.ir.gpu import attention_tune
    from kinac.ir.gpu.attention_kernel import kernel_name
    from kinac.ir.gpu.attention_params import bhsd_params
    from kinac.ir.gpu.attention_tune import GENERATOR_VERSION, label, tuning_key
    from kinac.pipeline_autotune import (
        TIMER_KEY,
        GpuTimer,
        attention_autotune_mode,
        attention_tiles,
    )
    from kinac.rules import Database
    from kinac.rules.store import Store

    p = bhsd_params("bf16", 2, 16, 4, 2048, 128)
    cands = attention_tune.candidates(p, "sm_90a")[:3]
    monkeypatch.setattr(attention_tune, "candidates", lambda p, arch: cands)
    from kinac.codegen import ptx

    memo: dict[tuple[str, str], str] = {}
    real = ptx.compile_ptx
    monkeypatch.setattr(ptx, "compile_ptx", lambda ir, arch: memo.get((ir, arch)) or memo.setdefault((ir, arch), real(ir, arch)))  # fmt: skip
    monkeypatch.setattr(GpuTimer, "ordinal", staticmethod(lambda: 0))  # no CUDA here
    monkeypatch.setattr(GpuTimer, "timeout_s", 1.5)
    monkeypatch.setattr(GpuTimer, "noted", set())
    fake.plan({kernel_name(cands[0]): 2.0, kernel_name(cands[1]): "hang", kernel_name(cands[2]): 1.0})  # fmt: skip
    timer = GpuTimer("Fake H200 sm_90a")
    db = Database(Store(tmp_path / "store"), {TIMER_KEY: timer})
    mode = attention_autotune_mode(db, ())
    key = ("sm_90a", tuning_key(p), GENERATOR_VERSION, mode)
    c = attention_tiles(db, key)
    assert c.how == "timed"
    assert c.times == ((label(cands[0]), 2.0), (label(cands[1]), math.inf), (label(cands[2]), 1.0))
    notes = [x for x in capsys.readouterr().err.splitlines() if x.startswith("kinac: note:")]
    assert len(notes) == 1 and f"'{label(cands[1])}' hung" in notes[0], notes
    db.commit()
    db.close()
    n = len(fake.log())
    db2 = Database(Store(tmp_path / "store"), {TIMER_KEY: timer})
    assert attention_tiles(db2, key) == c and len(fake.log()) == n
    db2.close()
    assert math.isinf(timer.time(cands, "sm_90a")[1])
    assert "kinac: note:" not in capsys.readouterr().err


PTX = """.version 8.0
.target sm_90
.address_size 64
.visible .entry ok(.param .u64 buf)
{
  .reg .u64 %rd<3>; .reg .u32 %r<2>;
  ld.param.u64 %rd1, [buf]; cvta.to.global.u64 %rd2, %rd1; mov.u32 %r1, %tid.x;
  st.global.u32 [%rd2], %r1; ret;
}
.visible .entry spin(.param .u64 buf)
{
  .reg .u64 %rd<3>; .reg .u32 %r<2>; .reg .pred %p;
  ld.param.u64 %rd1, [buf]; cvta.to.global.u64 %rd2, %rd1;
LOOP:
  ld.volatile.global.u32 %r1, [%rd2]; setp.ne.u32 %p, %r1, 2143354862; @%p bra LOOP; ret;
}
.visible .entry fault(.param .u64 buf)
{
  .reg .u64 %rd<2>; .reg .u32 %r<2>;
  mov.u64 %rd1, 8; mov.u32 %r1, 1; st.global.u32 [%rd1], %r1; ret;
}
"""


def _no_gpu() -> bool:
    from kinac.rt.cuda import driver

    return not driver.available()


@pytest.mark.gpu
@pytest.mark.skipif(_no_gpu(), reason="no CUDA GPU")
def test_on_the_gpu_a_spinning_and_a_faulting_kernel_spare_this_process() -> None:
    """Real kernels: one that never ends is killed after the timeout (``hung``), one that
    writes to address 8 breaks its child's context (``faulted``); the kernels around them are
    timed, and this process's own CUDA context still works."""
    from kinac.rt.cuda import driver
    from kinac.rt.cuda.device import current_device

    dev = current_device()
    ks = tuple(TimedKernel(PTX, f, (4, 1, 1), 32, 0) for f in ("ok", "spin", "fault", "ok"))
    t0 = time.monotonic()
    ms, failed = time_isolated(ks, (1 << 20,), b"\0\0", device=dev.ordinal, timeout_s=5.0)
    print(f"child timings {ms} in {time.monotonic() - t0:.1f} s; {failed}")
    assert math.isfinite(ms[0]) and math.isfinite(ms[3]) and math.isinf(ms[1]) and math.isinf(ms[2])
    assert [(f.index, f.what) for f in failed] == [(1, "hung"), (2, "faulted")], failed
    d = driver.api()
    p = int(driver.check("cuMemAlloc", d.cuMemAlloc(1 << 20)))
    driver.check("cuMemsetD8", d.cuMemsetD8(p, 7, 1 << 20))
    dev.synchronize()
    driver.check("cuMemFree", d.cuMemFree(p))


@pytest.mark.gpu
@pytest.mark.skipif(_no_gpu(), reason="no CUDA GPU")
def test_on_the_gpu_the_child_times_as_the_process_did() -> None:
    """The same measurement in the child as in this process: two attention variants (causal
    GQA bf16, S 2048) timed both ways agree within 15% and rank alike when 10% apart."""
    from kinac.codegen.ptx import compile_ptx
    from kinac.ir.gpu.attention_kernel import attention_llvm_ir, grid, kernel_name, smem_bytes
    from kinac.ir.gpu.attention_params import bhsd_params
    from kinac.ir.gpu.attention_tune import candidates, label
    from kinac.pipeline_autotune import buffer_bytes, random_fill
    from kinac.rt.cuda.device import current_device
    from kinac.rt.cuda.kernel_timer import time_kernels

    p = bhsd_params("bf16", 4, 16, 4, 2048, 128)
    cands = candidates(p, "sm_90a")[:2]
    ks = tuple(
        TimedKernel(
            compile_ptx(attention_llvm_ir((c,)), "sm_90a"),
            kernel_name(c),
            grid(c),
            c.threads,
            smem_bytes(c),
        )  # fmt: skip
        for c in cands
    )
    sizes, fill = buffer_bytes(cands[0]), random_fill("bf16")
    here = time_kernels(ks, sizes, fill)
    there, failed = time_isolated(ks, sizes, fill, device=current_device().ordinal)
    print("in process", dict(zip(map(label, cands), here, strict=True)), "child", there)
    assert failed == () and all(math.isfinite(t) for t in here + there)
    for a, b in zip(here, there, strict=True):
        assert 0.85 < b / a < 1.15, (here, there)
    if max(here) > 1.1 * min(here):
        assert here.index(min(here)) == there.index(min(there)), (here, there)
