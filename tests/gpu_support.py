"""Helpers of the GPU back-end tests: run generated GPU kernels on the CPU, and references.

:func:`run_emulated` lowers a Graph with the ``emu`` flavour (the same kernels as for the GPU,
with the NVVM intrinsics turned into calls of ``kemu_*``), compiles it for the host and runs
each launch with one OS thread per GPU thread: ``kemu_sreg`` reads the thread's indices,
``kemu_shfl_*`` exchanges values within its warp of 32 threads, ``kemu_barrier`` waits for its
block; blocks run one after another (so shared memory is per block). A block's threads are
started once per launch and run its blocks in turn (a barrier between blocks), and a kernel
that neither shuffles nor waits at a barrier (its threads never meet: a map) runs its threads
one after another on the calling thread: starting an OS thread per GPU thread cost ~1 ms each
on a loaded 2-core machine, most of the emulated tests' time. cuBLAS calls are executed
in numpy from the column-major arguments :func:`kinac.rt.cuda.blas.colmajor` computes, which
checks the row-major to column-major translation too. So kernel indexing, vector loads,
shuffle reductions, fusion and buffer planning are tested on machines without a GPU.
"""

from __future__ import annotations

import _thread
import ctypes
import functools
import re
import shutil
import subprocess
import threading
from typing import Any

import numpy as np

from kinac.artifacts.gpu import GpuGemm, GpuLoweredEntry
from kinac.codegen.llvm import compile_object, host_target, jit_load
from kinac.ir.gpu.pipeline import lower_graph_gpu
from kinac.rt.cuda.blas import colmajor
from kinac.tir.graph import Graph
from kinac.tir.interp import NP_DTYPES, bf16_to_f32, f32_to_bf16

WARP = 32
_local = threading.local()
_errors: list[str] = []


class _Barrier:
    """A reusable barrier of ``n`` threads on raw locks: each waiter blocks on a lock of its own
    that the last to arrive releases (``threading.Barrier``'s Condition costs about twice as
    much, and the emulated kernels wait at one per shuffle). A wait longer than ``timeout``
    breaks it: every waiter, and every later wait, raises (a kernel that lost a thread)."""

    def __init__(self, n: int, timeout: float = 60) -> None:
        self.n, self.timeout = n, timeout
        self.mutex = _thread.allocate_lock()
        self.gate: list[Any] = []
        self.broken = False

    def wait(self) -> None:
        me = getattr(_local, "gate", None)
        if me is None:
            me = _local.gate = _thread.allocate_lock()
            me.acquire()  # held: the next acquire waits for the last arrival's release
        with self.mutex:
            if self.broken:
                raise RuntimeError("barrier broken by an earlier timeout")
            if len(self.gate) == self.n - 1:
                waiters, self.gate = self.gate, []
                for w in waiters:
                    w.release()
                return
            self.gate.append(me)
        if me.acquire(timeout=self.timeout) and not self.broken:
            return
        with self.mutex:
            self.broken = True
            waiters, self.gate = self.gate, []
        for w in waiters:
            if w is not me:
                w.release()
        me.acquire(blocking=False)  # held again, whoever released it meanwhile
        raise RuntimeError(f"barrier of {self.n} threads timed out after {self.timeout:g} s")


class _Warp:
    def __init__(self, n: int) -> None:
        self.slots: list[Any] = [0] * n
        self.bar = _Barrier(n)

    def exchange(self, lane: int, v: Any, off: int) -> Any:
        self.slots[lane] = v
        self.bar.wait()
        r = self.slots[lane ^ off]
        self.bar.wait()
        return r


def _sreg(which: int) -> int:
    return int(_local.ids[which])


def _shfl(v: Any, off: int) -> Any:
    try:
        return _local.warp.exchange(_local.lane, v, off)
    except Exception as e:  # noqa: BLE001 - report after the launch
        _errors.append(f"shuffle: {e!r}")
        return v


def _barrier() -> None:
    try:
        _local.block_bar.wait()
    except Exception as e:  # noqa: BLE001
        _errors.append(f"barrier: {e!r}")


