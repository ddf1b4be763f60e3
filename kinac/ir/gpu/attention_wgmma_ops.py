"""The fused attention kernel's products on the Hopper tensor cores (``wgmma``, sm_90a):
shared-memory matrix descriptors, the calls into the ``wgmma`` helper functions, and the two
products ``S = Q K^T`` and ``O += P V`` of a warpgroup's 64 rows.

Why a module of its own: :mod:`kinac.ir.gpu.attention_kernel` emits one kernel for both tensor
core generations (``mma.sync`` and ``wgmma``); its emitter mixes this class in for the latter.
The helper functions these methods call are defined in :mod:`kinac.ir.gpu.attention_wgmma`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kinac.ir.gpu.attention_wgmma import asm_void, desc_bits

if TYPE_CHECKING:
    from kinac.ir.gpu.attention_kernel import StraightLineIr
    from kinac.ir.gpu.attention_params import AttnParams


class WgmmaMixin:
    """Methods of :class:`kinac.ir.gpu.attention_kernel.AttnEmitter` (its state and fragment
    helpers declared here for the type checker)."""

    if TYPE_CHECKING:
        f: StraightLineIr
        p: AttnParams
        name: str
        d: int
        opty: str
        sbase: str
        qf: list[list[str]]

        def pack(self, x: str, y: str) -> str: ...

    def desc(self, off: str, lbo: int, sbo: int) -> str:
        """The descriptor of the shared-memory matrix at byte ``off`` (128-byte swizzle)."""
        f = self.f
        a = f.v(f"add i64 {self.sbase}, {f.v(f'zext i32 {off} to i64')}")
        a = f.v(f"and i64 {f.v(f'lshr i64 {a}, 4')}, 16383")
        return f.v(f"or i64 {a}, {desc_bits(lbo, sbo)}")

    def as_i32(self, x: str) -> str:
        return x if self.opty == "i32" else self.f.v(f"bitcast {self.opty} {x} to i32")

    def wg_call(self, fn: str, a: list[str], desc: str, acc: list[str]) -> list[str]:
        f = self.f
        st = "{" + ", ".join(["float"] * len(acc)) + "}"
        args = [f"i32 {self.as_i32(x)}" for x in a] + [f"i64 {desc}"]
        args += [f"float {x}" for x in acc]
        r = f.v(f"call {st} @{fn}({', '.join(args)})")
        return [f.v(f"extractvalue {st} {r}, {i}") for i in range(len(acc))]

    def wg_fence(self, fn: str, acc: list[str]) -> list[str]:
        f = self.f
        st = "{" + ", ".join(["float"] * len(acc)) + "}"
        r = f.v(f"call {st} @{fn}({', '.join(f'float {x}' for x in acc)})")
        return [f.v(f"extractvalue {st} {r}, {i}") for i in range(len(acc))]

    def wg_pin(self, fn: str, regs: list[str]) -> list[str]:
        """``regs`` (i32) through an empty volatile asm: computed before this point."""
        f = self.f
        st = "{" + ", ".join(["i32"] * len(regs)) + "}"
        r = f.v(f"call {st} @{fn}({', '.join(f'i32 {x}' for x in regs)})")
        return [f.v(f"extractvalue {st} {r}, {i}") for i in range(len(regs))]

    def issue_scores(self, kb: str, zero: bool = False) -> list[str]:
        """Issue (and commit, not wait for) ``S = Q K^T`` for the warpgroup's 64 rows: one
        m64n{block_n}k16 per 16 of D. The results may be read only after a wait and the fence
        function. ``zero``: the first k step writes fresh accumulators (``@<name>_wg_z``)
        instead of adding to zeroed registers (``block_n / 2`` moves a step)."""
        f, p = self.f, self.p
        acc = ["0.0"] * (p.block_n // 2)
        f.do(asm_void("fence"))
        for kk in range(self.d // 16):
            off = f.v(f"add i32 {kb}, {(kk >> 2) * p.block_n * 128 + (kk & 3) * 32}")
            desc = self.desc(off, 16, 1024)
            if zero and kk == 0:
                st = "{" + ", ".join(["float"] * len(acc)) + "}"
                args = ", ".join([f"i32 {self.as_i32(x)}" for x in self.qf[kk]] + [f"i64 {desc}"])
                r = f.v(f"call {st} @{self.name}_wg_z({args})")
                acc = [f.v(f"extractvalue {st} {r}, {i}") for i in range(len(acc))]
                continue
            acc = self.wg_call(f"{self.name}_wg_s", self.qf[kk], desc, acc)
        f.do(asm_void("commit"))
        return acc

    def wgmma_scores(self, kb: str) -> list[list[str]]:
        """``S = Q K^T``, waited for."""
        acc = self.issue_scores(kb)
        self.f.do(asm_void("wait"))
        acc = self.wg_fence(f"{self.name}_fence_s", acc)
        return [acc[4 * i : 4 * i + 4] for i in range(self.p.block_n // 8)]

    def wgmma_output(self, vb: str, pv: list[list[str]], o: list[str]) -> list[str]:
        """``O += P V``: one m64n{head_dim}k16 per 16 keys, V read MN-major."""
        f, p = self.f, self.p
        name = self.name

        def packed(kb2: int) -> list[str]:
            return [
                self.pack(pv[2 * kb2][0], pv[2 * kb2][1]),
                self.pack(pv[2 * kb2][2], pv[2 * kb2][3]),
                self.pack(pv[2 * kb2 + 1][0], pv[2 * kb2 + 1][1]),
                self.pack(pv[2 * kb2 + 1][2], pv[2 * kb2 + 1][3]),
            ]

        steps = range(p.block_n // 16)
        pas: list[list[str]] = []
        descs: list[str] = []
        if p.pack_p:  # every register the wgmmas read is defined before the first one
            pas = [packed(kb2) for kb2 in steps]
            descs = [
                self.desc(f.v(f"add i32 {vb}, {kb2 * 16 * 128}"), p.block_n * 128, 1024)
                for kb2 in steps
            ]
            flat = self.wg_pin(f"{name}_pin_p", [self.as_i32(x) for pa in pas for x in pa])
            if self.opty != "i32":  # f16: back to the operand type wg_call takes
                flat = [f.v(f"bitcast i32 {x} to {self.opty}") for x in flat]
            pas = [flat[4 * i : 4 * i + 4] for i in steps]
        f.do(asm_void("fence"))
        for kb2 in steps:
            if p.pack_p:
                pa, desc = pas[kb2], descs[kb2]
            else:  # packed per step (LLVM keeps the packs between the wgmmas: C7519)
                pa = packed(kb2)
                off = f.v(f"add i32 {vb}, {kb2 * 16 * 128}")
                desc = self.desc(off, p.block_n * 128, 1024)
            o = self.wg_call(f"{name}_wg_o", pa, desc, o)
        f.do(asm_void("commit"))
        f.do(asm_void("wait"))
        return self.wg_fence(f"{name}_fence_o", o)
