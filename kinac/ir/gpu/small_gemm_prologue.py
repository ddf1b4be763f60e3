"""What the small tensor-core GEMM does besides its products: the L2 prefetches before the
PDL wait, and the RMSNorm prologue, staged (the whole slice normalised in shared memory) or
folded into the products (each A fragment scaled as it is read, 1/rms on the accumulators).

Why a module of its own: these are the kernel's prologue variants (round 2 of issue 14), each
behind a switch of :mod:`kinac.ir.gpu.small_gemm_rule`; the kernel's staging, products and
epilogue stay in :mod:`kinac.ir.gpu.small_gemm_kernel`, whose emitter mixes this class in.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from kinac.ir.gpu.emit import float_literal

if TYPE_CHECKING:
    from kinac.ir.gpu.attention_kernel import StraightLineIr
    from kinac.ir.gpu.small_gemm_kernel import SmallGemmParams


class PrologueMixin:
    """Methods of :class:`kinac.ir.gpu.small_gemm_kernel._GemmEmitter` (its state and tile
    helpers declared here for the type checker)."""

    if TYPE_CHECKING:
        f: StraightLineIr
        gp: SmallGemmParams
        tid: str
        nt: int
        lane: str
        t2: str
        elty: str
        opty: str
        wn_base: str | int
        a_bytes: int
        b_bytes: int
        w_ptrs: list[tuple[str, int | str]]

        def sptr(self, byte_off: str) -> str: ...
        def swz(self, row: str, chunk: str, row_bytes: int, base: int) -> str: ...
        def cp_async(self, soff: str, gptr: str) -> None: ...
        def rolled(
            self, lab: str, n: int, inits: list[str], body: Callable[[str, list[str]], list[str]]
        ) -> list[str]: ...
        def lab(self, name: str) -> None: ...

    # ---- the RMSNorm prologue -------------------------------------------------------------
    def vec8(self, ptr: str, space: int) -> str:
        """Eight elements at ``ptr`` as ``<8 x float>``."""
        f = self.f
        x = f.v(f"load <8 x {self.elty}>, ptr addrspace({space}) {ptr}, align 16")
        return f.v(f"fpext <8 x {self.elty}> {x} to <8 x float>")

    def norm(self) -> None:
        """Each row's ``tpr`` threads (adjacent lanes) sum the squares of their parts of the
        staged row, combine them by shuffles, and rewrite their chunks as ``x * rsqrt-scale
        * w``, rounded to the dtype."""
        f, p = self.f, self.gp
        tpr = self.nt // p.block_m
        row = f.v(f"udiv i32 {self.tid}, {tpr}")
        part = f.v(f"urem i32 {self.tid}, {tpr}")
        per = p.k // 8 // tpr
        c0 = f.v(f"mul i32 {part}, {per}")
        unroll = 4 if per % 4 == 0 else 1  # chunks an iteration: their loads in flight together

        def sumsq(i: str, cur: list[str]) -> list[str]:
            acc = cur[0]
            xs = []
            for u in range(unroll):
                i4 = f.v(f"mul i32 {i}, {unroll}")
                lc = f.v(f"add i32 {c0}, {f.v(f'add i32 {i4}, {u}')}")
                xs.append(self.vec8(self.sptr(self.swz(row, lc, 2 * p.k, 0)), 3))
            for x in xs:
                sq = f.v(f"fmul <8 x float> {x}, {x}")
                for j in range(8):
                    e = f.v(f"extractelement <8 x float> {sq}, i32 {j}")
                    acc = f.v(f"fadd float {acc}, {e}")
            return [acc]

        (tot,) = self.rolled("nsq", per // unroll, ["0.0"], sumsq)
        m = 1
        while m < tpr:
            o = f.v(
                f"call float @llvm.nvvm.shfl.sync.bfly.f32(i32 -1, float {tot}, i32 {m}, i32 31)"
            )
            tot = f.v(f"fadd float {tot}, {o}")
            m *= 2
        mean = f.v(f"fmul float {tot}, {float_literal(1.0 / p.k, 'float')}")
        ms = f.v(f"fadd float {mean}, {float_literal(p.eps, 'float')}")
        sq = f.v(f"call float @llvm.sqrt.f32(float {ms})")
        inv = f.v(f"fdiv float 1.0, {sq}")
        invv = f.v(f"insertelement <8 x float> poison, float {inv}, i32 0")
        invv = f.v(
            f"shufflevector <8 x float> {invv}, <8 x float> poison, <8 x i32> zeroinitializer"
        )

        def scale(i: str, cur: list[str]) -> list[str]:
            for u in range(unroll):
                i4 = f.v(f"mul i32 {i}, {unroll}")
                lc = f.v(f"add i32 {c0}, {f.v(f'add i32 {i4}, {u}')}")
                sp = self.sptr(self.swz(row, lc, 2 * p.k, 0))
                x = self.vec8(sp, 3)
                wo = f.v(f"add i32 {f.v(f'shl i32 {lc}, 4')}, {self.wn_base}")
                w = self.vec8(self.sptr(wo), 3)
                y = f.v(f"fmul <8 x float> {f.v(f'fmul <8 x float> {x}, {invv}')}, {w}")
                yt = f.v(f"fptrunc <8 x float> {y} to <8 x {self.elty}>")
                f.do(f"store <8 x {self.elty}> {yt}, ptr addrspace(3) {sp}, align 16")
            return []

        self.rolled("nsc", per // unroll, [], scale)

    def stage_norm_weight(self) -> None:
        """The norm's weight vector into shared memory (after the tiles), in the first group."""
        f, p = self.f, self.gp
        self.wn_base = self.a_bytes + len(self.w_ptrs) * self.b_bytes
        wn = f"%in{p.args[len(p.ns) + 1]}"
        nch = p.k // 8
        for i in range(-(-nch // self.nt)):
            c = f.v(f"add i32 {self.tid}, {i * self.nt}")
            ok = f.v(f"icmp ult i32 {c}, {nch}")
            f.do(f"br i1 {ok}, label %wn{i}, label %wn{i}_c")
            self.lab(f"wn{i}")
            c16 = f.v(f"shl i32 {c}, 4")
            gp = f.v(
                f"getelementptr i8, ptr addrspace(1) {wn}, i64 {f.v(f'zext i32 {c16} to i64')}"
            )
            self.cp_async(f.v(f"add i32 {c16}, {self.wn_base}"), gp)
            f.do(f"br label %wn{i}_c")
            self.lab(f"wn{i}_c")

    def fold_fragment(self, a: list[str], kb: str, ss: list[str]) -> list[str]:
        """A fragment of rows ``g``, ``g + 8`` (registers 0/2 and 1/3) and ``k`` = ``kb + 2t
        (+1)`` (registers 0, 1) and ``kb + 8 + 2t (+1)`` (2, 3), ``t = lane % 4``: its squares
        added to ``ss`` (one sum a row), its values times the norm weight, rounded."""
        f = self.f
        two = f"<2 x {self.elty}>"
        out = []
        ws = []
        for dk in (0, 8):
            k = f.v(f"add i32 {kb}, {f.v(f'add i32 {self.t2}, {dk}')}")
            sp = self.sptr(f.v(f"add i32 {f.v(f'shl i32 {k}, 1')}, {self.wn_base}"))
            wv = f.v(f"load {two}, ptr addrspace(3) {sp}, align 4")
            ws.append(f.v(f"fpext {two} {wv} to <2 x float>"))
        for j, x in enumerate(a):
            xv = x if self.opty != "i32" else f.v(f"bitcast i32 {x} to {two}")
            xf = f.v(f"fpext {two} {xv} to <2 x float>")
            sq = f.v(f"fmul <2 x float> {xf}, {xf}")
            for e in range(2):
                ss[j % 2] = f.v(
                    f"fadd float {ss[j % 2]}, {f.v(f'extractelement <2 x float> {sq}, i32 {e}')}"
                )
            y = f.v(f"fptrunc <2 x float> {f.v(f'fmul <2 x float> {xf}, {ws[j // 2]}')} to {two}")
            out.append(y if self.opty != "i32" else f.v(f"bitcast {two} {y} to i32"))
        return out

    def unfold(self, flat: list[str]) -> list[str]:
        """The folded norm's end: each row's sum of squares over its quad of lanes, then
        ``1 / sqrt(mean + eps)`` times the accumulators of the row (``flat``: the
        accumulators, then the two sums)."""
        f, p = self.f, self.gp
        acc, ss = flat[:-2], list(flat[-2:])
        inv = []
        for h in range(2):
            for m in (1, 2):
                o = f.v(
                    f"call float @llvm.nvvm.shfl.sync.bfly.f32(i32 -1, float {ss[h]}, i32 {m}, i32 31)"
                )
                ss[h] = f.v(f"fadd float {ss[h]}, {o}")
            mean = f.v(f"fmul float {ss[h]}, {float_literal(1.0 / p.k, 'float')}")
            ms = f.v(f"fadd float {mean}, {float_literal(p.eps, 'float')}")
            sq = f.v(f"call float @llvm.sqrt.f32(float {ms})")
            inv.append(f.v(f"fdiv float 1.0, {sq}"))
        return [f.v(f"fmul float {x}, {inv[(i % 4) // 2]}") for i, x in enumerate(acc)]

    # ---- L2 prefetches before the PDL wait ---------------------------------------------------
    def prefetches(self) -> list[str]:
        """The ``pdl.wait`` block's prefetches (lines of their own, emitted apart from the body).

        The blocks of the grid share the lines each needs, so L2 is asked for each line about
        once: the weight tile's ``K`` rows (128 bytes: the block's 64 columns) split over the
        ``gy`` row blocks, ``A``'s rows (``2K`` bytes each) over the ``gx`` column blocks, the
        residual's ``block_m x 64`` tile by its own block, the norm weight (a few lines) by
        every block. ``evict_last``: the next call reads the weights again."""
        from kinac.ir.gpu.small_gemm_kernel import BLOCK_N, grid  # the kernel's module: lazily

        f, p = self.f, self.gp
        saved, f.lines = f.lines, []
        gx, gy, _ = grid(p)
        tid = f.v("call i32 @llvm.nvvm.read.ptx.sreg.tid.x()")
        bx = f.v("call i32 @llvm.nvvm.read.ptx.sreg.ctaid.x()")
        by = f.v("call i32 @llvm.nvvm.read.ptx.sreg.ctaid.y()")
        n0 = f.v(f"mul i32 {bx}, {BLOCK_N}")
        m0 = f.v(f"mul i32 {by}, {p.block_m}")
        labels = iter(range(1 << 20))

        def i64(x: str) -> str:
            return f.v(f"zext i32 {x} to i64")

        def lines(ptr: str, most: int, count: str, line_of: Callable[[str], str]) -> None:
            """Lines ``i < count`` (at most ``most``) of ``ptr`` over the block's threads; line
            ``i``'s byte offset is ``line_of(i)`` (an i64 value)."""
            for r in range(-(-most // p.threads)):
                i = f.v(f"add i32 {tid}, {r * p.threads}")
                ok = f.v(f"icmp ult i32 {i}, {count}")
                lab = f"pf{next(labels)}"
                f.do(f"br i1 {ok}, label %{lab}, label %{lab}_c")
                f.label(lab)
                gp = f.v(f"getelementptr i8, ptr addrspace(1) {ptr}, i64 {line_of(i)}")
                f.do(f"call void @llvm.nvvm.prefetch.global.L2.evict.last(ptr addrspace(1) {gp})")
                f.do(f"br label %{lab}_c")
                f.label(f"{lab}_c")

        if "w" in p.prefetch:
            # rows by, by + gy, ... of K: ceil((K - by) / gy) of them
            rows = f.v(f"udiv i32 {f.v(f'sub i32 {p.k + gy - 1}, {by}')}, {gy}")
            start = 0
            for i, n in enumerate(p.ns):
                if p.epilogue == "swiglu":  # gate and up: the block's columns of each
                    col, cnt = n0, rows
                else:  # only the weight that holds the block's columns
                    inw = f.v(
                        f"and i1 {f.v(f'icmp uge i32 {n0}, {start}')}, "
                        f"{f.v(f'icmp ult i32 {n0}, {start + n}')}"
                    )
                    col = f.v(f"sub i32 {n0}, {start}")
                    cnt = f.v(f"select i1 {inw}, i32 {rows}, i32 0")
                    start += n

                def w_line(i: str, col: str = col, n: int = n) -> str:
                    k = f.v(f"add i32 {by}, {f.v(f'mul i32 {i}, {gy}')}")
                    e = f.v(f"add i64 {f.v(f'mul i64 {i64(k)}, {n}')}, {i64(col)}")
                    return f.v(f"shl i64 {e}, 1")

                lines(f"%in{p.args[1 + i]}", -(-p.k // gy), cnt, w_line)
        if "a" in p.prefetch:  # the block's rows, line j of them by column block j % gx
            total = p.block_m * (2 * p.k // 128)
            cnt = f.v(f"udiv i32 {f.v(f'sub i32 {total + gx - 1}, {bx}')}, {gx}")

            def a_line(i: str) -> str:
                j = f.v(f"add i32 {bx}, {f.v(f'mul i32 {i}, {gx}')}")
                return f.v(
                    f"add i64 {f.v(f'mul i64 {i64(m0)}, {2 * p.k}')}, {f.v(f'shl i64 {i64(j)}, 7')}"
                )

            lines(f"%in{p.args[0]}", -(-total // gx), cnt, a_line)
        if "wn" in p.prefetch:
            nl = -(-2 * p.k // 128)
            lines(f"%in{p.args[1 + len(p.ns)]}", nl, str(nl), lambda i: f.v(f"shl i64 {i64(i)}, 7"))
        if "res" in p.prefetch:

            def r_line(i: str) -> str:
                r = i64(f.v(f"add i32 {m0}, {i}"))
                e = f.v(f"add i64 {f.v(f'mul i64 {r}, {p.n_out}')}, {i64(n0)}")
                return f.v(f"shl i64 {e}, 1")

            lines(f"%in{p.args[-1]}", p.block_m, str(p.block_m), r_line)
        out, f.lines = f.lines, saved
        return out
