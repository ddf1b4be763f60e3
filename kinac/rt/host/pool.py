"""A native task pool for the host runtime, and BLAS calls split over it.

OpenBLAS's own threads synchronise with fine-grained spinning barriers: on a machine where
another process holds a core, one multi-threaded ``sgemm`` can take ten times as long as a
single-threaded one. kinac instead splits a large product into row (or column) blocks, runs
each block with single-threaded BLAS, and hands the blocks out dynamically: a thread that is
not scheduled simply takes no block, so nobody waits on it, and on an idle machine every core
works. A thread that runs out of blocks spins for up to ``SPIN_TICKS`` (~60 us) watching for
the next job (the caller for the last block) before it sleeps on a futex, and a wake syscall is
made only when a thread sleeps: an entry's steps follow each other within microseconds, and a
worker woken from a futex for each of them (a reschedule in a VM, tens of microseconds) joined
the small kernels late. An idle pool sleeps.

The pool is a few functions of hand-written LLVM IR, compiled once per process through
:mod:`kinac.codegen.llvm`; worker threads are Python threads that enter the native worker loop
and never come back (the GIL is released while they are in it). ``KINAC_NUM_THREADS`` caps the
number of threads (default: the CPUs this process may run on). Linux only; elsewhere BLAS is
called directly.
"""

from __future__ import annotations

import ctypes
import functools
import os
import platform
import threading
from collections.abc import Callable

from kinac.rt.host.pool_place import AVOID, place_ir
from kinac.rt.host.pool_split import gemm_ir

_FUTEX = {"x86_64": 202, "aarch64": 98}
_WAIT, _WAKE = 128, 129  # FUTEX_WAIT_PRIVATE, FUTEX_WAKE_PRIVATE
MIN_SPLIT_FLOPS = 1 << 21  # below this a product runs as one block
BLOCKS_PER_THREAD = 4
# Each block of a split product packs the whole of the other operand again (a row block packs
# all of B), so thin blocks pay that copy many times: single-threaded OpenBLAS took 20% more CPU
# time for [512,256] @ [256,704] as 64-row blocks than in one call, 13% as 128-row blocks, 4%
# as 256-row blocks. The small transformer block and the MLP of benches/cpu.py used the least
# CPU time (and the least wall time) with 256 (then 128, then 64) in one loaded A/B run. Blocks
# are about this wide: as many as fit, then as many as make equal shares per thread (_BALANCED).
MIN_BLOCK_ROWS = 256
BALANCED = True  # the split's rule: equal shares per thread (kinac/rt/host/pool_split.py)

