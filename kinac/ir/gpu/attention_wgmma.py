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


def wgmma_function(name: str, dtype: str, n: int, trans_b: int, *, fresh: bool = False) -> str:
    """``define`` of ``@name(a0..a3, desc, c0..c{n/2-1})``: one m64n{n}k16 product added to the
    accumulators ``c``; ``fresh``: ``@name(a0..a3, desc)`` into fresh accumulators (scale-d
    false: ``D = A B``), so no register is zeroed before the first k step."""
    nacc = n // 2
    ab = "bf16" if dtype == "bf16" else "f16"
    outs = ", ".join(f"${i}" for i in range(nacc))
    a = ", ".join(f"${nacc + i}" for i in range(4))
    asm = (
        f"{{\\0A.reg .pred p;\\0Asetp.ne.b32 p, ${nacc + 5}, 0;\\0A"
        f"wgmma.mma_async.sync.aligned.m64n{n}k16.f32.{ab}.{ab} {{{outs}}}, {{{a}}}, "
        f"${nacc + 4}, p, 1, 1, {trans_b};\\0A}}"
    )
    tied = [] if fresh else [str(i) for i in range(nacc)]  # c in the outputs' registers
    cons = ",".join(["=f"] * nacc + ["r"] * 4 + ["l", "r"] + tied)
    params = [f"i32 %a{i}" for i in range(4)] + ["i64 %desc"]
    args = [*params, "i32 0" if fresh else "i32 1"]  # the scale-d predicate
    if not fresh:
        params += [f"float %c{i}" for i in range(nacc)]
        args += [f"float %c{i}" for i in range(nacc)]
    st = _struct(nacc)
    return (
        f"define internal {st} @{name}({', '.join(params)}) alwaysinline {{\n"
        f'  %r = call {st} asm sideeffect "{asm}", "{cons}"({", ".join(args)})\n'
        f"  ret {st} %r\n}}\n"
    )


def fence_function(name: str, nacc: int, ty: str = "float") -> str:
    """``define`` of ``@name(c...)``: returns its arguments through an empty volatile asm
    (``float``: accumulators after a wait; ``i32``: packed operands pinned before a wgmma)."""
    st = "{" + ", ".join([ty] * nacc) + "}"
    reg = "f" if ty == "float" else "r"
    cons = ",".join([f"={reg}"] * nacc + [str(i) for i in range(nacc)])
    params = ", ".join(f"{ty} %c{i}" for i in range(nacc))
    return (
        f"define internal {st} @{name}({params}) alwaysinline {{\n"
        f'  %r = call {st} asm sideeffect "", "{cons}"({params})\n'
        f"  ret {st} %r\n}}\n"
    )


ASM_VOID = {
    "fence": "wgmma.fence.sync.aligned;",
    "commit": "wgmma.commit_group.sync.aligned;",
    "wait": "wgmma.wait_group.sync.aligned 0;",
    "wait1": "wgmma.wait_group.sync.aligned 1;",  # all but the newest group
    "proxy": "fence.proxy.async.shared::cta;",
}
# ws: the producer warpgroup gives registers back, the computing ones take them; a CTA of 384
# threads holds 168 each at launch, and 128 * producer + 256 * computing = 384 * 168 (FA3:
# 24 / 240). The split-barrier producer (two load loops) needs 40.
WS_LAUNCH_REGS = 168
WS_REGS = {False: (24, 240), True: (40, 232)}  # split_kv -> (producer, computing)


def setmaxnreg(inc: bool, n: int) -> str:
    """A statement: ``setmaxnreg.inc`` / ``.dec`` to ``n`` registers per thread."""
    op = "inc" if inc else "dec"
    return f'call void asm sideeffect "setmaxnreg.{op}.sync.aligned.u32 {n};", "~{{memory}}"()'


def asm_void(what: str) -> str:
    """A statement: ``call void asm sideeffect`` of one of :data:`ASM_VOID`."""
    return f'call void asm sideeffect "{ASM_VOID[what]}", "~{{memory}}"()'


