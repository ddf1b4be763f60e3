"""normlib's own CUDA kernel, loaded next to kinac's compiled entries.

``SCALE_LL`` is LLVM IR for ``x[i] *= s``; ``scale_ptx()`` compiles it to PTX with kinac's
NVPTX back end (works without a GPU), and ``scale_(t, s, stream)`` loads the module through
kinac's runtime (``cuda.load_module``, cached per PTX) and launches it on a
``kinac.rt.cuda.Tensor`` (an output of a compiled entry, or one made from a memory resource).
"""

from __future__ import annotations

from typing import Any

SCALE_LL = r"""
target triple = "nvptx64-nvidia-cuda"

declare i32 @llvm.nvvm.read.ptx.sreg.tid.x()
declare i32 @llvm.nvvm.read.ptx.sreg.ctaid.x()
declare i32 @llvm.nvvm.read.ptx.sreg.ntid.x()

define ptx_kernel void @normlib_scale(ptr addrspace(1) %x, float %s, i64 %n) {
entry:
  %tid = call i32 @llvm.nvvm.read.ptx.sreg.tid.x()
  %ctaid = call i32 @llvm.nvvm.read.ptx.sreg.ctaid.x()
  %ntid = call i32 @llvm.nvvm.read.ptx.sreg.ntid.x()
  %tid64 = zext i32 %tid to i64
  %ctaid64 = zext i32 %ctaid to i64
  %ntid64 = zext i32 %ntid to i64
  %blk = mul i64 %ctaid64, %ntid64
  %i = add i64 %blk, %tid64
  %ok = icmp ult i64 %i, %n
  br i1 %ok, label %body, label %done

body:
  %p = getelementptr float, ptr addrspace(1) %x, i64 %i
  %v = load float, ptr addrspace(1) %p
  %r = fmul float %v, %s
  store float %r, ptr addrspace(1) %p
  br label %done

done:
  ret void
}
"""
BLOCK = 256


def scale_ptx(arch: str = "sm_90") -> str:
    """PTX of ``normlib_scale`` for ``arch`` (no GPU needed)."""
    from kinac.codegen.ptx import compile_ptx

    return compile_ptx(SCALE_LL, arch)


def scale_(t: Any, s: float, stream: Any) -> Any:
    """Multiply the contiguous f32 CUDA tensor ``t`` by ``s`` in place, queued on ``stream``
    (a ``kinac.rt.cuda.Stream``); returns the ``Launch`` (reusable: ``launch(stream)``)."""
    from kinac.rt import cuda

    if t.dtype.name != "float32" or not t.is_cuda or not t.is_contiguous():
        raise ValueError("scale_ takes a contiguous f32 CUDA tensor")
    dev = cuda.get_device(t.device[1])
    kernel = cuda.load_module(scale_ptx(dev.arch)).function("normlib_scale")
    n = t.numel
    grid = max(1, (n + BLOCK - 1) // BLOCK)
    launch = kernel.prepare(("ptr", "f32", "i64"), grid, BLOCK, args=(t.ptr, float(s), n))
    launch(stream)
    return launch
