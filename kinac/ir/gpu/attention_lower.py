"""A fused attention ``kina.kernel`` as a content-addressed GPU kernel.

The per-kernel queries (:mod:`kinac.pipeline_gpu`, :mod:`kinac.ir.gpu.kernel_split`) key each
generated kernel by a :class:`~kinac.artifacts.gpu.GpuKernel`. For attention its text is the
canonical encoding of the kernel's :class:`AttnParams` (``source = "attention"``), and its
symbol the name derived from them: two layers with the same shapes share one kernel and one
compilation, and an edit that changes no parameter re-runs nothing.

The lowering is the same for every GPU: the kernel's parameters say ``mma = "sync"``
(``mma.sync``, any sm_80+). Which tensor-core instruction runs is decided with the
architecture, when PTX is made: for Hopper (``sm_90``) an entry holding a fused attention
kernel is compiled for ``sm_90a`` (:func:`entry_arch`; the same chip, plus its
architecture-specific instructions) and its attention kernels use ``wgmma``
(:func:`for_arch`), under the same function name and launch geometry.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace
from typing import Any

from kinac.artifacts.gpu import GpuKernel, GpuKernelCode, GpuLaunch
from kinac.ir.gpu.attention_kernel import grid, kernel_ir, kernel_name, smem_bytes
from kinac.ir.gpu.attention_params import AttnParams, check_params
from kinac.rules.codec import decode, encode

SOURCE = "attention"


def canonical_attention_kernel(k: Any) -> GpuKernel:
    """The merged attention ``kina.kernel`` ``k`` as a :class:`GpuKernel` keyed by its
    parameters (xDSL is imported only here: the PTX-side functions below need none)."""
    from kinac.ir.gpu.attention import merged_params

    p = merged_params(k)
    return GpuKernel(kernel_name(p), encode(p).decode(), 0, SOURCE)


def attention_launch(p: AttnParams, name: str | None = None) -> GpuLaunch:
    """The launch of ``p``'s kernel (function ``name``, else :func:`kernel_name`): a 3-D grid
    (query blocks, heads, batch), dynamic shared memory, ``p.threads`` threads (the kernel's
    ``.maxntid``: 32 a computing warp, and a producer warpgroup with ``ws``)."""
    gx, gy, gz = grid(p)
    shm = smem_bytes(p)
    stg = f" {p.stages} stages" if p.stages != 2 else ""
    note = f"flash {p.block_m}x{p.block_n}{stg} grid {gx}x{gy}x{gz} smem {shm}"
    sw = (("pack", p.pack_p), ("mbar", p.mbar), ("pingpong", p.pingpong), ("ws", p.ws),
          ("lazy", p.lazy), ("lpt", p.lpt))  # fmt: skip
    if p.mma != "sync" or any(on for _, on in sw):
        # the built variant (kernel tables name what runs): the tuned mma and switches
        note += " " + " ".join([p.mma] + [n for n, on in sw if on])
    return GpuLaunch(name or kernel_name(p), gx, p.threads, (), 1, note, (gy, gz), shm)


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
    decls, body = kernel_ir(p, kernel.symbol)
    launch = attention_launch(p, kernel.symbol)  # tuned or wgmma: the plan's name stays
    return GpuKernelCode(kernel.symbol, (launch,), False, decls, body)


HOPPER = ("sm_90", "sm_90a")


def entry_arch(kernels: Iterable[GpuKernel], arch: str) -> str:
    """The architecture an entry's PTX is made for: ``sm_90`` becomes ``sm_90a`` when the entry
    holds a fused attention kernel (``wgmma`` exists only in sm_90a code; every kernel of the
    entry shares one PTX module and so one target)."""
    if arch == "sm_90" and any(k.source == SOURCE for k in kernels):
        return "sm_90a"
    return arch


def for_arch(kernel: GpuKernel, arch: str) -> GpuKernel:
    """``kernel`` as compiled for ``arch``: on sm_90a a fused attention kernel uses ``wgmma``
    for both products (same symbol, tiles and launch); anything else is unchanged."""
    if kernel.source != SOURCE or arch != "sm_90a":
        return kernel
    p = decode(kernel.text.encode())
    assert isinstance(p, AttnParams)
    if p.mma != "sync":
        return kernel
    q = replace(p, mma="wgmma")
    if check_params(q) is not None:  # e.g. 2 warps: no warpgroup
        return kernel
    return GpuKernel(kernel.symbol, encode(q).decode(), kernel.status_step, SOURCE)
