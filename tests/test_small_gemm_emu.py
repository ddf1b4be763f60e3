"""The generated small tensor-core GEMM, run on the CPU: every lane's swizzle, fragment and
epilogue against a float64 reference.

The kernel's NVPTX IR is rewritten for the host by the attention kernel's emulation
(``tests/test_attention_emu.py``: ``ldmatrix``/``mma.sync`` as Python functions over the 32
lanes of a warp, ``cp.async`` a copy, one OS thread per GPU thread); the programmatic-launch
prologue is dropped (no ``__nvvm_reflect`` on the host). Small shapes (a few blocks) keep it
under a second or two; the GPU tests (``tests/test_small_gemm_gpu.py``) run the real sizes.
"""

from __future__ import annotations

import ctypes
import re
import threading
from typing import Any

import numpy as np
import pytest
import test_attention_emu as emu

from kinac.codegen.llvm import compile_object, host_target, jit_load
from kinac.ir.gpu.emit import NVPTX_TRIPLE, PDL_MIN_ARCH
from kinac.ir.gpu.small_gemm_kernel import (
    SmallGemmParams,
    check_params,
    grid,
    kernel_ir,
    kernel_name,
    smem_bytes,
)
from kinac.tir.interp import bf16_to_f32, f32_to_bf16


def host_ir(p: SmallGemmParams) -> str:
    """The kernel's IR for the host: the attention emulation's rewrite; the PDL prologue runs
    (as on sm_90) without its ``griddepcontrol`` calls, its L2 prefetches recorded."""
    _, body = kernel_ir(p)
    name = kernel_name(p)
    ir = re.sub(r"@\S+\.cuda_arch = .*\n", "", body)
    ir = re.sub(r"%pdl\.arch = call i32 @__nvvm_reflect\(.*\)",
                f"%pdl.arch = add i32 0, {PDL_MIN_ARCH}", ir)  # fmt: skip
    ir = ir.replace("@llvm.nvvm.prefetch.global.L2.evict.last(", "@kemu_prefetch(")
    ir = re.sub(r"  call void @llvm\.nvvm\.griddepcontrol\.[\w.]+\(\)\n", "", ir)
    ir = emu.host_mma(emu.host_threads(ir, f"@{name}_smem", smem_bytes(p)))
    assert NVPTX_TRIPLE not in ir
    return (
        "declare float @llvm.sqrt.f32(float)\ndeclare void @kemu_prefetch(ptr)\n"
        + emu._EMU_DEFS
        + ir
    )


PREFETCHED: list[int] = []  # the addresses the kernel prefetched (kemu_prefetch)
_PREFETCH = ctypes.CFUNCTYPE(None, ctypes.c_void_p)(lambda a: PREFETCHED.append(a or 0))


