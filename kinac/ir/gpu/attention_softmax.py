"""The fused attention kernel's online softmax of one key tile: the user's additive mask,
the causal and sequence-end masks, the running row max and sum, and the output's rescale
(``exp2(m_old - m_new)``), or their lazy variants (:mod:`kinac.ir.gpu.attention_lean`).

Why a module of its own: the softmax is the same for every product variant
(:mod:`kinac.ir.gpu.attention_kernel`'s ``mma.sync``, :mod:`kinac.ir.gpu.attention_wgmma_ops`);
the kernel's emitter mixes this class in.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, cast

from kinac.ir.gpu.attention_lean import (
    NEG_INF,
    lazy_online,
    neg_scaled_max_and_alpha,
    rescale_if_moved,
)
from kinac.ir.gpu.attention_params import MASK_DTYPES
from kinac.ir.gpu.emit import float_literal

if TYPE_CHECKING:
    from kinac.ir.gpu.attention_kernel import AttnEmitter, StraightLineIr
    from kinac.ir.gpu.attention_params import AttnParams

LOG2E = 1.4426950408889634


class SoftmaxMixin:
    """Methods of :class:`kinac.ir.gpu.attention_kernel.AttnEmitter` (its state and helpers
    declared here for the type checker)."""

    if TYPE_CHECKING:
        f: StraightLineIr
        p: AttnParams
        d: int
        row_g: str
        col_t: str
        mbase: str

        def shfl_max(self, x: str) -> str: ...
        def load_state(self, nm: str, n: int) -> list[str]: ...
        def store_state(self, nm: str, vals: list[str]) -> None: ...

    def softmax_step(
        self, s: list[list[str]], j: str, masked: bool
    ) -> tuple[list[list[str]], list[str]]:
        """Masks, the online softmax of key tile ``j``'s scores (row max and sum stored), and
        the rescaled output accumulators: returns (P, O)."""
        pv, alphas = self.softmax_rows(s, j, masked)
        o = self.load_state("oacc", self.d // 8 * 4)
        if self.p.lazy:  # O *= alpha only where a row of the warp moved its max
            rescale_if_moved(cast("AttnEmitter", self), o, alphas)
            return pv, self.load_state("oacc", self.d // 8 * 4)
        return pv, self.rescale(o, alphas)

    def rescale(self, o: list[str], alphas: list[str]) -> list[str]:
        """The output accumulators times their row's ``exp2(m_old - m_new)``."""
        return [self.f.v(f"fmul float {x}, {alphas[(i & 3) >> 1]}") for i, x in enumerate(o)]

    def softmax_rows(
        self, s: list[list[str]], j: str, masked: bool
    ) -> tuple[list[list[str]], list[str]]:
        """Masks and the online softmax of key tile ``j``'s scores (row max and sum stored):
        returns (P, each row's rescale factor of the output)."""
        f, p = self.f, self.p
        nn = p.block_n // 8
        n0 = f.v(f"mul i32 {j}, {p.block_n}")
        if p.mask_arg >= 0:
            s = self.add_mask(s, n0)
        if masked:
            colb = f.v(f"add i32 {n0}, {self.col_t}")
            rows = [self.row_g, f.v(f"add i32 {self.row_g}, 8")]
            for nt in range(nn):
                for e in range(4):
                    col = f.v(f"add i32 {colb}, {nt * 8 + (e & 1)}")
                    bad = f.v(f"icmp sge i32 {col}, {p.sk}")
                    if p.causal:
                        c2 = f.v(f"icmp sgt i32 {col}, {rows[e >> 1]}")
                        bad = f.v(f"or i1 {bad}, {c2}")
                    s[nt][e] = f.v(f"select i1 {bad}, float {NEG_INF}, float {s[nt][e]}")
        # online softmax, rows g (e = 0, 1) and g + 8 (e = 2, 3); a mask was added to the
        # scaled scores already
        c = float_literal((1.0 if p.mask_arg >= 0 else p.scale) * LOG2E, "float")
        if p.lazy:  # trees, and the max moved only past a threshold (attention_lean.py)
            return lazy_online(cast("AttnEmitter", self), s, c)
        m_old = self.load_state("mrow", 2)
        l_old = self.load_state("lrow", 2)
        alphas, m_new, l_new = [], [], []
        pv = [[""] * 4 for _ in range(nn)]
        for hr in range(2):
            mx = s[0][2 * hr]
            for nt in range(nn):
                for e in (2 * hr, 2 * hr + 1):
                    if (nt, e) != (0, 2 * hr):
                        mx = f.v(f"call float @llvm.maxnum.f32(float {mx}, float {s[nt][e]})")
            mx = self.shfl_max(mx)
            mn = f.v(f"call float @llvm.maxnum.f32(float {m_old[hr]}, float {mx})")
            m_new.append(mn)
            nms, alpha = neg_scaled_max_and_alpha(f, mn, m_old[hr], c)
            alphas.append(alpha)
            acc = None
            for nt in range(nn):
                for e in (2 * hr, 2 * hr + 1):
                    x = f.v(f"call float @llvm.fma.f32(float {s[nt][e]}, float {c}, float {nms})")
                    pe = f.v(f"call float @llvm.nvvm.ex2.approx.ftz.f32(float {x})")
                    pv[nt][e] = pe
                    acc = pe if acc is None else f.v(f"fadd float {acc}, {pe}")
            la = f.v(f"fmul float {l_old[hr]}, {alpha}")
            l_new.append(f.v(f"fadd float {la}, {acc}"))
        self.store_state("mrow", m_new)
        self.store_state("lrow", l_new)
        return pv, alphas

    def add_mask(self, s: list[list[str]], n0: str) -> list[list[str]]:
        """``scale * s + mask[row, col]`` for this thread's scores (row and column clamped into
        the tensor: the tails are masked with -inf after)."""
        f, p = self.f, self.p
        ty, isz = MASK_DTYPES[p.mask_dtype]
        scale = float_literal(p.scale, "float")
        sb, sh, sr, sc = p.mask_strides
        colb = f.v(f"add i32 {n0}, {self.col_t}")
        rows = [self.row_g, f.v(f"add i32 {self.row_g}, 8")]
        roff = []
        for r in rows:
            r = f.v(f"call i32 @llvm.umin.i32(i32 {r}, i32 {p.sq - 1})")
            roff.append(f.v(f"mul i64 {f.v(f'zext i32 {r} to i64')}, {isz * sr}"))
        out = [list(x) for x in s]
        for nt in range(len(s)):
            for e in range(4):
                col = f.v(f"add i32 {colb}, {nt * 8 + (e & 1)}")
                col = f.v(f"call i32 @llvm.umin.i32(i32 {col}, i32 {p.sk - 1})")
                off = f.v(f"mul i64 {f.v(f'zext i32 {col} to i64')}, {isz * sc}")
                off = f.v(f"add i64 {off}, {roff[e >> 1]}")
                ptr = f.v(f"getelementptr i8, ptr addrspace(1) {self.mbase}, i64 {off}")
                m = f.v(f"load {ty}, ptr addrspace(1) {ptr}, align {isz}")
                if ty != "float":
                    m = f.v(f"fpext {ty} {m} to float")
                out[nt][e] = f.v(
                    f"call float @llvm.fma.f32(float {s[nt][e]}, float {scale}, float {m})"
                )
        del sb, sh
        return out