_POOL = """
@kp_gen = internal global i32 0
@kp_left = internal global i32 0
@kp_busy = internal global i32 0
@kp_ctl = internal global i64 0
@kp_workers = internal global i32 0
@kp_ring = internal global [2 x {{ ptr, ptr, i64 }}] zeroinitializer
@kp_gen_sleepers = internal global i32 0
@kp_left_sleepers = internal global i32 0
@kp_caller_cpu = internal global i32 -1

declare i64 @syscall(i64, ...)
declare void @llvm.memset.p0.i64(ptr, i8, i64, i1)

; wait while *word == val; *sleepers counts the threads asleep on word, so that a waker
; makes the wake syscall only when one is (seq_cst on both sides: either the waker sees the
; count, or the sleeper's futex sees the new value and does not sleep)
define internal void @kp_wait(ptr %word, i32 %val, ptr %sleepers) {{
entry:
{spin}
sleep:
  %in = atomicrmw add ptr %sleepers, i32 1 seq_cst
  %v = zext i32 %val to i64
  %r = call i64 (i64, ...) @syscall(i64 {futex}, ptr %word, i64 {wait}, i64 %v, ptr null)
  %out = atomicrmw sub ptr %sleepers, i32 1 seq_cst
  ret void
done:
  ret void
}}

define internal void @kp_wake(ptr %word, i64 %n, ptr %sleepers) {{
entry:
  %s = load atomic i32, ptr %sleepers seq_cst, align 4
  %any = icmp ne i32 %s, 0
  br i1 %any, label %wake, label %done
wake:
  %r = call i64 (i64, ...) @syscall(i64 {futex}, ptr %word, i64 {wake}, i64 %n)
  ret void
done:
  ret void
}}

; claim and run blocks of job %g until none is left. The control word is
; gen << 32 | hi << 16 | lo: the blocks [lo, hi) are left. The caller (%top false) takes them
; from the bottom, the workers from the top, so with two threads the caller runs the first
; half of every job and the worker the second (SIDES), and a row block's data stays in the
; cache of the core that wrote it (a product's row block, then the map over the same rows).
define internal void @kp_run(i64 %g, i1 %top) {{
entry:
  %sl = and i64 %g, 1
  %fnp = getelementptr [2 x {{ ptr, ptr, i64 }}], ptr @kp_ring, i64 0, i64 %sl, i32 0
  %ctxp = getelementptr [2 x {{ ptr, ptr, i64 }}], ptr @kp_ring, i64 0, i64 %sl, i32 1
  br label %claim
claim:
  %fn = load atomic ptr, ptr %fnp monotonic, align 8
  %ctx = load atomic ptr, ptr %ctxp monotonic, align 8
  %c = load atomic i64, ptr @kp_ctl acquire, align 8
  %cg = lshr i64 %c, 32
  %same = icmp eq i64 %cg, %g
  br i1 %same, label %idx, label %out
idx:
  %lo = and i64 %c, 65535
  %hi0 = lshr i64 %c, 16
  %hi = and i64 %hi0, 65535
  %more = icmp ult i64 %lo, %hi
  br i1 %more, label %cas, label %out
cas:
  %fromtop = and i1 %top, {sides}
  %hi1 = sub i64 %hi, 1
  %i = select i1 %fromtop, i64 %hi1, i64 %lo
  %step = select i1 %fromtop, i64 -65536, i64 1
  %c1 = add i64 %c, %step
  %pair = cmpxchg ptr @kp_ctl, i64 %c, i64 %c1 acq_rel acquire
  %ok = extractvalue {{ i64, i1 }} %pair, 1
  br i1 %ok, label %work, label %claim
work:
  call void %fn(ptr %ctx, i64 %i)
  %l = atomicrmw sub ptr @kp_left, i32 1 seq_cst
  %last = icmp eq i32 %l, 1
  br i1 %last, label %wake, label %claim
wake:
  call void @kp_wake(ptr @kp_left, i64 1, ptr @kp_left_sleepers)
  br label %claim
out:
  ret void
}}

define void @kinac_pool_worker() {{
entry:
  %allowed = alloca [16 x i64], align 8
  %mask = alloca [16 x i64], align 8
  call void @llvm.memset.p0.i64(ptr %allowed, i8 0, i64 128, i1 false)
  %ga = call i64 (i64, ...) @syscall(i64 204, i64 0, i64 128, ptr %allowed)
  %w = atomicrmw add ptr @kp_workers, i32 1 acq_rel
  br label %loop
loop:
  %seen = phi i32 [ 0, %entry ], [ %gen, %run ], [ %seen, %sleep ]
  %gen = load atomic i32, ptr @kp_gen acquire, align 4
  %new = icmp ne i32 %gen, %seen
  br i1 %new, label %run, label %sleep
sleep:
  call void @kp_wait(ptr @kp_gen, i32 %seen, ptr @kp_gen_sleepers)
  br label %loop
run:
  %c = load atomic i64, ptr @kp_ctl acquire, align 8
  %g = lshr i64 %c, 32
  call void @kp_place(ptr %allowed, ptr %mask)
  call void @kp_run(i64 %g, i1 true)
  br label %loop
}}

; an entry call is coming (kinac.rt.host.entry, HINT): spinning workers start a new spin
; window (a new generation with no new job: kp_run finds the last job's blocks all taken and
; returns); with HINT_WAKES sleeping ones are woken too, while the caller checks its arrays
define void @kinac_pool_hint() {{
entry:
  %old = atomicrmw add ptr @kp_gen, i32 1 seq_cst
{hint_wake}
  ret void
}}

; run fn(ctx, i) for i in [0, n), on the pool when it is free, else inline
define void @kinac_parallel(ptr %fn, ptr %ctx, i64 %n) {{
entry:
  %workers = load atomic i32, ptr @kp_workers monotonic, align 4
  %none = icmp eq i32 %workers, 0
  %one = icmp ule i64 %n, 1
  %huge = icmp ugt i64 %n, 65535
  %few = or i1 %none, %one
  %serial = or i1 %few, %huge
  br i1 %serial, label %inline, label %lock
lock:
  %pair = cmpxchg ptr @kp_busy, i32 0, i32 1 acquire monotonic
  %got = extractvalue {{ i32, i1 }} %pair, 1
  br i1 %got, label %publish, label %inline
publish:
  %c0 = load atomic i64, ptr @kp_ctl monotonic, align 8
  %g0 = lshr i64 %c0, 32
  %g = add i64 %g0, 1
  %sl = and i64 %g, 1
  %fnp = getelementptr [2 x {{ ptr, ptr, i64 }}], ptr @kp_ring, i64 0, i64 %sl, i32 0
  %ctxp = getelementptr [2 x {{ ptr, ptr, i64 }}], ptr @kp_ring, i64 0, i64 %sl, i32 1
  %np = getelementptr [2 x {{ ptr, ptr, i64 }}], ptr @kp_ring, i64 0, i64 %sl, i32 2
  store atomic ptr %fn, ptr %fnp monotonic, align 8
  store atomic ptr %ctx, ptr %ctxp monotonic, align 8
  store atomic i64 %n, ptr %np monotonic, align 8
  %n32 = trunc i64 %n to i32
  store atomic i32 %n32, ptr @kp_left monotonic, align 4
  %c = shl i64 %g, 32
  %nhi = shl i64 %n, 16
  %cn = or i64 %c, %nhi
  store atomic i64 %cn, ptr @kp_ctl release, align 8
  call void @kp_note_caller()
  %old = atomicrmw add ptr @kp_gen, i32 1 seq_cst
  call void @kp_wake(ptr @kp_gen, i64 2147483647, ptr @kp_gen_sleepers)
  call void @kp_run(i64 %g, i1 false)
  br label %wait
wait:
  %l = load atomic i32, ptr @kp_left acquire, align 4
  %done = icmp eq i32 %l, 0
  br i1 %done, label %unlock, label %sleep
sleep:
  call void @kp_wait(ptr @kp_left, i32 %l, ptr @kp_left_sleepers)
  br label %wait
unlock:
  store atomic i32 0, ptr @kp_busy release, align 4
  ret void
inline:
  %i = phi i64 [ 0, %entry ], [ 0, %lock ], [ %i1, %body ]
  %more = icmp ult i64 %i, %n
  br i1 %more, label %body, label %exit
body:
  call void %fn(ptr %ctx, i64 %i)
  %i1 = add i64 %i, 1
  br label %inline
exit:
  ret void
}}
"""

