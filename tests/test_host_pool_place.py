"""The host pool's placement rule (``pool_place.AVOID``, 2026-12-02e): a worker that starts a
job on the caller's CPU moves off it, to the CPUs it started with minus the caller's; without
the rule, or where no other CPU is allowed, its affinity stays as it was."""

from __future__ import annotations

import ctypes
import os
import platform
import threading
import time

import pytest

from kinac.codegen.llvm import compile_object, host_target, jit_load
from kinac.rt.host import pool
from kinac.rt.host.pool_place import has_rdtscp

_NOOP_TASK = """
declare void @kinac_parallel(ptr, ptr, i64)

define void @noop(ptr %c, i64 %i) {
entry:
  ret void
}

define void @job(ptr %c, i64 %tasks) {
entry:
  call void @kinac_parallel(ptr @noop, ptr %c, i64 %tasks)
  ret void
}
"""

_KEPT: list[object] = []  # the images stay mapped: their worker threads never return


def _worker_affinity_after_a_job(avoid: bool, start: set[int], cpu: int) -> set[int]:
    """Start one worker of a pool built with ``avoid`` (its thread's affinity ``start``), put
    it and the caller on ``cpu``, run one job, and return the worker's affinity once it has
    seen the job."""
    from kinac.rt.host.blas import raw_gemms

    raw = raw_gemms()
    blas = {"kinac_blas_sgemm": raw["kinac_sgemm"], "kinac_blas_dgemm": raw["kinac_dgemm"]}
    image = jit_load(
        compile_object(pool.pool_ir(202, avoid=avoid), host_target()),
        blas,
        ("kinac_pool_worker", "kinac_parallel"),
    )
    tasks = jit_load(
        compile_object(_NOOP_TASK, host_target()),
        {"kinac_parallel": image.addresses["kinac_parallel"]},
        ("job",),
    )
    _KEPT.extend((image, tasks))
    worker_fn = ctypes.CFUNCTYPE(None)(image.addresses["kinac_pool_worker"])
    tid: list[int] = []

    def run() -> None:
        os.sched_setaffinity(0, start)  # what the worker reads as its allowed CPUs
        tid.append(threading.get_native_id())
        worker_fn()

    threading.Thread(target=run, daemon=True).start()
    time.sleep(0.05)  # the worker registers itself (until then jobs run inline)
    saved = os.sched_getaffinity(0)
    try:
        os.sched_setaffinity(tid[0], {cpu})
        os.sched_setaffinity(0, {cpu})
        job = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_int64)(tasks.addresses["job"])
        job(None, 8)
        deadline = time.monotonic() + 1.0
        while os.sched_getaffinity(tid[0]) == {cpu} and time.monotonic() < deadline:
            time.sleep(0.01)  # the worker sees the job when the scheduler runs it
            job(None, 8)
        return os.sched_getaffinity(tid[0])
    finally:
        os.sched_setaffinity(0, saved)


_LINUX_X86 = platform.system() == "Linux" and platform.machine() == "x86_64"


@pytest.mark.skipif(
    not _LINUX_X86 or not has_rdtscp(), reason="the pool's placement: Linux x86-64, rdtscp"
)
def test_a_worker_on_the_callers_cpu_moves_to_the_others() -> None:
    allowed = sorted(os.sched_getaffinity(0))
    cpu = allowed[0]
    got = _worker_affinity_after_a_job(True, set(allowed), cpu)
    if len(allowed) > 1:
        assert got == set(allowed) - {cpu}
    else:  # nowhere else to go: the kernel refuses the empty mask, nothing changes
        assert got == {cpu}


@pytest.mark.skipif(not _LINUX_X86, reason="the pool's placement: Linux x86-64")
def test_without_the_rule_or_another_cpu_the_worker_stays() -> None:
    allowed = sorted(os.sched_getaffinity(0))
    cpu = allowed[0]
    assert _worker_affinity_after_a_job(False, set(allowed), cpu) == {cpu}
    assert _worker_affinity_after_a_job(True, {cpu}, cpu) == {cpu}


