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

_POOL = """
@kp_gen = internal global i32 0
@kp_left = internal global i32 0
@kp_busy = internal global i32 0
@kp_ctl = internal global i64 0
@kp_workers = internal global i32 0
@kp_ring = internal global [2 x {{ ptr, ptr, i64 }}] zeroinitializer
@kp_gen_sleepers = internal global i32 0
@kp_left_sleepers = internal global i32 0

declare i64 @syscall(i64, ...)

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

; claim and run blocks of job %g until none is left
define internal void @kp_run(i64 %g) {{
entry:
  %sl = and i64 %g, 1
  %fnp = getelementptr [2 x {{ ptr, ptr, i64 }}], ptr @kp_ring, i64 0, i64 %sl, i32 0
  %ctxp = getelementptr [2 x {{ ptr, ptr, i64 }}], ptr @kp_ring, i64 0, i64 %sl, i32 1
  %np = getelementptr [2 x {{ ptr, ptr, i64 }}], ptr @kp_ring, i64 0, i64 %sl, i32 2
  br label %claim
claim:
  %fn = load atomic ptr, ptr %fnp monotonic, align 8
  %ctx = load atomic ptr, ptr %ctxp monotonic, align 8
  %n = load atomic i64, ptr %np monotonic, align 8
  %c = load atomic i64, ptr @kp_ctl acquire, align 8
  %cg = lshr i64 %c, 32
  %same = icmp eq i64 %cg, %g
  br i1 %same, label %idx, label %out
idx:
  %i = and i64 %c, 4294967295
  %more = icmp ult i64 %i, %n
  br i1 %more, label %cas, label %out
cas:
  %c1 = add i64 %c, 1
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
  call void @kp_run(i64 %g)
  br label %loop
}}

; run fn(ctx, i) for i in [0, n), on the pool when it is free, else inline
define void @kinac_parallel(ptr %fn, ptr %ctx, i64 %n) {{
entry:
  %workers = load atomic i32, ptr @kp_workers monotonic, align 4
  %none = icmp eq i32 %workers, 0
  %one = icmp ule i64 %n, 1
  %serial = or i1 %none, %one
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
  store atomic i64 %c, ptr @kp_ctl release, align 8
  %old = atomicrmw add ptr @kp_gen, i32 1 seq_cst
  call void @kp_wake(ptr @kp_gen, i64 2147483647, ptr @kp_gen_sleepers)
  call void @kp_run(i64 %g)
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

# ?gemm split into blocks of rows (or of columns when there are fewer rows than columns)
_GEMM = """
%gemm_{t} = type {{ i32, i32, i32, i64, i64, i64, {ty}, ptr, i64, ptr, i64, {ty}, ptr, i64, i64, i1 }}
declare void @kinac_blas_{t}gemm(i32, i32, i32, i64, i64, i64, {ty}, ptr, i64, ptr, i64, {ty}, ptr, i64)

define internal void @kp_{t}gemm_block(ptr %a, i64 %i) {{
entry:
  %f = load %gemm_{t}, ptr %a
  %o = extractvalue %gemm_{t} %f, 0
  %ta = extractvalue %gemm_{t} %f, 1
  %tb = extractvalue %gemm_{t} %f, 2
  %m = extractvalue %gemm_{t} %f, 3
  %n = extractvalue %gemm_{t} %f, 4
  %k = extractvalue %gemm_{t} %f, 5
  %al = extractvalue %gemm_{t} %f, 6
  %pa = extractvalue %gemm_{t} %f, 7
  %lda = extractvalue %gemm_{t} %f, 8
  %pb = extractvalue %gemm_{t} %f, 9
  %ldb = extractvalue %gemm_{t} %f, 10
  %be = extractvalue %gemm_{t} %f, 11
  %pc = extractvalue %gemm_{t} %f, 12
  %ldc = extractvalue %gemm_{t} %f, 13
  %chunk = extractvalue %gemm_{t} %f, 14
  %rows = extractvalue %gemm_{t} %f, 15
  %lo = mul i64 %i, %chunk
  %total = select i1 %rows, i64 %m, i64 %n
  %end = add i64 %lo, %chunk
  %fits = icmp ult i64 %end, %total
  %hi = select i1 %fits, i64 %end, i64 %total
  %cnt = sub i64 %hi, %lo
  br i1 %rows, label %byrow, label %bycol
byrow:
  %tra = icmp eq i32 %ta, 112
  %lda_lo = mul i64 %lo, %lda
  %aoff = select i1 %tra, i64 %lo, i64 %lda_lo
  %a2 = getelementptr {ty}, ptr %pa, i64 %aoff
  %coff = mul i64 %lo, %ldc
  %c2 = getelementptr {ty}, ptr %pc, i64 %coff
  call void @kinac_blas_{t}gemm(i32 %o, i32 %ta, i32 %tb, i64 %cnt, i64 %n, i64 %k, {ty} %al, ptr %a2, i64 %lda, ptr %pb, i64 %ldb, {ty} %be, ptr %c2, i64 %ldc)
  ret void
bycol:
  %trb = icmp eq i32 %tb, 112
  %ldb_lo = mul i64 %lo, %ldb
  %boff = select i1 %trb, i64 %ldb_lo, i64 %lo
  %b2 = getelementptr {ty}, ptr %pb, i64 %boff
  %c3 = getelementptr {ty}, ptr %pc, i64 %lo
  call void @kinac_blas_{t}gemm(i32 %o, i32 %ta, i32 %tb, i64 %m, i64 %cnt, i64 %k, {ty} %al, ptr %pa, i64 %lda, ptr %b2, i64 %ldb, {ty} %be, ptr %c3, i64 %ldc)
  ret void
}}