# How long a waiter spins before it sleeps, in time-stamp-counter ticks (~62 us at 2.1 GHz).
# Same-process A/B on the 2-core VM at real-time priority (a quiet machine for the process),
# 15 alternations, best / p25 ms per call: block 5.34 / 5.58 asleep at once, 5.09 / 5.36
# spinning; MLP 3.48 / 3.60 against 3.38 / 3.55; under load (load 5-12) no difference either
# way. Yielding the core every 64 pauses (SPIN_YIELD) measured between the two.
SPIN_TICKS = 1 << 17
_SPIN_X86 = """
  %t0 = call i64 @llvm.readcyclecounter()
  br label %spin
spin:
  %now = load atomic i32, ptr %word monotonic, align 4
  %moved = icmp ne i32 %now, %val
  br i1 %moved, label %done, label %pause
pause:
  call void @llvm.x86.sse2.pause()
  %t = call i64 @llvm.readcyclecounter()
  %dt = sub i64 %t, %t0
  %more = icmp ult i64 %dt, {ticks}
  br i1 %more, label %spin, label %sleep
"""
# the same, giving the core away (sched_yield) every 64 pauses: on a loaded machine the
# spinning thread lets a runnable one (the caller, another process) have its core
_SPIN_YIELD_X86 = """
  %t0 = call i64 @llvm.readcyclecounter()
  br label %spin
spin:
  %n = phi i32 [ 0, %entry ], [ %n1, %maybe ], [ %n1, %give ]
  %now = load atomic i32, ptr %word monotonic, align 4
  %moved = icmp ne i32 %now, %val
  br i1 %moved, label %done, label %pause
pause:
  call void @llvm.x86.sse2.pause()
  %n1 = add i32 %n, 1
  %t = call i64 @llvm.readcyclecounter()
  %dt = sub i64 %t, %t0
  %more = icmp ult i64 %dt, {ticks}
  %low = and i32 %n1, 63
  %turn = icmp eq i32 %low, 0
  br i1 %more, label %maybe, label %sleep
maybe:
  br i1 %turn, label %give, label %spin
give:
  %y = call i64 (i64, ...) @syscall(i64 24)
  br label %spin
"""
_SPIN_DECLS = "declare i64 @llvm.readcyclecounter()\ndeclare void @llvm.x86.sse2.pause()\n"
SPIN_YIELD = False
# Blocks from both ends of a job (kp_run): the small block's kernels split the same rows the
# same way one after the other (a product's two row blocks, then the map's four tasks of the
# same rows), so the caller's half of each job reads what it wrote itself. False: every
# thread takes the next block from the bottom (as before 2026-12-02d).
SIDES = True


