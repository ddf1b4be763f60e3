"""The generated attention kernel, run on the CPU: every lane's indexing, swizzle and fragment.

The kernel's NVPTX IR is rewritten for the host (address spaces dropped, ``@smem`` a global
buffer, thread and block indices read from the running thread) and its warp-collective
instructions become calls of Python functions that implement the PTX ISA's definition of
them over all 32 lanes: ``ldmatrix.x4`` (each lane names a row address; lane ``l`` receives
row ``l / 4``, elements ``2 (l % 4)``, ``+1`` of each 8x8 matrix, or of its transpose) and
``mma.m16n8k16.row.col`` (the documented A, B, C fragment layouts). ``cp.async`` is a plain
copy (zero fill past ``src-size``). One OS thread per GPU thread, blocks one after another.
So the kernel's own choices (which address each lane gives, the swizzle, the reuse of the
S accumulators as P's A fragments, the masks and the online softmax) are checked against a
float64 reference on a machine without a GPU.
"""

from __future__ import annotations

import ctypes
import re
import threading
from dataclasses import replace
from typing import Any

import attention_emu_mbar as mbemu
import numpy as np
import pytest

from kinac.codegen.llvm import compile_object, host_target, jit_load
from kinac.ir.gpu.attention_kernel import attention_llvm_ir, grid, kernel_name, smem_bytes
from kinac.ir.gpu.attention_params import WGMMA_BOTH, AttnParams, AttnTiles, bhsd_params
from kinac.tir.interp import bf16_to_f32, f32_to_bf16

WARP = 32
_local = threading.local()
_errors: list[str] = []


class _Warp:
    """A rendezvous of ``n`` lanes (a warp, or a warpgroup of 128 threads): lane 0 computes a
    collective's results for all lanes."""

    def __init__(self, n: int = WARP) -> None:
        self.posts: list[Any] = [None] * n
        self.results: list[Any] = [None] * n
        self.bar = threading.Barrier(n, timeout=120)

    def collective(self, lane: int, post: Any, compute: Any) -> Any:
        self.posts[lane] = post
        self.bar.wait()
        if lane == 0:
            self.results = compute(self.posts)
        self.bar.wait()
        return self.results[lane]


_G, _T = np.arange(WARP) // 4, np.arange(WARP) % 4  # a lane's group and thread in group
_M = np.arange(4)[None, :]  # [1, 4]: the four 8x8 matrices of ldmatrix.x4