def helpers(
    kname: str, dtype: str, block_n: int, head_dim: int, full: bool, pin: bool = False,
    zero: bool = False,
) -> str:  # fmt: skip
    """The per-kernel wgmma and fence functions the kernel ``kname`` calls (``pin``: the one
    that pins P's ``block_n / 4`` packed registers before the P V wgmmas; ``zero``: the score
    product that starts from no accumulator, ``@<kname>_wg_z``)."""
    out = [
        wgmma_function(f"{kname}_wg_s", dtype, block_n, 0),
        fence_function(f"{kname}_fence_s", block_n // 2),
    ]
    if zero:
        out.append(wgmma_function(f"{kname}_wg_z", dtype, block_n, 0, fresh=True))
    if full:
        out += [
            wgmma_function(f"{kname}_wg_o", dtype, head_dim, 1),
            fence_function(f"{kname}_fence_o", head_dim // 2),
        ]
    if pin:
        out.append(fence_function(f"{kname}_pin_p", block_n // 4, "i32"))
    return "".join(out)


def _mb_asm(body: str, cons: str, args: str, ret: str = "void") -> str:
    return f'call {ret} asm sideeffect "{body}", "{cons}"({args})'


def mbar_helpers(kname: str, named: bool = False) -> str:
    """The per-kernel mbarrier functions (``@<kname>_mb_*``, each on a ``ptr addrspace(3)``):
    ``init(b, count)``, ``arrive(b)``, ``cp_arrive(b)`` (an arrival when this thread's
    cp.async so far have landed: ``.noinc``, so ``count`` counts it), and ``wait_full`` /
    ``wait_empty(b, parity)`` (spin on ``try_wait.parity``: until the phase of that parity has
    completed; two names so a test can drop either kind); ``named``: ``nb_sync(id)`` and
    ``nb_arrive(id)``, named barriers of 256 threads (two warpgroups)."""
    sa = "%a = ptrtoint ptr addrspace(3) %b to i32"
    out = [
        f"define internal void @{kname}_mb_init(ptr addrspace(3) %b, i32 %n) alwaysinline {{\n"
        f"  {sa}\n  "
        + _mb_asm("mbarrier.init.shared::cta.b64 [$0], $1;", "r,r,~{memory}", "i32 %a, i32 %n")
        + "\n  ret void\n}\n",
        f"define internal void @{kname}_mb_arrive(ptr addrspace(3) %b) alwaysinline {{\n"
        f"  {sa}\n  "
        + _mb_asm(
            "{\\0A.reg .b64 st;\\0Ambarrier.arrive.shared::cta.b64 st, [$0];\\0A}",
            "r,~{memory}",
            "i32 %a",
        )
        + "\n  ret void\n}\n",
        f"define internal void @{kname}_mb_cp_arrive(ptr addrspace(3) %b) alwaysinline {{\n"
        f"  {sa}\n  "
        + _mb_asm("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [$0];", "r,~{memory}", "i32 %a")
        + "\n  ret void\n}\n",
    ]
    wait = (
        "{\\0A.reg .pred p;\\0Ambarrier.try_wait.parity.shared::cta.b64 p, [$1], $2;\\0A"
        "selp.u32 $0, 1, 0, p;\\0A}"
    )
    for kind in ("full", "empty"):
        out.append(
            f"define internal void @{kname}_mb_wait_{kind}(ptr addrspace(3) %b, i32 %ph) "
            f"alwaysinline {{\nentry:\n  {sa}\n  br label %spin\nspin:\n"
            f"  %ok = " + _mb_asm(wait, "=r,r,r,~{memory}", "i32 %a, i32 %ph", "i32") + "\n"
            "  %done = icmp ne i32 %ok, 0\n  br i1 %done, label %out, label %spin\n"
            "out:\n  ret void\n}\n"
        )
    for what, ins in (("sync", "barrier.sync"), ("arrive", "barrier.arrive")) if named else ():
        out.append(
            f"define internal void @{kname}_nb_{what}(i32 %id) alwaysinline {{\n  "
            + _mb_asm(f"{ins} $0, 256;", "r,~{memory}", "i32 %id")
            + "\n  ret void\n}\n"
        )
    return "".join(out)
