"""The generated tensor-core GEMM for small bf16/f16 products, as LLVM IR text for NVPTX.

Why: a small product (the small transformer block's 512 x 256 x 256) costs cuBLAS 3-4 us of
launch and prologue inside a CUDA graph, and cuBLAS cannot fuse what sits around it (the
RMSNorm before it, ``silu(gate) * up`` after it). This kernel computes ``C = A W`` for one or
more row-major weights ``W_i [K, N_i]`` sharing ``A [M, K]``, with

- an optional **RMSNorm prologue** (``A = x / sqrt(mean(x^2) + eps) * w``): ``K`` fits one
  pass, so a block stages its whole ``[block_m, K]`` slice of ``x``, each row's sum of squares
  is taken from shared memory, and the tile is rewritten there normalised (rounded to the
  dtype, as the row kernel it replaces writes it) before any product;
- several weights as **one output**: their columns side by side (``[M, sum N_i]``: q, k and v
  from one launch, read by the attention kernel through slices), or, with the **swiglu**
  epilogue, two weights (gate, up) whose products meet in ``silu(g) * u`` (``[M, N]``; the
  gate and up products never reach memory);
- a **residual** epilogue (``C + R``, ``R`` of the output's shape), as cuBLASLt's ``beta = 1``.

One block computes ``block_m x 64`` outputs (16 rows a warp; the mma.sync.m16n8k16 fragments,
f32 accumulation). The whole ``A`` slice and the weights' ``[K, 64]`` column tiles are staged
in shared memory by ``cp.async`` in groups of 64 ``k``, so the products of group ``g`` run while
group ``g + 1`` lands (nothing is overwritten: no stage ring), read by ``ldmatrix`` (``.trans``
for the weights), 16-byte chunks XOR-swizzled by ``row % 8``. The tile helpers (``ldmatrix``,
``mma``, packing, swizzled addresses) are the attention kernel's (:mod:`attention_kernel`).
Shapes are compile-time constants: ``M % block_m == 0``, ``K % 64 == 0``, each ``N_i % 64 ==
0`` (the selection rule, :mod:`kinac.ir.gpu.small_gemm_rule`, takes no other product).
Round 2's variants (docs/gpu.md): the weights prefetched into L2 before the PDL wait, the
residual loaded early, the norm folded into the products (:mod:`small_gemm_prologue`), and
16-row blocks.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable

from kinac.artifacts.gpu import GpuKernel, GpuKernelCode, GpuLaunch
from kinac.ir.gpu.attention_kernel import AttnEmitter, StraightLineIr, attn_decls
from kinac.ir.gpu.emit import float_literal, pdl_prologue
from kinac.ir.gpu.small_gemm_prologue import PrologueMixin
from kinac.rules.codec import decode, record

BLOCK_N = 64  # output columns a block computes (8 x 16-byte chunks a weight row: the swizzle)
GROUP_K = 64  # k a cp.async group stages
EPILOGUES = ("", "residual", "swiglu")
LOG2E = 1.4426950408889634


@record
class SmallGemmParams:
    """One small tensor-core GEMM: everything its code depends on (its canonical key).

    ``ns``: each weight's column count; ``args``: the kernel input each operand is (``A``,
    the weights, then the norm weight and the residual where present); ``eps`` the norm's."""

    dtype: str
    m: int
    k: int
    ns: tuple[int, ...]
    block_m: int
    epilogue: str = ""
    norm: bool = False
    eps: float = 0.0
    args: tuple[int, ...] = ()
    n_inputs: int = 0
    ksplit: int = 1  # warps sharing a row block, each over every ksplit-th group of 64 k
    # operands prefetched into L2 before the PDL wait: true inputs of the entry (never written
    # by any of its kernels): "a", "w" (every weight), "wn" (the norm weight), "res"
    prefetch: tuple[str, ...] = ()
    # the norm folded into the products: A's fragments scaled by the norm weight as they are
    # read, each row's sum of squares taken from them, 1/rms applied to the accumulators (no
    # wait for the whole tile, no pass over it; rounding: round(x w) / rms, not round(x / rms w))
    fold: bool = False
    # the residual's loads issued right after the tile copies (their L2 round trip under the
    # copies and the products), not in the epilogue after the k split's sum
    early_res: bool = False

    @property
    def n_out(self) -> int:
        """Columns of the output: the weights side by side, or one for gate and up."""
        return self.ns[0] if self.epilogue == "swiglu" else sum(self.ns)

    @property
    def warps(self) -> int:
        return self.block_m // 16 * self.ksplit

    @property
    def threads(self) -> int:
        return 32 * self.warps