def pool_ir(
    futex: int,
    spin_ticks: int | None = None,
    min_rows: int | None = None,
    min_flops: int | None = None,
    spin_yield: bool | None = None,
    balanced: bool | None = None,
    threads: int | None = None,
    sides: bool | None = None,
    avoid: bool | None = None,
    hint_wakes: bool | None = None,
) -> str:
    """The pool and the split ``sgemm``/``dgemm`` as LLVM IR (``futex``: the syscall number;
    ``spin_ticks``: waiters spin that many TSC ticks before they sleep, x86-64 only;
    ``spin_yield``: the spin calls ``sched_yield`` every 64 pauses; ``balanced``: the block
    rule (``BALANCED``); ``threads``: split as for that many threads whatever the pool has,
    for tests; ``sides``: the caller takes a job's blocks from the bottom and the workers from
    the top (``SIDES``), else all from the bottom; ``avoid``: a worker that starts a job on
    the caller's CPU moves off it (``AVOID``, x86-64); ``hint_wakes``: the hint wakes sleeping
    workers too (``HINT_WAKES``); the others default to the module's constants)."""
    x86 = platform.machine() == "x86_64"  # the spin reads the TSC and pauses: x86-64 only
    ticks = (SPIN_TICKS if x86 else 0) if spin_ticks is None else spin_ticks
    yielding = SPIN_YIELD if spin_yield is None else spin_yield
    head = (_SPIN_YIELD_X86 if yielding else _SPIN_X86).format(ticks=ticks)
    head = head if ticks else "  br label %sleep"
    two = SIDES if sides is None else sides
    wakes = HINT_WAKES if hint_wakes is None else hint_wakes
    text = _POOL.format(
        futex=futex,
        wait=_WAIT,
        wake=_WAKE,
        spin=head,
        sides="true" if two else "false",
        hint_wake=_HINT_WAKE if wakes else "",
    )
    text += _SPIN_DECLS if ticks else ""
    text += place_ir((AVOID if avoid is None else avoid) and x86)
    text += gemm_ir(
        MIN_BLOCK_ROWS if min_rows is None else min_rows,
        MIN_SPLIT_FLOPS if min_flops is None else min_flops,
        BLOCKS_PER_THREAD,
        BALANCED if balanced is None else balanced,
        threads,
    )
    return text


def thread_count() -> int:
    env = os.environ.get("KINAC_NUM_THREADS")
    if env:
        return max(1, int(env))
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1