_COUNT_TASK = """
declare void @kinac_parallel(ptr, ptr, i64)

define void @count(ptr %c, i64 %i) {
entry:
  %p = getelementptr i64, ptr %c, i64 %i
  %old = atomicrmw add ptr %p, i64 1 seq_cst
  ret void
}

define void @job(ptr %c, i64 %tasks) {
entry:
  call void @kinac_parallel(ptr @count, ptr %c, i64 %tasks)
  ret void
}
"""


@pytest.mark.skipif(not _LINUX_X86, reason="the pool: Linux x86-64")
@pytest.mark.parametrize("wakes", [False, True])
def test_hints_between_jobs_leave_every_block_run_once(wakes: bool) -> None:
    """``kinac_pool_hint`` (``pool.HINT``) starts a generation with no job: a worker that sees
    it finds the last job's blocks all taken, and the jobs after it still run each block once,
    whether the worker was asleep (a pause; woken by the hint with ``hint_wakes``, else by the
    job) or spinning when the hint came."""
    import numpy as np

    from kinac.rt.host.blas import raw_gemms

    raw = raw_gemms()
    blas = {"kinac_blas_sgemm": raw["kinac_sgemm"], "kinac_blas_dgemm": raw["kinac_dgemm"]}
    exports = ("kinac_pool_worker", "kinac_parallel", "kinac_pool_hint")
    ir = pool.pool_ir(202, hint_wakes=wakes)
    image = jit_load(compile_object(ir, host_target()), blas, exports)
    tasks = jit_load(
        compile_object(_COUNT_TASK, host_target()),
        {"kinac_parallel": image.addresses["kinac_parallel"]},
        ("job",),
    )
    _KEPT.extend((image, tasks))
    worker = ctypes.CFUNCTYPE(None)(image.addresses["kinac_pool_worker"])
    threading.Thread(target=worker, daemon=True).start()
    time.sleep(0.05)
    hint = pool.hint_function(image.addresses["kinac_pool_hint"])
    job = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_int64)(tasks.addresses["job"])
    for k in range(60):
        counts = np.zeros(64, np.int64)
        for _ in range(k % 3):
            hint()
        if k % 10 == 0:
            time.sleep(0.002)  # past the spin window: the worker sleeps
            hint()
        job(counts.ctypes.data, 64)
        assert (counts == 1).all(), counts


def test_an_entry_calls_its_pool_hint_once_per_call() -> None:
    """``HostEntry`` calls the hint it was given first in each call (an entry bound to a pool
    of its own passes that pool's); an entry with no BLAS or pool call gets none by default."""
    import numpy as np

    from kinac.codegen.llvm import jit_load as load
    from kinac.ir import lower_graph
    from kinac.ir.testing import GraphBuilder
    from kinac.rt.host.entry import HostEntry
    from kinac.rt.host.pool import runtime_symbols

    g = GraphBuilder("mm")
    a, b = g.param("a", "f32", (8, 8)), g.param("b", "f32", (8, 8))
    lw = lower_graph(g.build(g.matmul(a, b)))
    syms = {n: v for n, v in runtime_symbols().items() if n in lw.library_calls}
    calls: list[int] = []
    e = HostEntry(lw, load(compile_object(lw.llvm_ir, host_target()), syms, (lw.symbol,)),
                  hint=lambda: calls.append(1))  # fmt: skip
    x = np.eye(8, dtype=np.float32)
    for _ in range(3):
        np.testing.assert_array_equal(e(x, x), x)
    assert len(calls) == 3
    h = GraphBuilder("add")
    c = h.param("c", "f32", (8,))
    lw2 = lower_graph(h.build(h.binary("add", c, c)))
    e2 = HostEntry(lw2, load(compile_object(lw2.llvm_ir, host_target()), {}, (lw2.symbol,)))
    assert e2._hint is None
