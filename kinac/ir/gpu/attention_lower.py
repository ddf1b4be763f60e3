"""A fused attention ``kina.kernel`` as a content-addressed GPU kernel.

The per-kernel queries (:mod:`kinac.pipeline_gpu`, :mod:`kinac.ir.gpu.kernel_split`) key each
generated kernel by a :class:`~kinac.artifacts.gpu.GpuKernel`. For attention its text is the
canonical encoding of the kernel's :class:`AttnParams` (``source = "attention"``), and its
symbol the name derived from them: two layers with the same shapes share one kernel and one
compilation, and an edit that changes no parameter re-runs nothing.
"""

from __future__ import annotations

from kinac.artifacts.gpu import GpuKernel, GpuKernelCode, GpuLaunch
from kinac.ir.dialects import kina_struct as st
from kinac.ir.gpu.attention import merged_params
from kinac.ir.gpu.attention_kernel import grid, kernel_ir, kernel_name, smem_bytes
from kinac.ir.gpu.attention_params import AttnParams
from kinac.rules.codec import decode, encode

SOURCE = "attention"


def canonical_attention_kernel(k: st.KernelOp) -> GpuKernel:
    """The merged attention kernel ``k`` as a :class:`GpuKernel` keyed by its parameters."""
    p = merged_params(k)
    return GpuKernel(kernel_name(p), encode(p).decode(), 0, SOURCE)


def attention_launch(p: AttnParams) -> GpuLaunch:
    """The launch of ``p``'s kernel: a 3-D grid (query blocks, heads, batch), dynamic shared
    memory, ``32 * warps`` threads (the kernel's ``.maxntid``)."""
    gx, gy, gz = grid(p)
    shm = smem_bytes(p)
    note = f"flash {p.block_m}x{p.block_n} grid {gx}x{gy}x{gz} smem {shm}"
    return GpuLaunch(kernel_name(p), gx, 32 * p.warps, (), 1, note, (gy, gz), shm)


def lower_attention_kernel(kernel: GpuKernel, flavour: str = "nvptx") -> GpuKernelCode:
    """The kernel's LLVM function, declarations and launch (NVPTX only: the CPU tests run it
    through ``tests/test_attention_emu.py``'s emulation of the warp-level instructions)."""
    if flavour != "nvptx":
        raise ValueError(
            "the fused attention kernel has no host emulation in the entry emulator; "
            "tests/test_attention_emu.py runs it on the CPU"
        )
    p = decode(kernel.text.encode())
    assert isinstance(p, AttnParams)
    decls, body = kernel_ir(p)
    return GpuKernelCode(kernel.symbol, (attention_launch(p),), False, decls, body)
