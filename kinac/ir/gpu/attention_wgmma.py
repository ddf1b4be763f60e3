"""Hopper's warpgroup MMA (``wgmma.mma_async``, sm_90a) for the fused attention kernel.

LLVM has no intrinsic for ``wgmma.mma_async``, so each product is an inline-PTX call inside a
small per-kernel function (``@<kernel>_wg_s``: ``S += Q K^T`` over one 16-wide k step,
``@<kernel>_wg_o``: ``O += P V`` over 16 keys). A is in registers (the same per-warp
fragments as ``mma.sync``'s m16n8k16 A: a warpgroup's four warps hold rows 0-15, ..., 48-63);
B is read from shared memory through a matrix descriptor with the 128-byte swizzle: K is
"K-major" (each key's head-dim elements contiguous: leading offset unused, 1024 bytes between
groups of 8 keys), V "MN-major" (``imm-trans-b = 1``: head-dim contiguous; 1024 bytes between
groups of 8 keys, ``block_n * 128`` bytes between the 64-wide halves of the head dim). The
accumulators are tied operands; after ``wgmma.wait_group 0`` an empty asm statement taking and
returning them (``@<kernel>_fence_*``) keeps the compiler from reading them before the wait.
"""

from __future__ import annotations

SWIZZLE_128B = 1 << 62


def desc_bits(lbo: int, sbo: int) -> int:
    """The constant part of a shared-memory matrix descriptor (128-byte swizzle)."""
    return ((lbo >> 4) & 0x3FFF) << 16 | ((sbo >> 4) & 0x3FFF) << 32 | SWIZZLE_128B


def _struct(n: int) -> str:
    return "{" + ", ".join(["float"] * n) + "}"


def wgmma_function(name: str, dtype: str, n: int, trans_b: int) -> str:
    """``define`` of ``@name(a0..a3, desc, c0..c{n/2-1})``: one m64n{n}k16 product."""
    nacc = n // 2
    ab = "bf16" if dtype == "bf16" else "f16"
    outs = ", ".join(f"${i}" for i in range(nacc))
    a = ", ".join(f"${nacc + i}" for i in range(4))
    asm = (
        f"{{\\0A.reg .pred p;\\0Asetp.ne.b32 p, ${nacc + 5}, 0;\\0A"
        f"wgmma.mma_async.sync.aligned.m64n{n}k16.f32.{ab}.{ab} {{{outs}}}, {{{a}}}, "
        f"${nacc + 4}, p, 1, 1, {trans_b};\\0A}}"
    )
    cons = ",".join(["=f"] * nacc + ["r"] * 4 + ["l", "r"] + [str(i) for i in range(nacc)])
    params = (
        [f"i32 %a{i}" for i in range(4)] + ["i64 %desc"] + [f"float %c{i}" for i in range(nacc)]
    )
    args = [f"i32 %a{i}" for i in range(4)] + ["i64 %desc", "i32 1"]
    args += [f"float %c{i}" for i in range(nacc)]
    st = _struct(nacc)
    return (
        f"define internal {st} @{name}({', '.join(params)}) alwaysinline {{\n"
        f'  %r = call {st} asm sideeffect "{asm}", "{cons}"({", ".join(args)})\n'
        f"  ret {st} %r\n}}\n"
    )


def fence_function(name: str, nacc: int) -> str:
    """``define`` of ``@name(c...)``: returns its arguments through an empty volatile asm."""
    st = _struct(nacc)
    cons = ",".join(["=f"] * nacc + [str(i) for i in range(nacc)])
    params = ", ".join(f"float %c{i}" for i in range(nacc))
    return (
        f"define internal {st} @{name}({params}) alwaysinline {{\n"
        f'  %r = call {st} asm sideeffect "", "{cons}"({params})\n'
        f"  ret {st} %r\n}}\n"
    )


ASM_VOID = {
    "fence": "wgmma.fence.sync.aligned;",
    "commit": "wgmma.commit_group.sync.aligned;",
    "wait": "wgmma.wait_group.sync.aligned 0;",
    "proxy": "fence.proxy.async.shared::cta;",
}


def asm_void(what: str) -> str:
    """A statement: ``call void asm sideeffect`` of one of :data:`ASM_VOID`."""
    return f'call void asm sideeffect "{ASM_VOID[what]}", "~{{memory}}"()'


def helpers(kname: str, dtype: str, block_n: int, head_dim: int, full: bool) -> str:
    """The per-kernel wgmma and fence functions the kernel ``kname`` calls."""
    out = [
        wgmma_function(f"{kname}_wg_s", dtype, block_n, 0),
        fence_function(f"{kname}_fence_s", block_n // 2),
    ]
    if full:
        out += [
            wgmma_function(f"{kname}_wg_o", dtype, head_dim, 1),
            fence_function(f"{kname}_fence_o", head_dim // 2),
        ]
    return "".join(out)