define void @kinac_{t}gemm(i32 %o, i32 %ta, i32 %tb, i64 %m, i64 %n, i64 %k, {ty} %al, ptr %pa, i64 %lda, ptr %pb, i64 %ldb, {ty} %be, ptr %pc, i64 %ldc) {{
entry:
  %mn = mul i64 %m, %n
  %mnk = mul i64 %mn, %k
  %small = icmp ult i64 %mnk, {min_flops}
  br i1 %small, label %direct, label %split
direct:
  call void @kinac_blas_{t}gemm(i32 %o, i32 %ta, i32 %tb, i64 %m, i64 %n, i64 %k, {ty} %al, ptr %pa, i64 %lda, ptr %pb, i64 %ldb, {ty} %be, ptr %pc, i64 %ldc)
  ret void
split:
{threads}
{orient}
  %total = select i1 %rows, i64 %m, i64 %n
{chunking}
  %nb0 = add i64 %total, %chunk
  %nb1 = sub i64 %nb0, 1
  %nblocks = udiv i64 %nb1, %chunk
  %args = alloca %gemm_{t}
  %s0 = insertvalue %gemm_{t} undef, i32 %o, 0
  %s1 = insertvalue %gemm_{t} %s0, i32 %ta, 1
  %s2 = insertvalue %gemm_{t} %s1, i32 %tb, 2
  %s3 = insertvalue %gemm_{t} %s2, i64 %m, 3
  %s4 = insertvalue %gemm_{t} %s3, i64 %n, 4
  %s5 = insertvalue %gemm_{t} %s4, i64 %k, 5
  %s6 = insertvalue %gemm_{t} %s5, {ty} %al, 6
  %s7 = insertvalue %gemm_{t} %s6, ptr %pa, 7
  %s8 = insertvalue %gemm_{t} %s7, i64 %lda, 8
  %s9 = insertvalue %gemm_{t} %s8, ptr %pb, 9
  %s10 = insertvalue %gemm_{t} %s9, i64 %ldb, 10
  %s11 = insertvalue %gemm_{t} %s10, {ty} %be, 11
  %s12 = insertvalue %gemm_{t} %s11, ptr %pc, 12
  %s13 = insertvalue %gemm_{t} %s12, i64 %ldc, 13
  %s14 = insertvalue %gemm_{t} %s13, i64 %chunk, 14
  %s15 = insertvalue %gemm_{t} %s14, i1 %rows, 15
  store %gemm_{t} %s15, ptr %args
  call void @kinac_parallel(ptr @kp_{t}gemm_block, ptr %args, i64 %nblocks)
  ret void
}}
"""


_WORKERS = """  %w = load atomic i32, ptr @kp_workers monotonic, align 4
  %w64 = zext i32 %w to i64
  %threads = add i64 %w64, 1"""

# Balanced blocks (2026-12-02): as many blocks of about ``min_rows`` as fit, rounded down to a
# multiple of the thread count, so every thread gets the same share; one block without
# workers. Before, blocks were at least ``min_rows`` wide and the rest went to a last block:
# the block's [512,256] @ [256,704] products ran as 256 + 256 + 192 columns on two threads, so
# one thread did two blocks and the product took 2/3 of its single-threaded time, not 1/2.
_BALANCED = """  %want = mul i64 %threads, {blocks}
  %fit0 = add i64 %total, {min_rows_1}
  %fit = udiv i64 %fit0, {min_rows}
  %few = icmp ult i64 %fit, %want
  %nbw = select i1 %few, i64 %fit, i64 %want
  %over = icmp ugt i64 %nbw, %threads
  %extra = urem i64 %nbw, %threads
  %even = sub i64 %nbw, %extra
  %nbe = select i1 %over, i64 %even, i64 %nbw
  %solo = icmp ule i64 %threads, 1
  %nbs = select i1 %solo, i64 1, i64 %nbe
  %c0 = add i64 %total, %nbs
  %c1 = sub i64 %c0, 1
  %chunk0 = udiv i64 %c1, %nbs
  %chunk8 = add i64 %chunk0, 7
  %chunk = and i64 %chunk8, -8"""

# Rows when there are at least as many rows as columns, or enough for a block of ``min_rows``
# per thread: two threads on row blocks of [512,256] @ [256,704] took ~10% less wall time than
# on column blocks of the same size (same process, real-time priority, 2026-12-02), which ran
# slower side by side than one alone.
_ORIENT_BALANCED = """  %tall = icmp uge i64 %m, %n
  %per = mul i64 %threads, {min_rows}
  %deep = icmp uge i64 %m, %per
  %rows = or i1 %tall, %deep"""
_ORIENT_AT_LEAST = "  %rows = icmp uge i64 %m, %n"

# the rule until 2026-12-02 (``balanced=False``, for same-process A/Bs): a quarter of the rows
# per thread, rounded up to 8, and no thinner than ``min_rows``
_AT_LEAST = """  %want = mul i64 %threads, {blocks}
  %c0 = add i64 %total, %want
  %c1 = sub i64 %c0, 1
  %chunk0 = udiv i64 %c1, %want
  %chunk8 = add i64 %chunk0, 7
  %chunk9 = and i64 %chunk8, -8
  %thin = icmp ult i64 %chunk9, {min_rows}
  %chunk = select i1 %thin, i64 {min_rows}, i64 %chunk9"""
BALANCED = True


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


def pool_ir(
    futex: int,
    spin_ticks: int | None = None,
    min_rows: int | None = None,
    min_flops: int | None = None,
    spin_yield: bool | None = None,
    balanced: bool | None = None,
    threads: int | None = None,
) -> str:
    """The pool and the split ``sgemm``/``dgemm`` as LLVM IR (``futex``: the syscall number;
    ``spin_ticks``: waiters spin that many TSC ticks before they sleep, x86-64 only;
    ``spin_yield``: the spin calls ``sched_yield`` every 64 pauses; ``balanced``: the block
    rule (``BALANCED``); ``threads``: split as for that many threads whatever the pool has,
    for tests; the others default to the module's constants)."""
    x86 = platform.machine() == "x86_64"  # the spin reads the TSC and pauses: x86-64 only
    ticks = (SPIN_TICKS if x86 else 0) if spin_ticks is None else spin_ticks
    yielding = SPIN_YIELD if spin_yield is None else spin_yield
    head = (_SPIN_YIELD_X86 if yielding else _SPIN_X86).format(ticks=ticks)
    head = head if ticks else "  br label %sleep"
    text = _POOL.format(futex=futex, wait=_WAIT, wake=_WAKE, spin=head)
    text += _SPIN_DECLS if ticks else ""
    rows = MIN_BLOCK_ROWS if min_rows is None else min_rows
    even = BALANCED if balanced is None else balanced
    chunking = (_BALANCED if even else _AT_LEAST).format(
        blocks=BLOCKS_PER_THREAD, min_rows=rows, min_rows_1=rows - 1
    )
    orient = _ORIENT_BALANCED.format(min_rows=rows) if even else _ORIENT_AT_LEAST
    workers = _WORKERS if threads is None else f"  %threads = add i64 0, {threads}"
    for t, ty in (("s", "float"), ("d", "double")):
        text += _GEMM.format(
            t=t,
            ty=ty,
            min_flops=MIN_SPLIT_FLOPS if min_flops is None else min_flops,
            threads=workers,
            orient=orient,
            chunking=chunking,
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
    image = jit_load(compile_object(pool_ir(futex), host_target()), dict(blas), exports)
    _IMAGES.append(image)
    worker = ctypes.CFUNCTYPE(None)(image.addresses["kinac_pool_worker"])
    for i in range(thread_count() - 1):
        threading.Thread(target=worker, name=f"kinac-pool-{i}", daemon=True).start()
    return {n: image.addresses[n] for n in exports}


_IMAGES: list[object] = []  # the pool's code stays mapped for the life of the process
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
