"""The fused attention kernel's walk over the key tiles: the loops (unmasked tiles, then the
masked ones; the pipelined variant's last step), one tile's step, and the loop-carried state
(output accumulators, row max and sum, the next tile's scores) in constant-indexed allocas.

Why a module of its own: the loop structure is shared by every product and scheduling variant
of :mod:`kinac.ir.gpu.attention_kernel` (whose emitter mixes this class in); the products,
the softmax and the mbarrier ring are in their own modules.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from kinac.ir.gpu.attention_lean import NEG_INF
from kinac.ir.gpu.attention_wgmma import asm_void

if TYPE_CHECKING:
    from kinac.ir.gpu.attention_kernel import StraightLineIr
    from kinac.ir.gpu.attention_params import AttnParams


class LoopMixin:
    """Methods of :class:`kinac.ir.gpu.attention_kernel.AttnEmitter` (its state and the steps
    it calls declared here for the type checker)."""

    if TYPE_CHECKING:
        f: StraightLineIr
        p: AttnParams
        name: str
        d: int
        pipe: bool
        atoms: bool

        def stage_bases(self, j: str) -> tuple[str, str]: ...
        def load_kv(self, j: str, commit: bool = True) -> None: ...
        def scores(self, kb: str) -> list[list[str]]: ...
        def output_step(self, vb: str, pv: list[list[str]], o: list[str]) -> None: ...
        def softmax_step(
            self, s: list[list[str]], j: str, masked: bool
        ) -> tuple[list[list[str]], list[str]]: ...
        def issue_scores(self, kb: str, zero: bool = False) -> list[str]: ...
        def wg_fence(self, fn: str, acc: list[str]) -> list[str]: ...
        def mbar_step(self, lab: str, j: str, ntot: str, masked: bool) -> None: ...
        def wg_only(self, wg: int, lab: str, emit: Callable[[], None]) -> None: ...
        def nb(self, what: str, bar_id: str) -> None: ...

    def main_loop(self, ntot: str, nfull: str) -> None:
        """The key-tile loops (unmasked tiles, then masked ones) and, pipelined, the last
        tile's step."""
        f, p = self.f, self.p
        if self.pipe:  # tile 0's scores before the loop; each step issues the next tile's
            kb0, _ = self.stage_bases("0")
            self.store_state("sacc", [x for quad in self.scores(kb0) for x in quad])
            last = f.v(f"sub i32 {ntot}, 1")  # the last tile is a step of its own (below)
            stop0 = f.v(f"call i32 @llvm.umin.i32(i32 {nfull}, i32 {last})")
            stop1 = last
        else:
            stop0, stop1 = nfull, ntot
        f.do("br label %loop0_pre")
        f.label("loop0_pre")  # the loop's entry edge (the prologue may have branched)
        f.do("br label %loop0")
        self.loop("loop0", "0", stop0, ntot, masked=False, next_label="loop1")
        self.loop("loop1", stop0, stop1, ntot, masked=True, next_label="done")
        f.label("done")
        if p.pingpong:  # warpgroup 1's last arrival on barrier 1 is matched
            self.wg_only(0, "pp_end", lambda: self.nb("sync", "1"))
        if self.pipe:  # the last tile: its scores are in sacc, its V tile has landed
            _, vb = self.stage_bases(stop1)
            sl = self.load_state("sacc", p.block_n // 2)
            pv, oacc = self.softmax_step([sl[4 * i : 4 * i + 4] for i in range(p.block_n // 8)],
                                         stop1, True)  # fmt: skip
            self.output_step(vb, pv, oacc)

    def load_state(self, nm: str, n: int) -> list[str]:
        f = self.f
        out = []
        for i in range(n):
            ptr = f.v(f"getelementptr [{n} x float], ptr %{nm}, i32 0, i32 {i}")
            out.append(f.v(f"load float, ptr {ptr}"))
        return out

    def store_state(self, nm: str, vals: list[str]) -> None:
        f = self.f
        for i, x in enumerate(vals):
            ptr = f.v(f"getelementptr [{len(vals)} x float], ptr %{nm}, i32 0, i32 {i}")
            f.do(f"store float {x}, ptr {ptr}")

    def loop(self, lab: str, start: str, stop: str, ntot: str, masked: bool,
             next_label: str) -> None:  # fmt: skip
        """``for j in [start, stop)``: one key tile per iteration."""
        f, p = self.f, self.p
        f.label(lab)
        j = f"%j_{lab}"
        f.do(f"{j} = phi i32 [{start}, %{'loop0_pre' if lab == 'loop0' else 'loop0'}], "
             f"[%jn_{lab}, %{lab}_tail]")  # fmt: skip
        go = f.v(f"icmp slt i32 {j}, {stop}")
        f.do(f"br i1 {go}, label %{lab}_body, label %{next_label}")
        f.label(f"{lab}_body")
        if p.mbar:
            self.mbar_step(lab, j, ntot, masked)
            return
        # tile j has landed (all but the newest stages - 2 groups); the barrier also says
        # every warp is done with tile j - 1, whose stage the prefetch below overwrites
        # (pipelined: tile j + 1 has landed, for the scores issued in this step)
        waits = 0 if self.pipe else p.stages - 2
        f.do(f"call void @llvm.nvvm.cp.async.wait.group(i32 {waits})")
        if self.atoms:
            f.do(asm_void("proxy"))
        f.do("call void @llvm.nvvm.barrier0()")
        f.do(f"%jn_{lab} = add i32 {j}, 1")
        pf = f.v(f"add i32 {j}, {p.stages - 1}")
        more = f.v(f"icmp slt i32 {pf}, {ntot}")
        f.do(f"br i1 {more}, label %{lab}_pf, label %{lab}_cmp")
        f.label(f"{lab}_pf")
        self.load_kv(pf, commit=p.stages == 2)
        f.do(f"br label %{lab}_cmp")
        f.label(f"{lab}_cmp")
        if p.stages > 2:  # one group per step, empty or not, so the wait's count holds
            f.do("call void @llvm.nvvm.cp.async.commit.group()")
        if self.pipe:
            self.pipe_body(j, masked)
        else:
            self.body(j, masked)
        f.do(f"br label %{lab}_tail")
        f.label(f"{lab}_tail")
        f.do(f"br label %{lab}")
        del p

    def alloc_state(self) -> None:
        """Loop-carried state in allocas (SROA promotes them: constant indices only; they
        must be in the entry block, before any branch)."""
        f, p = self.f, self.p
        nacc = self.d // 8 * 4
        state = [("oacc", nacc, "0.0"), ("mrow", 2, NEG_INF), ("lrow", 2, "0.0")]
        if self.pipe:  # the next tile's scores, carried from one step to the next
            state.append(("sacc", p.block_n // 2, "0.0"))
        for nm, n, init in state:
            f.do(f"%{nm} = alloca [{n} x float], align 4")
            for i in range(n):
                ptr = f.v(f"getelementptr [{n} x float], ptr %{nm}, i32 0, i32 {i}")
                f.do(f"store float {init}, ptr {ptr}")
        if p.mma == "wgmma_ovl":  # P of the tile whose P V the next step issues, packed
            f.do(f"%pst = alloca [{p.block_n // 4} x i32], align 4")

    def body(self, j: str, masked: bool) -> None:
        """One key tile: scores, softmax, output (each product waited for)."""
        kb, vb = self.stage_bases(j)
        s = self.scores(kb)
        pv, o = self.softmax_step(s, j, masked)
        self.output_step(vb, pv, o)

    def pipe_body(self, j: str, masked: bool) -> None:
        """One key tile, pipelined (FlashAttention-3's intra-warpgroup overlap): tile j + 1's
        ``Q K^T`` is issued before tile j's softmax, which the tensor cores then overlap, and
        waited for before ``P V``; tile j's scores come from the previous step."""
        f, p = self.f, self.p
        nxt = f.v(f"add i32 {j}, 1")
        kb1, _ = self.stage_bases(nxt)
        _, vb = self.stage_bases(j)
        s = self.load_state("sacc", p.block_n // 2)
        acc = self.issue_scores(kb1)
        pv, o = self.softmax_step([s[4 * i : 4 * i + 4] for i in range(p.block_n // 8)], j,
                                  masked)  # fmt: skip
        f.do(asm_void("wait"))
        self.store_state("sacc", self.wg_fence(f"{self.name}_fence_s", acc))
        self.output_step(vb, pv, o)