@functools.cache
def start_pool(blas: tuple[tuple[str, int], ...]) -> dict[str, int] | None:
    """Compile and load the pool, start its workers; addresses of ``kinac_[sd]gemm``.

    ``blas`` binds ``kinac_blas_sgemm`` / ``kinac_blas_dgemm`` (single-threaded calls).
    Returns ``None`` where the pool cannot run (not Linux x86-64 / aarch64).
    """
    futex = _FUTEX.get(platform.machine())
    if futex is None or platform.system() != "Linux":
        return None
    from kinac.codegen.llvm import compile_object, host_target, jit_load

    exports = ("kinac_pool_worker", "kinac_parallel", "kinac_sgemm", "kinac_dgemm")
    image = jit_load(
        compile_object(pool_ir(futex), host_target()), dict(blas), (*exports, "kinac_pool_hint")
    )
    _IMAGES.append(image)
    _HINTS.append(hint_function(image.addresses["kinac_pool_hint"]))
    worker = ctypes.CFUNCTYPE(None)(image.addresses["kinac_pool_worker"])
    for i in range(thread_count() - 1):
        threading.Thread(target=worker, name=f"kinac-pool-{i}", daemon=True).start()
    return {n: image.addresses[n] for n in exports}


_IMAGES: list[object] = []  # the pool's code stays mapped for the life of the process
_HINTS: list[Callable[[], None]] = []  # the running pool's kinac_pool_hint, once started

# An entry call tells the pool it is coming before it checks its arrays (HostEntry calls
# ``pool_hint()``): between two calls of the small block the caller spends ~35-55 us in Python
# (slower than the same code alone: the call just evicted the interpreter's data), about the
# workers' spin window, so the worker slept before nearly every call (390 of 400 calls at
# real-time priority) and the first step waited for its wake (the first RMSNorm 64 us, the
# same kernel later in the call 15 us). The hint gives it a new spin window, or wakes it, while
# the Python part runs. False: no hint (as before 2026-12-02e; benches/cpu_ab.py hint=0).
HINT = True
# The hint wakes sleeping workers too (a call after a pause, or after the caller's own work,
# gets its workers ~40 us sooner), or only restarts the spin of those still spinning (calls back
# to back). False: under load the woken worker spun on a core another process needed
# (docs/host.md).
HINT_WAKES = False
_HINT_WAKE = "  call void @kp_wake(ptr @kp_gen, i64 2147483647, ptr @kp_gen_sleepers)"


def hint_function(address: int) -> Callable[[], None]:
    """``kinac_pool_hint`` of a pool image at ``address`` as a Python callable."""
    return ctypes.CFUNCTYPE(None)(address)  # type: ignore[no-any-return]


def pool_hint() -> Callable[[], None] | None:
    """The running pool's hint (a call is coming), if the pool runs and ``HINT`` is on."""
    return _HINTS[0] if _HINTS and HINT else None


_KEEP: list[object] = []


def _serial_parallel() -> int:
    """``kinac_parallel`` without a pool: run the tasks one after the other."""
    task_t = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_int64)

    def run(fn: int, ctx: int, n: int) -> None:
        task = task_t(fn)
        for i in range(n):
            task(ctx, i)

    cb = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64)(run)
    _KEEP.append(cb)
    return ctypes.cast(cb, ctypes.c_void_p).value or 0


@functools.cache
def runtime_symbols() -> dict[str, int]:
    """Addresses of the runtime functions generated code calls.

    ``kinac_sgemm`` / ``kinac_dgemm`` (CBLAS ``?gemm``, ILP64) and ``kinac_parallel``: the pool's
    when it runs (large products split into single-threaded BLAS blocks), else the BLAS itself
    and a serial loop.
    """
    from kinac.rt.host.blas import raw_gemms, use_split_blas

    raw = raw_gemms()
    pool = None
    if use_split_blas():
        blas = (("kinac_blas_sgemm", raw["kinac_sgemm"]), ("kinac_blas_dgemm", raw["kinac_dgemm"]))
        pool = start_pool(blas)
    if pool is None:
        return {**raw, "kinac_parallel": _serial_parallel()}
    SPLIT.append(True)
    return {n: pool[n] for n in ("kinac_sgemm", "kinac_dgemm", "kinac_parallel")}


SPLIT: list[bool] = []  # non-empty once BLAS products go through the pool
