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


@pytest.mark.skipif(not _LINUX_X86, reason="the pool's placement: Linux x86-64")
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
