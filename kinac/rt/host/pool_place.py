"""Keeping the host pool's workers off the caller's CPU (:mod:`kinac.rt.host.pool`), as LLVM IR.

Why a module of its own: where the kernel's scheduler puts a woken worker is outside the
pool's control, and the measurements that made this necessary belong next to the code that
answers them (docs/host.md, "The pool's worker kept off the caller's CPU").
"""

from __future__ import annotations

import functools

# A worker on the caller's CPU (AVOID, 2026-12-02e): the caller notes its CPU when it
# publishes a job; a worker that starts the job on that same CPU narrows its affinity to the
# CPUs it started with minus that one (sched_setaffinity moves it at once; a mask with no
# usable CPU is refused by the kernel and changes nothing). On the 2-core VM the scheduler
# left the worker woken from its futex on the caller's core for whole batches of calls (both
# threads on CPU 0, CPU 1 idle: the block at its one-thread time, 5.8 against 2.9 ms) in about
# half the batches of benches/cpu.py (a pause before each batch puts the worker to sleep).
# Later jobs find the worker elsewhere and pay one rdtscp; the mask follows the caller if it
# moves. x86-64 only (the CPU number is rdtscp's TSC_AUX, as Linux sets it).
AVOID = True

_PLACE_X86 = """
declare { i64, i32 } @llvm.x86.rdtscp()

define internal i32 @kp_cpu() {
entry:
  %r = call { i64, i32 } @llvm.x86.rdtscp()
  %aux = extractvalue { i64, i32 } %r, 1
  %cpu = and i32 %aux, 4095
  ret i32 %cpu
}

define internal void @kp_note_caller() {
entry:
  %cpu = call i32 @kp_cpu()
  store atomic i32 %cpu, ptr @kp_caller_cpu monotonic, align 4
  ret void
}

define internal void @kp_place(ptr %allowed, ptr %mask) {
entry:
  %me = call i32 @kp_cpu()
  %caller = load atomic i32, ptr @kp_caller_cpu monotonic, align 4
  %same = icmp eq i32 %me, %caller
  %fits = icmp ult i32 %me, 1024
  %move = and i1 %same, %fits
  br i1 %move, label %narrow, label %done
narrow:
  call void @llvm.memcpy.p0.p0.i64(ptr %mask, ptr %allowed, i64 128, i1 false)
  %w = lshr i32 %me, 6
  %w64 = zext i32 %w to i64
  %b = and i32 %me, 63
  %b64 = zext i32 %b to i64
  %bit = shl i64 1, %b64
  %nbit = xor i64 %bit, -1
  %p = getelementptr inbounds i64, ptr %mask, i64 %w64
  %old = load i64, ptr %p, align 8
  %new = and i64 %old, %nbit
  store i64 %new, ptr %p, align 8
  %r = call i64 (i64, ...) @syscall(i64 203, i64 0, i64 128, ptr %mask)
  ret void
done:
  ret void
}

declare void @llvm.memcpy.p0.p0.i64(ptr, ptr, i64, i1)
"""
_PLACE_NONE = """
define internal void @kp_note_caller() {
entry:
  ret void
}

define internal void @kp_place(ptr %allowed, ptr %mask) {
entry:
  ret void
}
"""


@functools.cache
def has_rdtscp() -> bool:
    """Whether this x86-64 CPU has ``rdtscp`` (some hypervisors hide it: it would fault)."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("flags"):
                    return "rdtscp" in line.split()
    except OSError:
        pass
    return False


def place_ir(avoid: bool) -> str:
    """``kp_note_caller`` (the caller, when it publishes a job) and ``kp_place`` (a worker,
    when it starts one) for the pool's x86-64 IR: the placement above with ``avoid`` where the
    CPU has ``rdtscp``, else no-ops."""
    return _PLACE_X86 if avoid and has_rdtscp() else _PLACE_NONE