def check_params(p: SmallGemmParams) -> str | None:
    """Why the kernel cannot take ``p`` (None when it can)."""
    if p.dtype not in ("bf16", "f16"):
        return f"dtype {p.dtype}"
    if p.block_m not in (16, 32, 64) or p.m % p.block_m:
        return f"M {p.m} is not a multiple of block_m {p.block_m}"
    if p.k % GROUP_K or any(n % BLOCK_N for n in p.ns) or not p.ns:
        return f"K {p.k} or N {p.ns} is not a multiple of 64"
    if p.epilogue not in EPILOGUES or (
        p.epilogue == "swiglu" and (len(p.ns) != 2 or p.ns[0] != p.ns[1])
    ):
        return f"epilogue {p.epilogue!r} over weights {p.ns}"
    if p.ksplit not in (1, 2, 4) or p.warps > 8 or p.ksplit > p.k // GROUP_K:
        return f"k split {p.ksplit} over {p.warps} warps"
    if (p.block_m * 8) % p.threads or (GROUP_K * 8) % p.threads:
        return f"{p.threads} threads do not share a group's copies evenly"
    if p.fold and not p.norm:
        return "a folded norm without a norm"
    if smem_bytes(p) > 200 * 1024:
        return f"{smem_bytes(p)} bytes of shared memory"
    return None


def kernel_name(p: SmallGemmParams) -> str:
    h = hashlib.sha256(repr(p).encode()).hexdigest()[:10]
    tag = ("f" if p.fold else "n" if p.norm else "") + {"": "", "residual": "r", "swiglu": "s"}[
        p.epilogue
    ]
    return f"tcgemm_{p.dtype}_m{p.block_m}{tag}_{h}"


def n_weights_per_block(p: SmallGemmParams) -> int:
    return 2 if p.epilogue == "swiglu" else 1


def smem_bytes(p: SmallGemmParams) -> int:
    """The whole ``A`` slice and each weight's ``[K, 64]`` tile, all staged at once (and the
    norm's weight vector)."""
    tiles = 2 * p.k * (p.block_m + BLOCK_N * n_weights_per_block(p) + (1 if p.norm else 0))
    return tiles + partials_bytes(p)