_CB = {
    "kemu_sreg": ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.c_int32)(_sreg),
    "kemu_shfl_f32": ctypes.CFUNCTYPE(ctypes.c_float, ctypes.c_float, ctypes.c_int32)(_shfl),
    "kemu_shfl_i32": ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.c_int32, ctypes.c_int32)(_shfl),
    "kemu_barrier": ctypes.CFUNCTYPE(None)(_barrier),
}
_SYMS = {n: ctypes.cast(f, ctypes.c_void_p).value or 0 for n, f in _CB.items()}


def launch(
    addr: int, nargs: int, grid: int, block: int, args: list[int], threads: bool = True
) -> None:
    """Run one kernel on the CPU: ``grid`` blocks of ``block`` threads (see the module doc);
    ``threads=False`` for a kernel whose threads never meet (no shuffle, no barrier)."""
    fn = ctypes.CFUNCTYPE(None, *([ctypes.c_void_p] * nargs))(addr)
    assert block % WARP == 0, block
    if not threads:
        for bid in range(grid):
            for tid in range(block):
                _local.ids = (tid, bid, block, grid)
                fn(*args)
    else:
        warps = [_Warp(WARP) for _ in range(block // WARP)]
        bar = _Barrier(block)  # the kernel's barrier (reused per block)
        done = _Barrier(block)  # a block ends before the next begins

        def run(tid: int) -> None:
            _local.warp, _local.lane, _local.block_bar = warps[tid // WARP], tid % WARP, bar
            for bid in range(grid):
                _local.ids = (tid, bid, block, grid)
                fn(*args)
                try:
                    done.wait()
                except Exception as e:  # noqa: BLE001 - report after the launch
                    _errors.append(f"end of block {bid}: {e!r}")
                    return

        pool = [threading.Thread(target=run, args=(t,)) for t in range(block)]
        for t in pool:
            t.start()
        for t in pool:
            t.join()
    if _errors:
        msg = "; ".join(_errors[:3])
        _errors.clear()
        raise RuntimeError(f"emulated launch failed: {msg}")


_MEET = ("@kemu_shfl", "@kemu_barrier")


@functools.cache
def _meeting(llvm_ir: str) -> frozenset[str]:
    """The functions of a module whose threads meet (a shuffle or a barrier), or that call
    a function of the module (which might): they need one OS thread per GPU thread."""
    bodies = re.split(r"^define [^@]*@", llvm_ir, flags=re.M)[1:]
    names = {b[: b.index("(")] for b in bodies}
    out = set()
    for b in bodies:
        name, body = b[: b.index("(")], b[: b.find("\n}")]
        calls = set(re.findall(r"call [^@]*@([\w.$]+)\(", body))
        if any(m in body for m in _MEET) or calls & (names - {name}):
            out.add(name)
    return frozenset(out)


def _typed(raw: np.ndarray, dt: str) -> np.ndarray:
    return raw.view(NP_DTYPES[dt])


def _to_f64(a: np.ndarray, dt: str) -> np.ndarray:
    return bf16_to_f32(a).astype(np.float64) if dt == "bf16" else a.astype(np.float64)


def emulate_gemm(g: GpuGemm, buf: Any) -> None:
    """Execute a GpuGemm through its column-major arguments, in numpy (f64 accumulation)."""
    cm = colmajor(g)
    a_bufs, b_bufs, c_bufs = (cm.batch_bufs(w, g.batch) for w in "abc")  # per batch (grouped)
    for i in range(g.batch):
        a_t, c_t = _typed(buf(a_bufs[i]), g.dtype), _typed(buf(c_bufs[i]), g.out_dtype)
        b_t = _typed(buf(b_bufs[i]), g.dtype)
        osz = c_t.itemsize

        def mat(t: np.ndarray, off: int, rows: int, cols: int, ld: int, trans: bool) -> np.ndarray:
            r, c = (cols, rows) if trans else (rows, cols)
            sz = t.itemsize
            v = np.lib.stride_tricks.as_strided(t[off:], (r, c), (sz, ld * sz))
            return v.T if trans else v

        a = _to_f64(mat(a_t, cm.a_offs[i], cm.m, cm.k, cm.lda, cm.transa), g.dtype)
        b = _to_f64(mat(b_t, cm.b_offs[i], cm.k, cm.n, cm.ldb, cm.transb), g.dtype)
        c = a @ b  # (m_c, n_c), column-major element (r, s) at r + s * ldc
        if g.epilogue == "bias":
            c = c + _to_f64(_typed(buf(g.epi), g.out_dtype)[: cm.m], g.out_dtype)[:, None]
        elif g.epilogue == "residual":
            rt = _typed(buf(g.epi), g.out_dtype)
            r = np.lib.stride_tricks.as_strided(
                rt[cm.c_offs[i] :], (cm.m, cm.n), (osz, cm.ldc * osz)
            )
            c = c + _to_f64(r, g.out_dtype)
        dst = np.lib.stride_tricks.as_strided(
            c_t[cm.c_offs[i] :], (cm.m, cm.n), (osz, cm.ldc * osz)
        )
        dst[...] = f32_to_bf16(c.astype(np.float32)) if g.out_dtype == "bf16" else c
    del b_t


@functools.cache
def _image(lw: GpuLoweredEntry) -> Any:
    return jit_load(compile_object(lw.llvm_ir, host_target()), _SYMS, lw.functions)


def emulated(graph: Graph) -> GpuLoweredEntry:
    return lower_graph_gpu(graph, flavour="emu")


def run_emulated(graph: Graph, *inputs: np.ndarray) -> tuple[np.ndarray, ...]:
    """Run ``graph``'s GPU lowering on the CPU (bf16 arrays as uint16 bit patterns)."""
    lw = emulated(graph)
    image = _image(lw)
    bufs: dict[str, np.ndarray] = {}
    for i, (x, p) in enumerate(zip(inputs, lw.params, strict=True)):
        bufs[f"param{i}"] = (
            np.ascontiguousarray(x, dtype=NP_DTYPES[p.dtype]).reshape(-1).view(np.uint8)
        )
    outs = []
    for j, o in enumerate(lw.outputs):
        n = max(1, int(np.prod(o.shape)))
        raw = np.full(n * np.dtype(NP_DTYPES[o.dtype]).itemsize, 0xFF, dtype=np.uint8)
        bufs[f"out{j}"] = raw
        outs.append((raw, o))
    bufs["arena"] = np.full(lw.arena_bytes + 64, 0xFF, dtype=np.uint8)
    status = np.zeros(lw.status_slots, dtype=np.int64)
    bufs["status"] = status.view(np.uint8)

    def buf(name: str) -> np.ndarray:
        if name.startswith("arena+"):
            return bufs["arena"][int(name[6:]) :]
        return bufs[name]

    for k, step in enumerate(lw.steps):
        if step.gemm is not None:
            emulate_gemm(step.gemm, buf)
            continue
        for ln in step.launches:
            ptrs = [buf(a).ctypes.data for a in ln.args]
            meet = ln.function in _meeting(lw.llvm_ir)
            launch(image.addresses[ln.function], len(ptrs), ln.grid, ln.block, ptrs, meet)
        if status[0]:
            raise IndexError(f"gather index {status[3]} out of range in step {k} ({step.sym})")
    return tuple(raw.view(NP_DTYPES[o.dtype]).reshape(o.shape).copy() for raw, o in outs)


def assert_ptxas_accepts(graph: Graph, arch: str = "sm_90") -> None:
    """``graph``'s GPU lowering through LLVM's PTX back end and ``ptxas`` (when installed): the
    emulator runs the kernels' LLVM IR, this checks the real assembler takes the PTX a GPU
    would run (a NaN or extremum path can emit what LLVM accepts and ptxas does not)."""
    if shutil.which("ptxas") is None:
        return
    from kinac.codegen.ptx import compile_ptx

    ptx = compile_ptx(lower_graph_gpu(graph).llvm_ir, arch)
    run = subprocess.run(
        ["ptxas", f"-arch={arch}", "-o", "/dev/null", "-"],
        input=ptx,
        text=True,
        capture_output=True,
    )
    assert run.returncode == 0, run.stderr