def run_kernel(p: SmallGemmParams, *inputs: np.ndarray) -> np.ndarray:
    """Run the kernel on bf16 bit patterns (``inputs`` in its parameter order): [M, n_out]."""
    name = kernel_name(p)
    syms = {**emu._SYMS, "kemu_prefetch": ctypes.cast(_PREFETCH, ctypes.c_void_p).value or 0}
    image = jit_load(compile_object(host_ir(p), host_target(), 1), syms, (name,))
    fn = ctypes.CFUNCTYPE(None, *([emu._P] * (1 + p.n_inputs)))(image.addresses[name])
    o = np.full((p.m, p.n_out), 0x7FC0, dtype=np.uint16)
    bufs = [np.ascontiguousarray(x) for x in inputs]
    ptrs = [o.ctypes.data, *(x.ctypes.data for x in bufs)]
    gx, gy, _ = grid(p)
    for by in range(gy):
        for bx in range(gx):
            warps = [emu._Warp() for _ in range(p.warps)]
            bar = threading.Barrier(p.threads, timeout=120)

            def run(tid: int, ids: tuple[int, int] = (bx, by), warps: Any = warps, bar: Any = bar) -> None:  # fmt: skip
                emu._local.ids = (tid, *ids, 0)
                emu._local.warp, emu._local.lane = warps[tid // 32], tid % 32
                emu._local.block_bar, emu._local.dtype = bar, p.dtype
                fn(*ptrs)

            ts = [threading.Thread(target=run, args=(t,)) for t in range(p.threads)]
            for t in ts:
                t.start()
            for t in ts:
                t.join()
            if emu._errors:
                msg = "; ".join(emu._errors[:3])
                emu._errors.clear()
                raise RuntimeError(f"emulated launch failed: {msg}")
    del image
    return o


DTYPE = ["bf16"]  # the dtype bf/val round to (the case's: set by the test)


def bf(x: np.ndarray) -> np.ndarray:
    """``x`` rounded to the case's dtype, as its bit patterns."""
    if DTYPE[0] == "f16":
        return np.asarray(x, dtype=np.float16).view(np.uint16)
    return f32_to_bf16(x.astype(np.float32))


def val(h: np.ndarray) -> np.ndarray:
    if DTYPE[0] == "f16":
        return h.view(np.float16).astype(np.float64)
    return bf16_to_f32(h).astype(np.float64)


def reference(p: SmallGemmParams, ins: list[np.ndarray]) -> np.ndarray:
    """float64 of the unfused program on the bf16 inputs (the norm's output rounded to bf16,
    as the row kernel writes it; gate and up rounded, as their tensors held them)."""
    a = val(ins[0])
    ws = [val(w) for w in ins[1 : 1 + len(p.ns)]]
    if p.norm:
        wn = val(ins[1 + len(p.ns)])
        a = a / np.sqrt((a * a).mean(-1, keepdims=True) + p.eps) * wn
        a = val(bf(a))
    if p.epilogue == "swiglu":
        g, u = val(bf(a @ ws[0])), val(bf(a @ ws[1]))
        return g / (1 + np.exp(-g)) * u
    out = np.concatenate([a @ w for w in ws], -1)
    if p.epilogue == "residual":
        out = out + val(ins[-1])
    return out


CASES = {
    # two weights side by side from one launch (q and k, say), the norm as prologue
    "norm-qk": SmallGemmParams(
        "bf16", 32, 128, (64, 64), 16, "", True, 1e-6, (0, 1, 2, 3), 4, ksplit=2,
        prefetch=("a", "w", "wn"),
    ),  # 16-row blocks: a warp's row block, 8 threads a row in the norm
    "residual": SmallGemmParams(
        "bf16", 64, 192, (64,), 32, "residual", False, 0.0, (0, 1, 2), 3, ksplit=2,
        prefetch=("a", "w", "res"), early_res=True,
    ),  # 3 groups over 2 warps: the last round has one; 2 row blocks share the weight's lines
    "norm-swiglu": SmallGemmParams(
        "bf16", 32, 128, (64, 64), 32, "swiglu", True, 1e-6, (0, 1, 2, 3), 4,
        prefetch=("w", "wn"),
    ),
    # the norm folded into the products: the k split's partial sums of squares, a ragged round
    "fold-qk": SmallGemmParams(
        "bf16", 32, 192, (64, 64), 32, "", True, 1e-6, (0, 1, 2, 3), 4, ksplit=2, fold=True,
    ),
    "fold-swiglu-f16": SmallGemmParams(
        "f16", 32, 128, (64, 64), 32, "swiglu", True, 1e-6, (0, 1, 2, 3), 4, fold=True,
    ),  # f16 fragments are <2 x half>, not i32
    # 16-row blocks sharing the weight's lines unevenly
    "m16-residual": SmallGemmParams(
        "bf16", 48, 128, (64,), 16, "residual", False, 0.0, (0, 1, 2), 3, ksplit=2,
        prefetch=("w",),
    ),  # 3 row blocks share the weight's 128 lines: 43, 43, 42
}  # fmt: skip


@pytest.mark.parametrize("case", sorted(CASES))
def test_small_gemm_on_cpu(case: str) -> None:
    p = CASES[case]
    assert check_params(p) is None
    DTYPE[0] = p.dtype
    rng = np.random.default_rng(7)
    ins = [bf(rng.standard_normal((p.m, p.k)))]
    ins += [bf(rng.standard_normal((p.k, n)) / np.sqrt(p.k)) for n in p.ns]
    if p.norm:
        ins.append(bf(1 + 0.1 * rng.standard_normal(p.k)))
    if p.epilogue == "residual":
        ins.append(bf(rng.standard_normal((p.m, p.n_out))))
    PREFETCHED.clear()
    out = val(run_kernel(p, *ins))
    ref = reference(p, ins)
    # the grid prefetched every 128-byte line of each true input it reads, and nothing else
    nw = len(p.ns)
    roles = {"a": p.args[:1], "w": p.args[1 : 1 + nw], "wn": p.args[1 + nw : 2 + nw],
             "res": p.args[-1:]}  # fmt: skip
    lines = {(i, o) for r in p.prefetch for i in roles[r] for o in range(0, ins[i].nbytes, 128)}
    got = set()
    for a in PREFETCHED:
        hit = [
            (i, a - x.ctypes.data) for i, x in enumerate(ins) if 0 <= a - x.ctypes.data < x.nbytes
        ]
        assert len(hit) == 1 and hit[0][1] % 128 == 0, (hex(a), hit)
        got.add(hit[0])
    assert got == lines and len(PREFETCHED) <= 2 * len(lines)
    err = np.linalg.norm(out - ref) / np.linalg.norm(ref)
    assert err < 8e-3, err
    assert np.abs(out - ref).max() < 0.05 * np.abs(ref).max() + 0.02