def _ldsm(addr: int, trans: int, out: int) -> None:
    def compute(addrs: list[int]) -> list[list[int]]:
        ad = np.array(addrs, dtype=np.int64)
        base = int(ad.min())
        mem = np.ctypeslib.as_array(
            (ctypes.c_uint16 * ((int(ad.max()) - base) // 2 + 8)).from_address(base)
        )
        if trans:  # element (row 2t + e, col g) of the stored matrix
            lo = ad[8 * _M + 2 * _T[:, None]] + 2 * _G[:, None]
            hi = ad[8 * _M + 2 * _T[:, None] + 1] + 2 * _G[:, None]
        else:  # row g, elements 2t, 2t + 1
            lo = ad[8 * _M + _G[:, None]] + 4 * _T[:, None]
            hi = lo + 2
        words = mem[(lo - base) // 2].astype(np.uint32) | (
            mem[(hi - base) // 2].astype(np.uint32) << 16
        )
        return words.tolist()  # [lane][matrix]

    try:
        regs = _local.warp.collective(_local.lane, addr, compute)
        arr = (ctypes.c_uint32 * 4).from_address(out)
        for i in range(4):
            arr[i] = regs[i]
    except Exception as e:  # noqa: BLE001 - reported after the launch
        _errors.append(f"ldmatrix: {e!r}")


def _halves(words: np.ndarray, dt: str) -> np.ndarray:
    """[n] u32 words -> [n, 2] f64 values (low half first)."""
    h = np.stack([words & 0xFFFF, words >> 16], -1).astype(np.uint16)
    return (bf16_to_f32(h) if dt == "bf16" else h.view(np.float16)).astype(np.float64)


# the m16n8k16 fragment layouts, per lane (g = lane / 4, t = lane % 4): A's four registers
# hold rows g, g + 8, g, g + 8 at columns 2t, 2t, 2t + 8, 2t + 8 (two halves each); B's two
# hold rows 2t, 2t + 8 (two each) of column g; C and D rows g, g, g + 8, g + 8, columns 2t, 2t + 1
_A_ROW = _G[:, None] + np.array([0, 8, 0, 8])
_A_COL = 2 * _T[:, None] + np.array([0, 0, 8, 8])
_C_ROW = _G[:, None] + np.array([0, 0, 8, 8])
_C_COL = 2 * _T[:, None] + np.array([0, 1, 0, 1])


def _mma(a: int, b: int, c: int, d: int) -> None:
    dt = _local.dtype

    def compute(posts: list[tuple[list[int], list[int], list[float]]]) -> list[list[float]]:
        av = _halves(np.array([p[0] for p in posts], dtype=np.uint32), dt)  # [32, 4, 2]
        bv = _halves(np.array([p[1] for p in posts], dtype=np.uint32), dt)  # [32, 2, 2]
        A = np.zeros((16, 16))
        A[_A_ROW, _A_COL] = av[..., 0]
        A[_A_ROW, _A_COL + 1] = av[..., 1]
        B = np.zeros((16, 8))
        for r in range(2):
            for h in range(2):
                B[2 * _T + 8 * r + h, _G] = bv[:, r, h]
        C = np.zeros((16, 8))
        C[_C_ROW, _C_COL] = np.array([p[2] for p in posts])
        D = (A @ B + C).astype(np.float32)
        return D[_C_ROW, _C_COL].tolist()

    try:
        ar = list((ctypes.c_uint32 * 4).from_address(a))
        br = list((ctypes.c_uint32 * 2).from_address(b))
        cr = list((ctypes.c_float * 4).from_address(c))
        res = _local.warp.collective(_local.lane, (ar, br, cr), compute)
        arr = (ctypes.c_float * 4).from_address(d)
        for i in range(4):
            arr[i] = res[i]
    except Exception as e:  # noqa: BLE001
        _errors.append(f"mma: {e!r}")


def _swizzled(off: Any) -> Any:
    """The 128-byte swizzle (of an int or an int array): byte address bits 4-6 XOR bits 7-9 (1024-byte aligned base)."""
    return off ^ (((off >> 7) & 7) << 4)


def _wg_layout(n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """m64nNk16 fragments per thread t of the warpgroup (w = t / 32, g = t % 32 / 4,
    q = t % 4, r0 = 16 w + g): A's rows and columns (as mma's A, rows offset by 16 w), and
    accumulator i's row r0 + 8 (i % 4 / 2), column 8 (i / 4) + 2 q + i % 2."""
    t = np.arange(128)[:, None]
    r0, q = 16 * (t // 32) + (t % 32) // 4, t % 4
    i = np.arange(n // 2)[None, :]
    return (r0 + np.array([0, 8, 0, 8]), 2 * q + np.array([0, 0, 8, 8]),
            r0 + 8 * ((i % 4) // 2), 8 * (i // 4) + 2 * q + i % 2)  # fmt: skip


def _wgmma(a: int, desc: int, c: int, d: int, n: int, trans: int, smem: int) -> None:
    """``wgmma.mma_async`` m64n{n}k16, A in registers, B through a 128B-swizzle descriptor
    (K-major; MN-major when ``trans``: LBO between 64-wide MN blocks, SBO between 8-deep K
    groups), f32 accumulators in the m64nN layout (per warp: rows 16 w + g, + 8)."""
    dt = _local.dtype
    nacc = n // 2
    start = ((desc & 0x3FFF) << 4) - ((smem >> 4) & 0x3FFF) * 16
    start %= 1 << 18
    lbo, sbo = ((desc >> 16) & 0x3FFF) << 4, ((desc >> 32) & 0x3FFF) << 4

    def compute(posts: list[tuple[list[int], list[float]]]) -> list[list[float]]:
        arow, acol, crow, ccol = _wg_layout(n)
        av = _halves(np.array([p[0] for p in posts], dtype=np.uint32), dt)  # [128, 4, 2]
        A = np.zeros((64, 16))
        A[arow, acol] = av[..., 0]
        A[arow, acol + 1] = av[..., 1]
        C = np.zeros((64, n))
        C[crow, ccol] = np.array([p[1] for p in posts])
        k, nn = np.arange(16)[:, None], np.arange(n)[None, :]
        if trans:
            lin = start + (nn % 64) * 2 + (nn // 64) * lbo + (k % 8) * 128 + (k // 8) * sbo
        else:
            lin = start + (nn % 8) * 128 + (nn // 8) * sbo + k * 2
        off = _swizzled(lin)  # [16, n] byte offsets into shared memory, all even
        words = np.ctypeslib.as_array(
            (ctypes.c_uint16 * (int(off.max()) // 2 + 1)).from_address(smem)
        )
        B = _halves(words[off // 2].astype(np.uint32), dt)[..., 0]
        D = (A @ B + C).astype(np.float32)
        return D[crow, ccol].tolist()

    try:
        ar = list((ctypes.c_uint32 * 4).from_address(a))
        cr = list((ctypes.c_float * nacc).from_address(c))
        res = _local.wg.collective(_local.tid % 128, (ar, cr), compute)
        arr = (ctypes.c_float * nacc).from_address(d)
        for i in range(nacc):
            arr[i] = res[i]
    except Exception as e:  # noqa: BLE001
        _errors.append(f"wgmma: {e!r}")


def _sreg(which: int) -> int:
    return int(_local.ids[which])


def _shfl(v: float, off: int) -> float:
    try:
        return float(
            _local.warp.collective(_local.lane, v, lambda p: [p[i ^ off] for i in range(WARP)])
        )
    except Exception as e:  # noqa: BLE001
        _errors.append(f"shfl: {e!r}")
        return v


def _vote(x: int) -> int:
    """``vote.any.sync`` over the warp: 1 when any lane passed non-zero."""
    try:
        return int(_local.warp.collective(_local.lane, x, lambda p: [int(any(p))] * WARP))
    except Exception as e:  # noqa: BLE001
        _errors.append(f"vote: {e!r}")
        return 1


def _barrier() -> None:
    try:
        _local.block_bar.wait()
    except Exception as e:  # noqa: BLE001
        _errors.append(f"barrier: {e!r}")


_P = ctypes.c_void_p
_CB = {
    "kemu_sreg": ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.c_int32)(_sreg),
    "kemu_shfl": ctypes.CFUNCTYPE(ctypes.c_float, ctypes.c_float, ctypes.c_int32)(_shfl),
    "kemu_barrier": ctypes.CFUNCTYPE(None)(_barrier),
    "kemu_vote": ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.c_int32)(_vote),
    "kemu_ldsm": ctypes.CFUNCTYPE(None, _P, ctypes.c_int32, _P)(_ldsm),
    "kemu_mma": ctypes.CFUNCTYPE(None, _P, _P, _P, _P)(_mma),
    "kemu_wgmma": ctypes.CFUNCTYPE(
        None, _P, ctypes.c_uint64, _P, _P, ctypes.c_int32, ctypes.c_int32, _P
    )(_wgmma),
}
_CB.update(mbemu.CALLBACKS)
_SYMS = {n: ctypes.cast(f, ctypes.c_void_p).value or 0 for n, f in _CB.items()}

_EMU_DEFS = """
declare i32 @kemu_sreg(i32)
declare float @kemu_shfl(float, i32)
declare void @kemu_barrier()
declare i32 @kemu_vote(i32)
declare void @kemu_ldsm(ptr, i32, ptr)
declare void @kemu_mma(ptr, ptr, ptr, ptr)
declare void @kemu_wgmma(ptr, i64, ptr, ptr, i32, i32, ptr)
declare void @llvm.memcpy.p0.p0.i64(ptr, ptr, i64, i1)
declare void @llvm.memset.p0.i64(ptr, i8, i64, i1)
declare float @llvm.exp2.f32(float)
define void @emu_cp(ptr %d, ptr %s, i32 %n) {
  %full = icmp eq i32 %n, 16
  br i1 %full, label %cp, label %zero
cp:
  call void @llvm.memcpy.p0.p0.i64(ptr %d, ptr %s, i64 16, i1 false)
  ret void
zero:
  call void @llvm.memset.p0.i64(ptr %d, i8 0, i64 16, i1 false)
  ret void
}
define {i32, i32, i32, i32} @emu_ldsm(ptr %a, i32 %t) {
  %o = alloca [4 x i32]
  call void @kemu_ldsm(ptr %a, i32 %t, ptr %o)
  %r = load {i32, i32, i32, i32}, ptr %o
  ret {i32, i32, i32, i32} %r
}
define {float, float, float, float} @emu_mma(i32 %a0, i32 %a1, i32 %a2, i32 %a3, i32 %b0, i32 %b1,
    float %c0, float %c1, float %c2, float %c3) {
  %a = alloca [4 x i32]
  %b = alloca [2 x i32]
  %c = alloca [4 x float]
  %d = alloca [4 x float]
  store [4 x i32] [i32 0, i32 0, i32 0, i32 0], ptr %a
  %av0 = insertvalue [4 x i32] undef, i32 %a0, 0
  %av1 = insertvalue [4 x i32] %av0, i32 %a1, 1
  %av2 = insertvalue [4 x i32] %av1, i32 %a2, 2
  %av3 = insertvalue [4 x i32] %av2, i32 %a3, 3
  store [4 x i32] %av3, ptr %a
  %bv0 = insertvalue [2 x i32] undef, i32 %b0, 0
  %bv1 = insertvalue [2 x i32] %bv0, i32 %b1, 1
  store [2 x i32] %bv1, ptr %b
  %cv0 = insertvalue [4 x float] undef, float %c0, 0
  %cv1 = insertvalue [4 x float] %cv0, float %c1, 1
  %cv2 = insertvalue [4 x float] %cv1, float %c2, 2
  %cv3 = insertvalue [4 x float] %cv2, float %c3, 3
  store [4 x float] %cv3, ptr %c
  call void @kemu_mma(ptr %a, ptr %b, ptr %c, ptr %d)
  %r = load {float, float, float, float}, ptr %d
  ret {float, float, float, float} %r
}
"""


def host_threads(ir: str, smem: str, nbytes: int) -> str:
    """NVPTX IR's thread-level intrinsics for the host emulation: the shared array (``smem``: a
    regex of its global's name) a ``nbytes`` global, address spaces dropped, special registers,
    butterfly shuffles and barriers as ``kemu_*`` calls, ``ex2.approx`` as ``llvm.exp2``.
    Shared by the attention and small-GEMM emulations (``tests/test_small_gemm_emu.py``)."""
    ir = re.sub(
        rf"({smem}) = external addrspace\(3\) global \[0 x i8\], align \d+",
        rf"\1 = global [{nbytes} x i8] zeroinitializer, align 1024",
        ir,
    )
    ir = ir.replace(" addrspace(3)", "").replace(" addrspace(1)", "").replace("ptx_kernel ", "")
    sreg = {"tid.x": 0, "ctaid.x": 1, "ctaid.y": 2, "ctaid.z": 3}
    ir = re.sub(
        r"@llvm\.nvvm\.read\.ptx\.sreg\.(\w+\.\w)\(\)",
        lambda m: f"@kemu_sreg(i32 {sreg[m[1]]})",
        ir,
    )
    ir = re.sub(r"@llvm\.nvvm\.shfl\.sync\.bfly\.f32\(i32 -1, (float [^,]+), (i32 \d+), i32 31\)",
                r"@kemu_shfl(\1, \2)", ir)  # fmt: skip
    ir = ir.replace("@llvm.nvvm.barrier0()", "@kemu_barrier()")
    return ir.replace("@llvm.nvvm.ex2.approx.ftz.f32", "@llvm.exp2.f32")


def host_mma(ir: str) -> str:
    """NVPTX IR's tensor-core path for the host emulation: ``cp.async`` as ``emu_cp`` (its
    commit and wait dropped: the copy is done at once), ``ldmatrix`` and ``mma.sync`` as the
    emulation's warp functions (shared with ``tests/test_small_gemm_emu.py``)."""
    ir = ir.replace("@llvm.nvvm.cp.async.cg.shared.global.16.s", "@emu_cp")
    ir = re.sub(
        r"  call void @llvm\.nvvm\.cp\.async\.(commit\.group\(\)|wait\.group\(i32 \d+\))\n", "", ir
    )
    ir = re.sub(
        r"@llvm\.nvvm\.ldmatrix\.sync\.aligned\.m8n8\.x4\.b16\((ptr [^)]+)\)",
        r"@emu_ldsm(\1, i32 0)",
        ir,
    )
    ir = re.sub(
        r"@llvm\.nvvm\.ldmatrix\.sync\.aligned\.m8n8\.x4\.trans\.b16\((ptr [^)]+)\)",
        r"@emu_ldsm(\1, i32 1)",
        ir,
    )
    return re.sub(r"@llvm\.nvvm\.mma\.m16n8k16\.row\.col\.[\w.]+\(", "@emu_mma(", ir)


def host_ir(p: AttnParams) -> str:
    """The kernel's NVPTX IR rewritten for the host (see the module doc)."""
    ir = attention_llvm_ir((p,))
    ir = ir.replace('target triple = "nvptx64-nvidia-cuda"\n', "")
    ir = "\n".join(x for x in ir.splitlines() if not x.startswith("declare"))
    ir = host_threads(ir, r"@\w+_smem", smem_bytes(p))
    if p.mbar:  # copies pending until a wait (attention_emu_mbar.py)
        ir = ir.replace("@llvm.nvvm.cp.async.cg.shared.global.16.s", "@kemu_cp")
        ir = re.sub(r"@llvm\.nvvm\.cp\.async\.wait\.group\(i32 \d+\)", "@kemu_cp_wait()", ir)
        ir = re.sub(r"define internal void @\w+_[mn]b_\w+\(.*?\n\}\n", "", ir, flags=re.S)
        ir = mbemu.DECLS + mbemu.host_defs(kernel_name(p)) + ir
    ir = host_mma(ir)
    ir = re.sub(r'  call void asm sideeffect "[^"]*", "~\{memory\}"\(\)\n', "", ir)
    # an opaque constant (the ws producer's chunk count): the constant itself
    ir = re.sub(r'(%\w+) = call i32 asm sideeffect "mov\.u32 \$0, (\d+);", "=r"\(\)',
                r"\1 = add i32 0, \2", ir)  # fmt: skip
    ir = re.sub(
        r"define internal \{[^}]*\} @\w+_(wg|fence|pin)_[sopz]\(.*?\n\}\n", "", ir, flags=re.S
    )
    if p.lazy:  # the warp vote: the emulation's collective
        ir = re.sub(r"define internal i32 @\w+_vote_any\(.*?\n\}\n", "", ir, flags=re.S)
        ir += (f"define internal i32 @{kernel_name(p)}_vote_any(i32 %x) {{\n"
               "  %r = call i32 @kemu_vote(i32 %x)\n  ret i32 %r\n}\n")  # fmt: skip
    decls = "declare float @llvm.maxnum.f32(float, float)\ndeclare float @llvm.fma.f32(float, float, float)\n"
    decls += "declare i32 @llvm.umin.i32(i32, i32)\n"
    return decls + _EMU_DEFS + _wgmma_defs(p) + ir


def _wgmma_defs(p: AttnParams) -> str:
    """Host stand-ins for the kernel's wgmma and fence functions."""
    if not p.mma.startswith("wgmma"):
        return ""
    name = kernel_name(p)
    out = []
    kinds = [("s", p.block_n, 0)] + ([("o", p.head_dim, 1)] if p.mma in WGMMA_BOTH else [])
    for which, n, trans in kinds:
        nacc = n // 2
        st = "{" + ", ".join(["float"] * nacc) + "}"
        cs = ", ".join(f"float %c{i}" for i in range(nacc))
        body = [
            f"define internal {st} @{name}_wg_{which}(i32 %a0, i32 %a1, i32 %a2, i32 %a3, i64 %desc, {cs}) {{"
        ]
        body += [
            "  %a = alloca [4 x i32]",
            f"  %c = alloca [{nacc} x float]",
            f"  %d = alloca [{nacc} x float]",
        ]
        for i in range(4):
            body += [
                f"  %pa{i} = getelementptr [4 x i32], ptr %a, i32 0, i32 {i}",
                f"  store i32 %a{i}, ptr %pa{i}",
            ]
        for i in range(nacc):
            body += [
                f"  %pc{i} = getelementptr [{nacc} x float], ptr %c, i32 0, i32 {i}",
                f"  store float %c{i}, ptr %pc{i}",
            ]
        body += [
            f"  call void @kemu_wgmma(ptr %a, i64 %desc, ptr %c, ptr %d, i32 {n}, i32 {trans}, ptr @{name}_smem)"
        ]
        body += [f"  %r = load {st}, ptr %d", f"  ret {st} %r", "}"]
        fence = [f"define internal {st} @{name}_fence_{which}({cs}) {{"]
        prev = "poison"
        for i in range(nacc):
            fence.append(f"  %s{i} = insertvalue {st} {prev}, float %c{i}, {i}")
            prev = f"%s{i}"
        fence += [f"  ret {st} {prev}", "}"]
        out += body + fence
    if p.mma == "wgmma_ovl":  # the score product into fresh accumulators: C = 0
        nacc = p.block_n // 2
        st = "{" + ", ".join(["float"] * nacc) + "}"
        out.append(
            f"define internal {st} @{name}_wg_z(i32 %a0, i32 %a1, i32 %a2, i32 %a3, i64 %desc) {{"
        )
        out.append(f"  %r = call {st} @{name}_wg_s(i32 %a0, i32 %a1, i32 %a2, i32 %a3, i64 %desc, "
                   + ", ".join(["float 0.0"] * nacc) + ")")  # fmt: skip
        out += [f"  ret {st} %r", "}"]
    if p.pack_p:  # the pin of P's packed registers: an identity (x86 has too few registers)
        n = p.block_n // 4
        st = "{" + ", ".join(["i32"] * n) + "}"
        out.append(
            f"define internal {st} @{name}_pin_p({', '.join(f'i32 %c{i}' for i in range(n))}) {{"
        )
        prev = "poison"
        for i in range(n):
            out.append(f"  %s{i} = insertvalue {st} {prev}, i32 %c{i}, {i}")
            prev = f"%s{i}"
        out += [f"  ret {st} {prev}", "}"]
    return "\n".join(out) + "\n"


def run_kernel(p: AttnParams, *inputs: np.ndarray, edit: Any = None) -> np.ndarray:
    """Run the kernel for ``p`` on 16-bit buffers (bit patterns), ``inputs`` in the kernel's
    parameter order; returns the [B, H, Sq, D] output (NaN where nothing was written).
    ``edit``: a function of the host IR text (a test's mutation of the kernel)."""
    assert p.dtype == "bf16", "the emulation feeds the mma i32 operands (bf16 kernels)"
    ir = host_ir(p) if edit is None else edit(host_ir(p))
    image = jit_load(compile_object(ir, host_target(), 1), _SYMS, (kernel_name(p),))
    fn = ctypes.CFUNCTYPE(None, *([_P] * (1 + p.n_inputs)))(image.addresses[kernel_name(p)])
    o = np.full((p.batch, p.heads, p.sq, p.head_dim), 0x7FC0, dtype=np.uint16)
    bufs = [np.ascontiguousarray(x) for x in inputs]
    ptrs = [o.ctypes.data, *(x.ctypes.data for x in bufs)]
    gx, gy, gz = grid(p)
    nthreads = p.threads
    for bz in range(gz):
        for by in range(gy):
            for bx in range(gx):
                warps = [_Warp() for _ in range(nthreads // WARP)]
                wgs = [_Warp(128) for _ in range(-(-nthreads // 128))]
                bar = threading.Barrier(nthreads, timeout=120)
                mbemu.start_block()

                def run(tid: int, ids: tuple[int, ...] = (bx, by, bz), warps: Any = warps, bar: Any = bar, wgs: Any = wgs) -> None:  # fmt: skip
                    _local.ids = (tid, *ids)
                    _local.tid, _local.wg = tid, wgs[tid // 128]
                    _local.warp, _local.lane, _local.block_bar = warps[tid // WARP], tid % WARP, bar
                    _local.dtype = p.dtype
                    mbemu.start_thread()
                    fn(*ptrs)

                ts = [threading.Thread(target=run, args=(t,)) for t in range(nthreads)]
                for t in ts:
                    t.start()
                for t in ts:
                    t.join()
                _errors.extend(mbemu.check_launch())
                if _errors:
                    msg = "; ".join(_errors[:3])
                    _errors.clear()
                    raise RuntimeError(f"emulated launch failed: {msg}")
    del image
    return o


def reference(
    q: np.ndarray, k: np.ndarray, v: np.ndarray, causal: bool, mask: np.ndarray | None = None
) -> np.ndarray:
    """softmax(Q K^T / sqrt(D) [+ mask] [+ causal]) V in float64, numpy's softmax: a row
    whose every key is -inf is NaN (0/0), as the unfused paths give it."""
    g = q.shape[1] // k.shape[1]
    kk, vv = np.repeat(k, g, axis=1), np.repeat(v, g, axis=1)
    s = q @ kk.swapaxes(-1, -2) * q.shape[-1] ** -0.5
    if mask is not None:
        s = s + mask
    if causal:
        n, m = s.shape[-2:]
        s = np.where(np.arange(m)[None, :] > np.arange(n)[:, None], -np.inf, s)
    with np.errstate(invalid="ignore"):
        s = np.exp(s - s.max(-1, keepdims=True))
        return (s / s.sum(-1, keepdims=True)) @ vv


@pytest.mark.parametrize(
    "d,s,causal,tiles,mma,heads,masked",
    [
        (64, 80, True, AttnTiles(64, 32), "sync", 1, True),
        (128, 45, False, AttnTiles(32, 32), "sync", 1, False),
        (128, 100, True, AttnTiles(64, 64), "wgmma", 1, True),
        (64, 45, False, AttnTiles(64, 32), "wgmma_qk", 2, True),  # grouped K/V heads
    ],
)
def test_generated_kernel_on_cpu(
    d: int, s: int, causal: bool, tiles: AttnTiles, mma: str, heads: int, masked: bool
) -> None:
    """Each mma path; ``masked``: with a user's mask that masks whole rows (NaN out, as
    softmax-then-matmul), a row's whole first key tile, and a single key of a row."""
    check_on_cpu(d, s, causal, tiles, mma, 2, heads=heads, masked_rows=masked)


@pytest.mark.parametrize(
    "d,s,causal,tiles,mma,masked",
    [
        (64, 100, True, AttnTiles(64, 32), "sync", False),  # four key tiles, a ring of three
        (128, 200, True, AttnTiles(64, 64), "wgmma_pipe", False),  # next scores in the softmax
        (64, 150, False, AttnTiles(128, 64), "wgmma_pipe", True),  # non-causal, partial tile
        (64, 40, True, AttnTiles(64, 64), "wgmma_pipe", False),  # one tile: the last step alone
    ],
)
def test_three_stage_ring_on_cpu(
    d: int, s: int, causal: bool, tiles: AttnTiles, mma: str, masked: bool
) -> None:
    check_on_cpu(d, s, causal, tiles, mma, 3, heads=1, masked_rows=masked)


def test_wgmma_128_keys_per_step_on_cpu() -> None:
    """m64n128 score products, two warpgroups (the autotuner's largest tile)."""
    check_on_cpu(64, 200, True, AttnTiles(128, 128), "wgmma", 2, heads=1)


def test_packed_p_and_longest_first_order_on_cpu() -> None:
    """P packed and pinned before the P V wgmmas (two warpgroups, 128 keys a step), with the
    whole-grid longest-first block order over two batches (every block's rows
    written once, each from its own (batch, head))."""
    check_on_cpu(64, 140, True, AttnTiles(128, 128), "wgmma", 2, heads=1, batch=2,
                 pack_p=True, lpt=True)  # fmt: skip


def test_longest_first_order_maps_every_block_once_on_cpu() -> None:
    """lpt alone on 64-row tiles: three row blocks of unequal length per batch (1, 2, 3 key
    tiles), two batches (block index -> (tile, head, batch) is a permutation of the grid)."""
    check_on_cpu(64, 130, True, AttnTiles(64, 64), "wgmma", 2, heads=1, batch=2, kv=1, lpt=True)


def check_on_cpu(
    d: int, s: int, causal: bool, tiles: AttnTiles, mma: str, stages: int, heads: int = 2,
    batch: int = 1, kv: int = 1, edit: Any = None, masked_rows: bool = False, **switches: bool,
) -> None:  # fmt: skip
    """The kernel of these parameters on random bf16 data against float64 (``edit``: of the
    host IR, see :func:`run_kernel`). ``masked_rows``: plus a user's f32 mask [S, S] (see
    :func:`user_mask`) with fully masked rows, which must come out NaN as softmax-then-matmul
    gives them (docs/language.md, "Fully masked softmax rows")."""
    rng = np.random.default_rng(d + s)
    b, h = batch, heads
    p = replace(bhsd_params("bf16", b, h, kv, s, d, causal, tiles), mma=mma, stages=stages,
                **switches)  # type: ignore[arg-type]  # fmt: skip
    q = f32_to_bf16(rng.standard_normal((b, h, s, d)).astype(np.float32))
    k = f32_to_bf16(rng.standard_normal((b, kv, s, d)).astype(np.float32))
    v = f32_to_bf16(rng.standard_normal((b, kv, s, d)).astype(np.float32))
    f64 = lambda x: bf16_to_f32(x).astype(np.float64)  # noqa: E731
    if not masked_rows:
        out = f64(run_kernel(p, q, k, v, edit=edit))
        ref = reference(f64(q), f64(k), f64(v), causal)
        assert np.isfinite(out).all()
        err = np.linalg.norm(out - ref) / np.linalg.norm(ref)
        assert err < 1e-2, err
        return
    m = user_mask(s, rng)
    p = replace(p, mask_arg=3, n_inputs=4, mask_dtype="f32", mask_strides=(0, 0, s, 1))
    out = f64(run_kernel(p, q, k, v, m, edit=edit))
    assert_same_nans_and_close(out, reference(f64(q), f64(k), f64(v), causal, m))


def user_mask(s: int, rng: np.random.Generator) -> np.ndarray:
    """An [S, S] f32 additive mask: random finite values, -inf over all of rows 1 and S - 2
    (fully masked), over row S - 1's keys but its last (past one key tile: a whole tile at
    -inf, the running max moves after it), over row 3's keys but key 2, and over
    column 0 (with causal, row 0 fully masked too)."""
    m = rng.standard_normal((s, s)).astype(np.float32)
    m[[1, s - 2], :] = -np.inf
    m[s - 1, :-1] = -np.inf
    m[3, [i for i in range(s) if i != 2]] = -np.inf
    m[:, 0] = -np.inf
    return m


def assert_same_nans_and_close(out: np.ndarray, ref: np.ndarray) -> None:
    """NaN exactly where the reference is NaN (its fully masked rows), the rest close."""
    nan = np.isnan(ref)
    assert nan.any() and (np.isnan(out) == nan).all(), np.argwhere(np.isnan(out) != nan)[:8]
    err = np.linalg.norm(out[~nan] - ref[~nan]) / np.linalg.norm(ref[~nan])
    assert err < 1e-2, err


def test_user_mask_f32_with_wgmma_on_cpu() -> None:
    """A per-head f32 mask [1, H, S, S] (strides (0, S*S, S, 1)), causal too, wgmma path."""
    rng = np.random.default_rng(7)
    h, s, d = 2, 70, 64
    m = rng.standard_normal((1, h, s, s)).astype(np.float32)
    m[..., 3] = -np.inf
    p = replace(
        bhsd_params("bf16", 1, h, 1, s, d, True, AttnTiles(64, 64)), mma="wgmma",
        mask_arg=3, n_inputs=4, mask_dtype="f32", mask_strides=(0, s * s, s, 1),
    )  # fmt: skip
    q = f32_to_bf16(rng.standard_normal((1, h, s, d)).astype(np.float32))
    k = f32_to_bf16(rng.standard_normal((1, 1, s, d)).astype(np.float32))
    v = f32_to_bf16(rng.standard_normal((1, 1, s, d)).astype(np.float32))
    f64 = lambda x: bf16_to_f32(x).astype(np.float64)  # noqa: E731
    out = f64(run_kernel(p, q, k, v, m))
    kk, vv = np.repeat(f64(k), h, 1), np.repeat(f64(v), h, 1)
    sc = f64(q) @ kk.swapaxes(-1, -2) * d**-0.5 + m
    sc = np.where(np.arange(s)[None, :] > np.arange(s)[:, None], -np.inf, sc)
    e = np.exp(sc - sc.max(-1, keepdims=True))
    ref = (e / e.sum(-1, keepdims=True)) @ vv
    assert np.isfinite(out).all()
    assert np.linalg.norm(out - ref) / np.linalg.norm(ref) < 1e-2


def test_lazy_rescale_moves_the_max_only_past_the_threshold_on_cpu(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``lazy`` (tree reductions, the running max moved only when it grows by more than 8 in
    log2 units, O rescaled on a warp vote): one 64-row block over two 32-key tiles whose second
    holds keys 8x larger, so rows 32-63 move their max in the second tile (a vote of 1 past
    each warp's first tile) while rows 0-31 keep it; against float64."""
    rng = np.random.default_rng(11)
    s, d = 64, 64
    p = replace(bhsd_params("bf16", 1, 1, 1, s, d, True, AttnTiles(64, 32)), mma="wgmma",
                lazy=True)  # fmt: skip
    kf = rng.standard_normal((1, 1, s, d)).astype(np.float32)
    kf[..., 32:, :] *= 8.0
    q = f32_to_bf16(rng.standard_normal((1, 1, s, d)).astype(np.float32))
    k, v = f32_to_bf16(kf), f32_to_bf16(rng.standard_normal((1, 1, s, d)).astype(np.float32))
    votes: list[int] = []
    real = _vote

    def counting(x: int) -> int:
        r = real(x)
        if _local.lane == 0:
            votes.append(r)
        return r

    monkeypatch.setitem(
        _CB, "kemu_vote", ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.c_int32)(counting)
    )
    monkeypatch.setitem(
        _SYMS, "kemu_vote", ctypes.cast(_CB["kemu_vote"], ctypes.c_void_p).value or 0
    )
    f64 = lambda x: bf16_to_f32(x).astype(np.float64)  # noqa: E731
    out = f64(run_kernel(p, q, k, v))
    ref = reference(f64(q), f64(k), f64(v), True)
    assert np.linalg.norm(out - ref) / np.linalg.norm(ref) < 1e-2
    assert len(votes) == 8 and sum(votes) == 6, votes  # 4 warps x 2 tiles: warps 0-1 keep