def partials_bytes(p: SmallGemmParams) -> int:
    """f32 accumulators of the warps past the first of each row block (the k split's sum),
    with the folded norm's two partial sums of squares a lane."""
    per_lane = BLOCK_N // 2 * n_weights_per_block(p) + (2 if p.fold else 0)
    return (p.ksplit - 1) * (p.block_m // 16) * 32 * per_lane * 4


def grid(p: SmallGemmParams) -> tuple[int, int, int]:
    return (p.n_out // BLOCK_N, p.m // p.block_m, 1)


class _GemmEmitter(AttnEmitter, PrologueMixin):
    """The attention emitter's tile helpers over this kernel's own shared-memory tiles
    (``row_bytes`` is set to the tile's row before each swizzled address); the norm and the
    prefetches before the PDL wait are :class:`PrologueMixin`'s."""

    def __init__(self, p: SmallGemmParams, name: str) -> None:  # noqa: D107 (no super: other params)
        self.gp = p
        self.name = name
        self.f = StraightLineIr()
        self.nt = p.threads
        self.opty = "<2 x half>" if p.dtype == "f16" else "i32"
        self.vecty = "<2 x half>" if p.dtype == "f16" else "<2 x bfloat>"
        self.elty = "half" if p.dtype == "f16" else "bfloat"
        self.mma = "llvm.nvvm.mma.m16n8k16.row.col." + ("f32.f32" if p.dtype == "f16" else "bf16")
        self.smem = f"@{name}_smem"
        self.atoms = False
        self.row_bytes = 0
        self.a_bytes = 2 * p.k * p.block_m
        self.w_ptrs: list[tuple[str, int | str]] = []
        self.b_bytes = 2 * p.k * BLOCK_N

    # ---- staging --------------------------------------------------------------------------
    def swz(self, row: str, chunk: str, row_bytes: int, base: int) -> str:
        """Shared byte offset of logical 16-byte chunk ``chunk`` of ``row`` (swizzled)."""
        f = self.f
        r7 = f.v(f"and i32 {row}, 7")
        c = f.v(f"xor i32 {chunk}, {r7}")
        off = f.v(f"add i32 {f.v(f'mul i32 {row}, {row_bytes}')}, {f.v(f'shl i32 {c}, 4')}")
        return f.v(f"add i32 {off}, {base}")

    def cp_async(self, soff: str, gptr: str) -> None:
        self.f.do(
            "call void @llvm.nvvm.cp.async.cg.shared.global.16.s("
            f"ptr addrspace(3) {self.sptr(soff)}, ptr addrspace(1) {gptr}, i32 16)"
        )

    def lab(self, name: str) -> None:
        self.f.label(name)
        self.block = name

    def rolled(
        self, lab: str, n: int, inits: list[str], body: Callable[[str, list[str]], list[str]]
    ) -> list[str]:
        """``for i in [0, n)`` as a rolled loop (straight-line code of every step was the
        kernel's time: each SM fetched ~3K instructions once), ``inits`` f32 values carried
        through it by phis; returns their values after the loop."""
        f = self.f
        pre = self.block
        f.do(f"br label %{lab}")
        self.lab(lab)
        at = len(f.lines)
        f.lines.extend([""] * (len(inits) + 1))
        cur = [f"%{lab}_c{j}" for j in range(len(inits))]
        nxt = body(f"%{lab}_i", cur)
        latch = self.block
        out = []
        for j, v in enumerate(nxt):
            f.do(f"%{lab}_n{j} = select i1 true, float {v}, float {v}")
            out.append(f"%{lab}_n{j}")
        f.do(f"%{lab}_in = add i32 %{lab}_i, 1")
        f.do(f"%{lab}_more = icmp ult i32 %{lab}_in, {n}")
        f.do(f"br i1 %{lab}_more, label %{lab}, label %{lab}_x")
        f.lines[at] = f"  %{lab}_i = phi i32 [0, %{pre}], [%{lab}_in, %{latch}]"
        for j, init in enumerate(inits):
            f.lines[at + 1 + j] = f"  {cur[j]} = phi float [{init}, %{pre}], [{out[j]}, %{latch}]"
        self.lab(f"{lab}_x")
        return out

    def wait_for(self, g: str, groups: int) -> None:
        """Wait until group ``g`` landed: at most ``groups - 1 - g`` newer groups pending
        (``cp.async.wait_group`` takes a constant: 2, 1 or 0 of them, never more than that)."""
        f = self.f
        r = f.v(f"sub i32 {groups - 1}, {g}")
        ge2 = f.v(f"icmp uge i32 {r}, 2")
        f.do(f"br i1 {ge2}, label %w2_{g[1:]}, label %wlt2_{g[1:]}")
        self.lab(f"w2_{g[1:]}")
        f.do("call void @llvm.nvvm.cp.async.wait.group(i32 2)")
        f.do(f"br label %wd_{g[1:]}")
        self.lab(f"wlt2_{g[1:]}")
        is1 = f.v(f"icmp eq i32 {r}, 1")
        f.do(f"br i1 {is1}, label %w1_{g[1:]}, label %w0_{g[1:]}")
        self.lab(f"w1_{g[1:]}")
        f.do("call void @llvm.nvvm.cp.async.wait.group(i32 1)")
        f.do(f"br label %wd_{g[1:]}")
        self.lab(f"w0_{g[1:]}")
        f.do("call void @llvm.nvvm.cp.async.wait.group(i32 0)")
        f.do(f"br label %wd_{g[1:]}")
        self.lab(f"wd_{g[1:]}")
        f.do("call void @llvm.nvvm.barrier0()")

    def load_group(self, g: str) -> None:
        """``A[:, 64g : 64g + 64]`` and each weight's rows ``64g .. 64g + 63``, one group."""
        f, p = self.f, self.gp
        tid = self.tid
        g8 = f.v(f"shl i32 {g}, 3")
        g64 = f.v(f"shl i32 {g}, 6")
        for i in range(p.block_m * 8 // self.nt):
            c = f.v(f"add i32 {tid}, {i * self.nt}")
            row, cc = f.v(f"lshr i32 {c}, 3"), f.v(f"and i32 {c}, 7")
            lc = f.v(f"add i32 {cc}, {g8}")
            soff = self.swz(row, lc, 2 * p.k, 0)
            grow = f.v(f"zext i32 {f.v(f'add i32 {row}, {self.m0}')} to i64")
            e = f.v(f"add i64 {f.v(f'mul i64 {grow}, {p.k // 8}')}, {f.v(f'zext i32 {lc} to i64')}")
            gp = f.v(
                f"getelementptr i8, ptr addrspace(1) {self.a_ptr}, i64 {f.v(f'shl i64 {e}, 4')}"
            )
            self.cp_async(soff, gp)
        for wi, (wptr, ld) in enumerate(self.w_ptrs):
            for i in range(GROUP_K * 8 // self.nt):
                c = f.v(f"add i32 {tid}, {i * self.nt}")
                row, cc = f.v(f"lshr i32 {c}, 3"), f.v(f"and i32 {c}, 7")
                krow = f.v(f"add i32 {row}, {g64}")
                soff = self.swz(krow, cc, 2 * BLOCK_N, self.a_bytes + wi * self.b_bytes)
                k64 = f.v(f"zext i32 {krow} to i64")
                e = f.v(f"add i64 {f.v(f'mul i64 {k64}, {ld}')}, {self.col0}")
                c8 = f.v(f"shl i32 {cc}, 3")
                e = f.v(f"add i64 {e}, {f.v(f'zext i32 {c8} to i64')}")
                gp = f.v(f"getelementptr i8, ptr addrspace(1) {wptr}, i64 {f.v(f'shl i64 {e}, 1')}")
                self.cp_async(soff, gp)
        f.do("call void @llvm.nvvm.cp.async.commit.group()")

    # ---- the products ---------------------------------------------------------------------
    def products(self, g: str, acc: list[list[str]], ss: list[str]) -> None:
        """The 64 ``k`` of group ``g``: per 16, this warp's A fragment and each weight's
        eight n8 tiles (the fragment scaled by the norm weight first when the norm is folded,
        ``ss`` its rows' sums of squares)."""
        p = self.gp
        f = self.f
        g8 = f.v(f"shl i32 {g}, 3")
        g64 = f.v(f"shl i32 {g}, 6")
        for kk in range(GROUP_K // 16):
            self.row_bytes = 2 * p.k
            ch = f.v(f"add i32 {g8}, {2 * kk}")  # chunk 2 ks, ks = 4 g + kk
            a = self.ldmatrix(self.chunk_addr(0, self.arow, ch, self.xa, p.block_m), False)  # type: ignore[arg-type]
            if p.fold:
                a = self.fold_fragment(a, f.v(f"add i32 {g64}, {16 * kk}"), ss)
            self.row_bytes = 2 * BLOCK_N
            krow = f.v(f"add i32 {self.ra}, {f.v(f'add i32 {g64}, {16 * kk}')}")
            for wi in range(len(self.w_ptrs)):
                base = self.a_bytes + wi * self.b_bytes
                for pr in range(BLOCK_N // 16):
                    fr = self.ldmatrix(self.chunk_addr(base, krow, 2 * pr, self.xa, 0), True)
                    for h in range(2):
                        dn = 2 * pr + h
                        acc[wi][4 * dn : 4 * dn + 4] = self.mma_op(
                            a, fr[2 * h : 2 * h + 2], acc[wi][4 * dn : 4 * dn + 4]
                        )

    # ---- the epilogue ---------------------------------------------------------------------
    def rounded(self, x: str) -> str:
        """``x`` rounded to the dtype and back (the value a tensor of it would hold)."""
        f = self.f
        t = f.v(f"fptrunc float {x} to {self.elty}")
        return f.v(f"fpext {self.elty} {t} to float")

    def silu_mul(self, g: str, u: str) -> str:
        f = self.f
        g, u = self.rounded(g), self.rounded(u)
        e = f.v(f"fmul float {g}, {float_literal(-LOG2E, 'float')}")
        ex = f.v(f"call float @llvm.nvvm.ex2.approx.ftz.f32(float {e})")
        den = f.v(f"fadd float {ex}, 1.0")
        return f.v(f"fmul float {f.v(f'fdiv float {g}, {den}')}, {u}")

    def k_sum(self, acc: list[str]) -> list[str]:
        """The k split's partial sums: warps past the first of a row block write theirs to
        shared memory, the first adds them in order (deterministic) and alone goes on to
        store; the others leave."""
        f, p = self.f, self.gp
        na, rbs = len(acc), p.block_m // 16
        base = smem_bytes(p) - partials_bytes(p)
        is0 = f.v(f"icmp eq i32 {self.kp}, 0")

        def slot(kp: str | int, j: int) -> str:
            w = f.v(f"add i32 {f.v(f'mul i32 {kp}, {rbs}')}, {self.rb}")  # (kp - 1) rbs + rb
            w = f.v(f"sub i32 {w}, {rbs}")
            idx = f.v(
                f"add i32 {f.v(f'mul i32 {w}, {32 * na}')}, {f.v(f'add i32 {self.lane}, {32 * j}')}"
            )
            return self.sptr(f.v(f"add i32 {f.v(f'shl i32 {idx}, 2')}, {base}"))

        f.do(f"br i1 {is0}, label %ks_join, label %ks_put")
        self.lab("ks_put")
        for j, x in enumerate(acc):
            f.do(f"store float {x}, ptr addrspace(3) {slot(self.kp, j)}, align 4")
        f.do("br label %ks_join")
        self.lab("ks_join")
        f.do("call void @llvm.nvvm.barrier0()")
        f.do(f"br i1 {is0}, label %ks_sum, label %done")
        self.lab("ks_sum")
        out = list(acc)
        for kp in range(1, p.ksplit):
            for j in range(na):
                v = f.v(f"load float, ptr addrspace(3) {slot(kp, j)}, align 4")
                out[j] = f.v(f"fadd float {out[j]}, {v}")
        return out

    def out_offsets(self) -> list[tuple[int, int, str]]:
        """``(half, dn, byte offset)`` of each output pair this lane stores (rows ``g`` and
        ``g + 8`` of its warp's 16, columns ``8 dn + 2t``, ``+1``)."""
        f, p = self.f, self.gp
        lane = self.lane
        g = f.v(f"lshr i32 {lane}, 2")
        t2 = f.v(f"shl i32 {f.v(f'and i32 {lane}, 3')}, 1")
        w16 = f.v(f"shl i32 {self.rb}, 4")
        r0 = f.v(f"add i32 {f.v(f'add i32 {self.m0}, {w16}')}, {g}")
        colb = f.v(f"add i32 {self.n0}, {t2}")
        out = []
        for half in range(2):
            r = f.v(f"add i32 {r0}, {8 * half}")
            rb = f.v(f"mul i64 {f.v(f'zext i32 {r} to i64')}, {p.n_out}")
            for dn in range(BLOCK_N // 8):
                col = f.v(f"add i32 {colb}, {8 * dn}")
                e = f.v(f"add i64 {rb}, {f.v(f'zext i32 {col} to i64')}")
                out.append((half, dn, f.v(f"shl i64 {e}, 1")))
        return out

    def residual_loads(self) -> dict[tuple[int, int], str]:
        """The residual's pairs this lane adds, loaded now (``early_res``)."""
        f, p = self.f, self.gp
        out = {}
        for half, dn, off in self.out_offsets():
            rp = f.v(f"getelementptr i8, ptr addrspace(1) %in{p.args[-1]}, i64 {off}")
            out[half, dn] = f.v(f"load {self.vecty}, ptr addrspace(1) {rp}, align 4")
        return out

    def store(self, acc: list[list[str]]) -> None:
        f, p = self.f, self.gp
        early: dict[tuple[int, int], str] = getattr(self, "res_early", {})
        for half, dn, off in self.out_offsets():
            i0, i1 = 4 * dn + 2 * half, 4 * dn + 2 * half + 1
            if p.epilogue == "swiglu":
                y0 = self.silu_mul(acc[0][i0], acc[1][i0])
                y1 = self.silu_mul(acc[0][i1], acc[1][i1])
            else:
                y0, y1 = acc[0][i0], acc[0][i1]
            if p.epilogue == "residual":
                rv = early.get((half, dn))
                if rv is None:
                    rp = f.v(f"getelementptr i8, ptr addrspace(1) %in{p.args[-1]}, i64 {off}")
                    rv = f.v(f"load {self.vecty}, ptr addrspace(1) {rp}, align 4")
                rf = f.v(f"fpext {self.vecty} {rv} to <2 x float>")
                y0 = f.v(f"fadd float {y0}, {f.v(f'extractelement <2 x float> {rf}, i32 0')}")
                y1 = f.v(f"fadd float {y1}, {f.v(f'extractelement <2 x float> {rf}, i32 1')}")
            v = self.pack(y0, y1)
            op = f.v(f"getelementptr i8, ptr addrspace(1) %out, i64 {off}")
            f.do(f"store {self.opty} {v}, ptr addrspace(1) {op}, align 4")

    # ---- the kernel -------------------------------------------------------------------------
    def emit(self) -> str:
        f, p = self.f, self.gp
        self.block = "entry"
        self.tid = f.v("call i32 @llvm.nvvm.read.ptx.sreg.tid.x()")
        bx = f.v("call i32 @llvm.nvvm.read.ptx.sreg.ctaid.x()")
        by = f.v("call i32 @llvm.nvvm.read.ptx.sreg.ctaid.y()")
        self.lane = f.v(f"and i32 {self.tid}, 31")
        self.warp = f.v(f"lshr i32 {self.tid}, 5")
        self.m0 = f.v(f"mul i32 {by}, {p.block_m}")
        self.n0 = f.v(f"mul i32 {bx}, {BLOCK_N}")
        self.a_ptr = f"%in{p.args[0]}"
        nw = len(p.ns)
        ws = [f"%in{p.args[1 + i]}" for i in range(nw)]
        if p.epilogue == "swiglu":  # gate and up: the same columns of each
            self.col0 = f.v(f"zext i32 {self.n0} to i64")
            self.w_ptrs = [(ws[0], p.ns[0]), (ws[1], p.ns[1])]
        else:  # the block's columns lie in one weight: pick it and its column
            ptr, col, ld = ws[0], self.n0, str(p.ns[0])
            start = 0
            for i in range(1, nw):
                start += p.ns[i - 1]
                inw = f.v(f"icmp uge i32 {self.n0}, {start}")
                ptr = f.v(f"select i1 {inw}, ptr addrspace(1) {ws[i]}, ptr addrspace(1) {ptr}")
                col = f.v(f"select i1 {inw}, i32 {f.v(f'sub i32 {self.n0}, {start}')}, i32 {col}")
                ld = f.v(f"select i1 {inw}, i64 {p.ns[i]}, i64 {ld}")
            self.col0 = f.v(f"zext i32 {col} to i64")
            self.w_ptrs = [(ptr, ld)]
        groups = p.k // GROUP_K

        def load(i: str, cur: list[str]) -> list[str]:
            self.load_group(i)
            return []

        if p.norm:
            self.stage_norm_weight()
        self.rolled("ld", groups, [], load)
        lane = self.lane
        l7 = f.v(f"and i32 {lane}, 7")
        b3 = f.v(f"and i32 {f.v(f'lshr i32 {lane}, 3')}, 1")
        b4 = f.v(f"lshr i32 {lane}, 4")
        self.ra = f.v(f"add i32 {l7}, {f.v(f'shl i32 {b3}, 3')}")
        self.xa = f.v(f"xor i32 {b4}, {l7}")
        rbs = p.block_m // 16
        self.rb = f.v(f"urem i32 {self.warp}, {rbs}")
        self.kp = f.v(f"udiv i32 {self.warp}, {rbs}")
        self.arow = f.v(f"add i32 {f.v(f'shl i32 {self.rb}, 4')}, {self.ra}")
        if p.early_res and p.epilogue == "residual":
            self.res_early = self.residual_loads()
        nacc = BLOCK_N // 2
        self.t2 = f.v(f"shl i32 {f.v(f'and i32 {lane}, 3')}, 1")
        if p.norm and not p.fold:  # every group first: the norm needs whole rows
            f.do("call void @llvm.nvvm.cp.async.wait.group(i32 0)")
            f.do("call void @llvm.nvvm.barrier0()")
            self.norm()
            f.do("call void @llvm.nvvm.barrier0()")

        ks, nw = p.ksplit, len(self.w_ptrs)
        rounds = -(-groups // ks)

        def step(rr: str, cur: list[str]) -> list[str]:
            r0 = f.v(f"mul i32 {rr}, {ks}")
            g = f.v(f"add i32 {r0}, {self.kp}")
            if not p.norm or p.fold:  # every group any warp reads this round: landed
                last = f.v(f"add i32 {r0}, {ks - 1}")
                self.wait_for(f.v(f"call i32 @llvm.umin.i32(i32 {last}, i32 {groups - 1})"), groups)
            acc = [cur[nacc * w : nacc * (w + 1)] for w in range(nw)]
            ss = list(cur[nacc * nw :])
            if groups % ks == 0:
                self.products(g, acc, ss)
                return [x for a in acc for x in a] + ss
            pre, tag = self.block, g[1:]
            ok = f.v(f"icmp ult i32 {g}, {groups}")
            f.do(f"br i1 {ok}, label %pp_{tag}, label %pm_{tag}")
            self.lab(f"pp_{tag}")
            old = [x for a in acc for x in a] + ss
            self.products(g, acc, ss)
            new = [x for a in acc for x in a] + ss
            done = self.block
            f.do(f"br label %pm_{tag}")
            self.lab(f"pm_{tag}")
            return [
                f.v(f"phi float [{n}, %{done}], [{o}, %{pre}]")
                for n, o in zip(new, old, strict=True)
            ]

        flat = self.rolled("mm", rounds, ["0.0"] * (nacc * nw + (2 if p.fold else 0)), step)
        if ks > 1:
            flat = self.k_sum(flat)
        if p.fold:
            flat = self.unfold(flat)
        self.store([flat[nacc * w : nacc * (w + 1)] for w in range(nw)])
        if ks > 1:
            f.do("br label %done")
            self.lab("done")
        f.do("ret void")
        glob, pdl_lines, _ = pdl_prologue(self.name)
        if p.prefetch:  # before the wait: L2 prefetches only (waiting_kernels accepts them)
            at = pdl_lines.index("  call void @llvm.nvvm.griddepcontrol.wait()")
            pdl_lines[at:at] = self.prefetches()
        names = ["out", *(f"in{i}" for i in range(p.n_inputs))]
        sig = ", ".join(f"ptr addrspace(1) noalias %{x}" for x in names)
        body = "\n".join(f.lines)
        smem = f"{self.smem} = external addrspace(3) global [0 x i8], align 16"
        attrs = f'"nvvm.maxntid"="{p.threads}"'
        pre = "\n".join(pdl_lines)
        return (
            f"{smem}\n{glob}\ndefine ptx_kernel void @{self.name}({sig}) {attrs} {{\n"
            f"{pre}\nentry:\n{body}\n}}\n"
        )


def declarations(p: SmallGemmParams) -> tuple[str, ...]:
    _, _, pdl = pdl_prologue("x")
    extra: tuple[str, ...] = ("declare float @llvm.sqrt.f32(float)",)
    if p.prefetch:
        extra += ("declare void @llvm.nvvm.prefetch.global.L2.evict.last(ptr addrspace(1))",)
    return tuple(dict.fromkeys([*attn_decls(p), *extra, *pdl]))  # type: ignore[arg-type]


def kernel_ir(p: SmallGemmParams, name: str | None = None) -> tuple[tuple[str, ...], str]:
    """The kernel's declarations and its globals + definition."""
    return declarations(p), _GemmEmitter(p, name or kernel_name(p)).emit()


def lower_small_gemm(kernel: GpuKernel, flavour: str = "nvptx") -> GpuKernelCode:
    """The kernel's LLVM function and launch (NVPTX only: ``tests/test_small_gemm_emu.py``
    runs it on the CPU)."""
    if flavour != "nvptx":
        raise ValueError("the small tensor-core GEMM has no host emulation in the entry emulator")
    p = decode(kernel.text.encode())
    assert isinstance(p, SmallGemmParams)
    decls, body = kernel_ir(p, kernel.symbol)
    gx, gy, _ = grid(p)
    tag = (
        f"tc {p.block_m}x{BLOCK_N}"
        + (" rms" if p.norm else "")
        + (" fold" if p.fold else "")
        + (f" {p.epilogue}" if p.epilogue else "")
    )
    tag += f" k/{p.ksplit}" if p.ksplit > 1 else ""
    note = f"{tag} grid {gx}x{gy} smem {smem_bytes(p)}"
    launch = GpuLaunch(kernel.symbol, gx, p.threads, (), 1, note, (gy, 1), smem_bytes(p))
    return GpuKernelCode(kernel.symbol, (launch,), False, decls, body)
