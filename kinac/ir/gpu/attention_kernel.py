"""The fused attention kernel (flash style) as LLVM IR text for NVPTX.

One thread block computes ``block_m`` query rows of one (batch, head): 16 rows per warp. The
block walks the keys in tiles of ``block_n``: ``S = Q K^T`` and ``O += P V`` on the tensor
cores (``mma.sync.m16n8k16``, bf16 or f16 operands, f32 accumulators), with the softmax done
online (running row max ``m`` and sum ``l``; ``O`` rescaled by ``exp2(m_old - m_new)``), so no
``S x S`` tensor exists. Tiles are staged in shared memory by ``cp.async`` (16-byte chunks,
zero-filled past the sequence end, two stages: tile ``j + 1`` loads while ``j`` computes),
read into fragments by ``ldmatrix`` (``.trans`` for ``V``), with the 16-byte chunks of a row
XOR-swizzled by ``row % 8`` so the eight rows an ``ldmatrix`` reads hit distinct banks.
``P`` goes from the ``S`` accumulators straight into ``A`` fragments (the m16n8 accumulator
layout of two adjacent tiles is the m16k16 operand layout), never through memory.

Causal attention skips the key tiles past the block's last row; only the tiles that need a
mask (the diagonal one, the sequence's tail) run the masked copy of the loop body. Grouped-
query attention reads K/V head ``h // group``: no repeat-interleave copy exists.

Everything is a compile-time constant of :class:`AttnParams` (sizes, strides, scale): the
kernel's canonical key is its parameters (:func:`kernel_name`), the launch is four pointers.
The IR keeps loop-carried state in ``alloca`` arrays indexed by constants only; LLVM's SROA
turns them into registers (``ptxas -v``: no stack, no spills; ``tests/test_attention_*``).

The emitter is one class over five modules, each a concept: this one (tile loads, the
``mma.sync`` products, the kernel's prologue and epilogue), :mod:`kinac.ir.gpu.attention_loop`
(the key-tile loops and their state), :mod:`kinac.ir.gpu.attention_softmax` (the online
softmax and masks), :mod:`kinac.ir.gpu.attention_wgmma_ops` (the Hopper products) and
:mod:`kinac.ir.gpu.attention_mbar` (the mbarrier ring and warp specialisation), mixed in.
"""

from __future__ import annotations

import hashlib
import math

from kinac.ir.gpu.attention_lean import vote_helper
from kinac.ir.gpu.attention_loop import LoopMixin
from kinac.ir.gpu.attention_mbar import MbarMixin
from kinac.ir.gpu.attention_overlap import overlap_main
from kinac.ir.gpu.attention_params import MASK_DTYPES, WGMMA_BOTH, AttnParams
from kinac.ir.gpu.attention_softmax import SoftmaxMixin
from kinac.ir.gpu.attention_wgmma import asm_void, helpers, mbar_helpers
from kinac.ir.gpu.attention_wgmma_ops import WgmmaMixin


def kernel_name(p: AttnParams) -> str:
    """A stable function name derived from every parameter (the kernel's canonical key)."""
    h = hashlib.sha256(repr(p).encode()).hexdigest()[:10]
    mma = "" if p.mma == "sync" else f"_{p.mma}"
    stg = "" if p.stages == 2 else f"s{p.stages}"
    mma += "_pk" if p.pack_p else ""
    mma += "_lpt" if p.lpt else ""
    mma += "_mb" if p.mbar else ""
    mma += "_pp" if p.pingpong else ""
    mma += "_ws" if p.ws else ""
    mma += "_lz" if p.lazy else ""
    return f"attn_{p.dtype}_d{p.head_dim}_m{p.block_m}n{p.block_n}{stg}{mma}_{h}"


class StraightLineIr:
    """Straight-line IR text with fresh SSA names."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.n = 0

    def v(self, expr: str) -> str:
        self.n += 1
        name = f"%v{self.n}"
        self.lines.append(f"  {name} = {expr}")
        return name

    def do(self, stmt: str) -> None:
        self.lines.append(f"  {stmt}")

    def label(self, name: str) -> None:
        self.lines.append(f"{name}:")


def attn_decls(p: AttnParams) -> list[str]:
    op = "<2 x half>" if p.dtype == "f16" else "i32"
    mma = "llvm.nvvm.mma.m16n8k16.row.col." + ("f32.f32" if p.dtype == "f16" else "bf16")
    f4 = "{float, float, float, float}"
    i4 = "{i32, i32, i32, i32}"
    return [
        f"declare {f4} @{mma}({', '.join([op] * 6)}, float, float, float, float)",
        f"declare {i4} @llvm.nvvm.ldmatrix.sync.aligned.m8n8.x4.b16(ptr addrspace(3))",
        f"declare {i4} @llvm.nvvm.ldmatrix.sync.aligned.m8n8.x4.trans.b16(ptr addrspace(3))",
        "declare void @llvm.nvvm.cp.async.cg.shared.global.16.s(ptr addrspace(3), "
        "ptr addrspace(1), i32)",
        "declare void @llvm.nvvm.cp.async.commit.group()",
        "declare void @llvm.nvvm.cp.async.wait.group(i32)",
        "declare void @llvm.nvvm.barrier0()",
        "declare float @llvm.nvvm.ex2.approx.ftz.f32(float)",
        "declare i1 @llvm.nvvm.vote.any.sync(i32, i1)",
        "declare float @llvm.maxnum.f32(float, float)",
        "declare float @llvm.fma.f32(float, float, float)",
        "declare i32 @llvm.umin.i32(i32, i32)",
        "declare float @llvm.nvvm.shfl.sync.bfly.f32(i32, float, i32, i32)",
        "declare i32 @llvm.nvvm.read.ptx.sreg.tid.x()",
        "declare i32 @llvm.nvvm.read.ptx.sreg.ctaid.x()",
        "declare i32 @llvm.nvvm.read.ptx.sreg.ctaid.y()",
        "declare i32 @llvm.nvvm.read.ptx.sreg.ctaid.z()",
    ]


class AttnEmitter(LoopMixin, MbarMixin, SoftmaxMixin, WgmmaMixin):
    """Emits one kernel for one :class:`AttnParams`."""

    def __init__(self, p: AttnParams, name: str | None = None) -> None:
        self.p = p
        self.name = name or kernel_name(p)
        self.f = StraightLineIr()
        self.d = p.head_dim
        self.nt = 32 * p.warps
        self.row_bytes = 2 * p.head_dim
        self.opty = "<2 x half>" if p.dtype == "f16" else "i32"
        self.vecty = "<2 x half>" if p.dtype == "f16" else "<2 x bfloat>"
        self.mma = "llvm.nvvm.mma.m16n8k16.row.col." + ("f32.f32" if p.dtype == "f16" else "bf16")
        self.q_bytes = p.block_m * self.row_bytes
        self.tile_bytes = p.block_n * self.row_bytes
        self.smem = f"@{self.name}_smem"
        # wgmma reads tiles through 128-byte-swizzle descriptors: each tile is stored as
        # [head_dim / 64][rows][64] ("atoms" of 8 rows x 128 bytes, 1024-byte aligned)
        self.atoms = p.mma != "sync"
        self.pipe = p.mma == "wgmma_pipe"
        self.split_kv = split_kv(p)

    # ---- small helpers ------------------------------------------------------------------
    def shfl_max(self, x: str) -> str:
        f = self.f
        for m in (1, 2):
            o = f.v(f"call float @llvm.nvvm.shfl.sync.bfly.f32(i32 -1, float {x}, i32 {m}, i32 31)")
            x = f.v(f"call float @llvm.maxnum.f32(float {x}, float {o})")
        return x

    def shfl_sum(self, x: str) -> str:
        f = self.f
        for m in (1, 2):
            o = f.v(f"call float @llvm.nvvm.shfl.sync.bfly.f32(i32 -1, float {x}, i32 {m}, i32 31)")
            x = f.v(f"fadd float {x}, {o}")
        return x

    def sptr(self, byte_off: str) -> str:
        return self.f.v(f"getelementptr i8, ptr addrspace(3) {self.smem}, i32 {byte_off}")

    def ldmatrix(self, addr: str, trans: bool) -> list[str]:
        f = self.f
        name = "trans.b16" if trans else "b16"
        r = f.v(
            "call {i32, i32, i32, i32} "
            f"@llvm.nvvm.ldmatrix.sync.aligned.m8n8.x4.{name}(ptr addrspace(3) {addr})"
        )
        out = []
        for i in range(4):
            x = f.v(f"extractvalue {{i32, i32, i32, i32}} {r}, {i}")
            if self.opty != "i32":
                x = f.v(f"bitcast i32 {x} to {self.opty}")
            out.append(x)
        return out

    def mma_op(self, a: list[str], b: list[str], c: list[str]) -> list[str]:
        f = self.f
        ops = ", ".join(f"{self.opty} {x}" for x in (*a, *b))
        cs = ", ".join(f"float {x}" for x in c)
        r = f.v(f"call {{float, float, float, float}} @{self.mma}({ops}, {cs})")
        return [f.v(f"extractvalue {{float, float, float, float}} {r}, {i}") for i in range(4)]

    def pack(self, x: str, y: str) -> str:
        """Two f32 -> one register of two bf16/f16 (round to nearest even)."""
        f = self.f
        a = f.v(f"insertelement <2 x float> poison, float {x}, i32 0")
        a = f.v(f"insertelement <2 x float> {a}, float {y}, i32 1")
        h = f.v(f"fptrunc <2 x float> {a} to {self.vecty}")
        return h if self.opty != "i32" else f.v(f"bitcast {self.vecty} {h} to i32")

    def chunk_addr(self, base: int | str, row: str, chunk: int, lane_x: str, rows: int) -> str:
        """Shared address of 16-byte chunk ``chunk ^ lane_x`` of row ``row`` of a tile of
        ``rows`` rows (``chunk`` even, ``lane_x`` the lane's chunk bit XOR its row % 8)."""
        f = self.f
        if self.atoms:
            c = f.v(f"xor i32 {lane_x}, {chunk & 7}")
            rb = f.v(f"shl i32 {row}, 7")
            rb = f.v(f"add i32 {rb}, {(chunk >> 3) * rows * 128}")
        else:
            c = f.v(f"xor i32 {lane_x}, {chunk}")
            rb = f.v(f"mul i32 {row}, {self.row_bytes}")
        cb = f.v(f"shl i32 {c}, 4")
        off = f.v(f"add i32 {rb}, {cb}")
        off = f.v(f"add i32 {off}, {base}")
        return self.sptr(off)

    # ---- tile loads -----------------------------------------------------------------------
    def load_tile(self, sbase: int | str, gbase: str, row0: str, nrows: int, limit: int,
                  stride: int) -> None:  # fmt: skip
        """cp.async ``nrows`` rows from ``row0`` (rows >= ``limit`` zero-filled)."""
        f = self.f
        cpr = self.d // 8
        per = nrows * cpr // self.nt
        for i in range(per):
            r = f.v(f"add i32 {self.ld_row}, {i * self.nt // cpr}")
            grow = f.v(f"add i32 {row0}, {r}")
            ok = f.v(f"icmp slt i32 {grow}, {limit}")
            crow = f.v(f"select i1 {ok}, i32 {grow}, i32 {limit - 1}")
            size = f.v(f"select i1 {ok}, i32 16, i32 0")
            g64 = f.v(f"sext i32 {crow} to i64")
            goff = f.v(f"mul i64 {g64}, {2 * stride}")
            goff = f.v(f"add i64 {goff}, {self.ld_gcol}")
            gp = f.v(f"getelementptr i8, ptr addrspace(1) {gbase}, i64 {goff}")
            scol = self.ld_scol
            if (i * self.nt // cpr) % 8:  # the row's swizzle differs from the first row's
                r7 = f.v(f"and i32 {r}, 7")
                cc = self.ld_cc if not self.atoms else f.v(f"and i32 {self.ld_cc}, 7")
                scol = f.v(f"shl i32 {f.v(f'xor i32 {cc}, {r7}')}, 4")
            if self.atoms:  # [chunk / 8][row][8 chunks]
                half = f.v(f"lshr i32 {self.ld_cc}, 3")
                soff = f.v(f"mul i32 {half}, {nrows * 128}")
                soff = f.v(f"add i32 {soff}, {f.v(f'shl i32 {r}, 7')}")
            else:
                soff = f.v(f"mul i32 {r}, {self.row_bytes}")
            soff = f.v(f"add i32 {soff}, {scol}")
            soff = f.v(f"add i32 {soff}, {sbase}")
            sp = self.sptr(soff)
            f.do(
                "call void @llvm.nvvm.cp.async.cg.shared.global.16.s("
                f"ptr addrspace(3) {sp}, ptr addrspace(1) {gp}, i32 {size})"
            )

    def stage_bases(self, j: str) -> tuple[str, str]:
        """Shared-memory offsets of the K and V tiles of key tile ``j`` (stage ``j % stages``)."""
        f, p = self.f, self.p
        st = f.v(f"and i32 {j}, 1") if p.stages == 2 else f.v(f"urem i32 {j}, {p.stages}")
        kb = f.v(f"mul i32 {st}, {2 * self.tile_bytes}")
        kb = f.v(f"add i32 {kb}, {self.q_bytes}")
        vb = f.v(f"add i32 {kb}, {self.tile_bytes}")
        return kb, vb

    def load_kv(self, j: str, commit: bool = True) -> None:
        """Issue the cp.async of key tile ``j`` into stage ``j % stages`` (and commit)."""
        f, p = self.f, self.p
        kb, vb = self.stage_bases(j)
        n0 = f.v(f"mul i32 {j}, {p.block_n}")
        self.load_tile(kb, self.kbase, n0, p.block_n, p.sk, p.k_strides[2])
        self.load_tile(vb, self.vbase, n0, p.block_n, p.sk, p.v_strides[2])
        if commit:
            f.do("call void @llvm.nvvm.cp.async.commit.group()")

    # ---- the kernel ----------------------------------------------------------------------
    def emit(self) -> str:
        f, p = self.f, self.p
        name = self.name
        if p.mma.startswith("wgmma"):  # sm_90a code: programmatic dependent launch, first
            f.do('call void asm sideeffect "griddepcontrol.wait;", "~{memory}"()')
            f.do('call void asm sideeffect "griddepcontrol.launch_dependents;", "~{memory}"()')
        tid = f.v("call i32 @llvm.nvvm.read.ptx.sreg.tid.x()")
        bx = f.v("call i32 @llvm.nvvm.read.ptx.sreg.ctaid.x()")
        h = f.v("call i32 @llvm.nvvm.read.ptx.sreg.ctaid.y()")
        b = f.v("call i32 @llvm.nvvm.read.ptx.sreg.ctaid.z()")
        nqb = -(-p.sq // p.block_m)
        if p.lpt:  # the linear block index (x fastest: launch order) -> (rank, head, batch)
            lin = f.v(f"mul i32 {b}, {p.heads}")
            lin = f.v(f"add i32 {lin}, {h}")
            lin = f.v(f"mul i32 {lin}, {nqb}")
            lin = f.v(f"add i32 {lin}, {bx}")
            bx = f.v(f"udiv i32 {lin}, {p.heads * p.batch}")
            rest = f.v(f"urem i32 {lin}, {p.heads * p.batch}")
            h = f.v(f"urem i32 {rest}, {p.heads}")
            b = f.v(f"udiv i32 {rest}, {p.heads}")
        qb = f.v(f"sub i32 {nqb - 1}, {bx}")  # heaviest causal blocks first
        m0 = f.v(f"mul i32 {qb}, {p.block_m}")
        kvh = f.v(f"udiv i32 {h}, {p.group}")
        self.lane = f.v(f"and i32 {tid}, 31")
        self.warp = f.v(f"lshr i32 {tid}, 5")
        cpr = self.d // 8
        self.ld_row = f.v(f"udiv i32 {tid}, {cpr}")
        cc = self.ld_cc = f.v(f"urem i32 {tid}, {cpr}")
        r7 = f.v(f"and i32 {self.ld_row}, 7")
        sc = f.v(f"xor i32 {f.v(f'and i32 {cc}, 7') if self.atoms else cc}, {r7}")
        self.ld_scol = f.v(f"shl i32 {sc}, 4")
        cc64 = f.v(f"zext i32 {cc} to i64")
        self.ld_gcol = f.v(f"shl i64 {cc64}, 4")

        def base(ptr: str, strides: tuple[int, int, int], head: str, off: int) -> str:
            b64 = f.v(f"zext i32 {b} to i64")
            h64 = f.v(f"zext i32 {head} to i64")
            o = f.v(f"mul i64 {b64}, {2 * strides[0]}")
            o2 = f.v(f"mul i64 {h64}, {2 * strides[1]}")
            o = f.v(f"add i64 {o}, {o2}")
            o = f.v(f"add i64 {o}, {2 * off}")
            return f.v(f"getelementptr i8, ptr addrspace(1) {ptr}, i64 {o}")

        ins = [f"%in{p.args[i]}" for i in range(3)]
        qbase = base(ins[0], p.q_strides, h, p.offsets[0])
        self.kbase = base(ins[1], p.k_strides, kvh, p.offsets[1])
        self.vbase = base(ins[2], p.v_strides, kvh, p.offsets[2])
        obase = base("%out", p.o_strides, h, 0)
        if p.mask_arg >= 0:  # the user's mask at (b, h): rows and columns added per score
            isz = MASK_DTYPES[p.mask_dtype][1]
            b64 = f.v(f"zext i32 {b} to i64")
            h64 = f.v(f"zext i32 {h} to i64")
            o = f.v(f"mul i64 {b64}, {isz * p.mask_strides[0]}")
            o = f.v(f"add i64 {o}, {f.v(f'mul i64 {h64}, {isz * p.mask_strides[1]}')}")
            o = f.v(f"add i64 {o}, {isz * p.mask_offset}")
            self.mbase = f.v(f"getelementptr i8, ptr addrspace(1) %in{p.mask_arg}, i64 {o}")
        # key tiles: all that any row of the block sees; the first n_full need no mask
        ntiles = -(-p.sk // p.block_n)
        full_sk = p.sk // p.block_n
        if p.causal:
            last = f.v(f"add i32 {m0}, {p.block_m + p.block_n - 1}")
            lim = f.v(f"udiv i32 {last}, {p.block_n}")
            lt = f.v(f"icmp ult i32 {lim}, {ntiles}")
            ntot = f.v(f"select i1 {lt}, i32 {lim}, i32 {ntiles}")
            m1 = f.v(f"add i32 {m0}, 1")
            fl = f.v(f"udiv i32 {m1}, {p.block_n}")
            lt2 = f.v(f"icmp ult i32 {fl}, {full_sk}")
            nfull = f.v(f"select i1 {lt2}, i32 {fl}, i32 {full_sk}")
        else:
            ntot, nfull = str(ntiles), str(full_sk)
        if p.ws:  # state, barriers, then the producer warp goes its own way
            self.alloc_state()
            self.mbar_init(tid)
            self.producer(tid, ntot)
        # stage Q and key tile 0 (ws: the producer loads every K/V tile)
        self.load_tile(0, qbase, m0, p.block_m, p.sq, p.q_strides[2])
        if p.ws:
            f.do("call void @llvm.nvvm.cp.async.commit.group()")
        else:
            self.load_kv("0")
        # per-lane ldmatrix rows and chunk parts
        lane = self.lane
        l7 = f.v(f"and i32 {lane}, 7")
        l3 = f.v(f"lshr i32 {lane}, 3")
        b3 = f.v(f"and i32 {l3}, 1")
        b4 = f.v(f"lshr i32 {lane}, 4")
        # A / V pattern: row = l7 + 8 * b3, chunk part = b4;  K pattern: row = l7 + 8 * b4, b3
        ra = f.v(f"add i32 {l7}, {f.v(f'shl i32 {b3}, 3')}")
        self.xa = f.v(f"xor i32 {b4}, {l7}")
        rk = f.v(f"add i32 {l7}, {f.v(f'shl i32 {b4}, 3')}")
        self.xk = f.v(f"xor i32 {b3}, {l7}")
        self.ra, self.rk = ra, rk
        w16 = f.v(f"shl i32 {self.warp}, 4")
        qrow = f.v(f"add i32 {w16}, {ra}")
        f.do("call void @llvm.nvvm.cp.async.wait.group(i32 0)")
        if self.atoms:  # cp.async wrote the tiles the tensor cores' async proxy reads
            f.do(asm_void("proxy"))
            self.sbase = f.v(f"ptrtoint ptr addrspace(3) {self.smem} to i64")
        if p.ws:  # the computing warps only (the producer is in its loop)
            self.nb("sync", "3")
            if p.pingpong:
                self.wg_only(1, "pp_go", lambda: self.nb("arrive", "1"))
        else:
            f.do("call void @llvm.nvvm.barrier0()")
        self.qf = []
        for kk in range(self.d // 16):
            addr = self.chunk_addr(0, qrow, 2 * kk, self.xa, p.block_m)
            self.qf.append(self.ldmatrix(addr, False))
        # row indices of this thread's accumulator rows (g and g + 8)
        g = f.v(f"lshr i32 {lane}, 2")
        t4 = f.v(f"and i32 {lane}, 3")
        self.row_g = f.v(f"add i32 {f.v(f'add i32 {m0}, {w16}')}, {g}")
        self.col_t = f.v(f"shl i32 {t4}, 1")
        if not p.ws:
            self.alloc_state()
        if p.mbar and not p.ws:  # thread 0 makes the barriers; tile 0 landed above (waited for)
            self.mbar_init(tid)
            self.mb("cp_arrive", f"ptr addrspace(3) {self.bar('full', 0)}")
            if p.pingpong:  # warpgroup 0 issues first: warpgroup 1 lets it
                self.wg_only(1, "pp_go", lambda: self.nb("arrive", "1"))
        for t in range(1, 1 if p.mbar else p.stages - 1):  # the ring's other stages (after
            more = f.v(f"icmp slt i32 {t}, {ntot}")  # the allocas: SROA needs them in entry)
            f.do(f"br i1 {more}, label %pro{t}, label %pro{t}_c")
            f.label(f"pro{t}")
            self.load_kv(str(t), commit=False)
            f.do(f"br label %pro{t}_c")
            f.label(f"pro{t}_c")
            f.do("call void @llvm.nvvm.cp.async.commit.group()")
        if p.mma == "wgmma_ovl":
            overlap_main(self, ntot, nfull)
        else:
            self.main_loop(ntot, nfull)
        self.epilogue(obase)
        f.do("ret void")
        attrs = f'"nvvm.maxntid"="{p.threads}"'
        if p.min_blocks:
            attrs += f' "nvvm.minctasm"="{p.min_blocks}"'
        names = ["out", *(f"in{i}" for i in range(p.n_inputs))]
        sig = ", ".join(f"ptr addrspace(1) noalias %{x}" for x in names)
        body = "\n".join(self.f.lines)
        align = 1024 if self.atoms else 16  # the 128-byte swizzle repeats every 1024 bytes
        smem = f"{self.smem} = external addrspace(3) global [0 x i8], align {align}"
        if p.mma.startswith("wgmma"):
            smem += "\n" + helpers(name, p.dtype, p.block_n, self.d, p.mma in WGMMA_BOTH,
                                   p.pack_p, p.mma == "wgmma_ovl")  # fmt: skip
        if p.mbar:
            smem += "\n" + mbar_helpers(name, p.pingpong or p.ws)
        if p.lazy:
            smem += "\n" + vote_helper(name)
        return f"{smem}\ndefine ptx_kernel void @{name}({sig}) {attrs} {{\nentry:\n{body}\n}}\n"

    def scores(self, kb: str) -> list[list[str]]:
        """``S = Q K^T`` of the K tile at ``kb``: ``block_n / 8`` accumulator quads."""
        f, p = self.f, self.p
        nn = p.block_n // 8
        if p.pingpong:  # wait for the other warpgroup's issue, issue, let it go
            wg = self.f.v(f"lshr i32 {self.warp}, 2")
            self.nb("sync", self.f.v(f"add i32 {wg}, 1"))
            acc = self.issue_scores(kb)
            self.nb("arrive", self.f.v(f"sub i32 2, {wg}"))
            self.f.do(asm_void("wait"))
            acc = self.wg_fence(f"{self.name}_fence_s", acc)
            s = [acc[4 * i : 4 * i + 4] for i in range(p.block_n // 8)]
        elif p.mma.startswith("wgmma"):
            s = self.wgmma_scores(kb)
        else:
            # S = Q K^T: ldmatrix.x4 gives two key tiles' B fragments for one k step
            s = [["0.0"] * 4 for _ in range(nn)]
            for kk in range(self.d // 16):
                for pr in range(nn // 2):
                    row = f.v(f"add i32 {self.rk}, {16 * pr}")
                    addr = self.chunk_addr(kb, row, 2 * kk, self.xk, p.block_n)
                    fr = self.ldmatrix(addr, False)
                    s[2 * pr] = self.mma_op(self.qf[kk], fr[0:2], s[2 * pr])
                    s[2 * pr + 1] = self.mma_op(self.qf[kk], fr[2:4], s[2 * pr + 1])
        return s

    def output_step(self, vb: str, pv: list[list[str]], o: list[str]) -> None:
        """``O += P V`` (V tile at ``vb``), stored."""
        f, p = self.f, self.p
        if p.mma in WGMMA_BOTH:
            o = self.wgmma_output(vb, pv, o)
        # O += P V: P's A fragments from the S accumulators of key tiles 2kb, 2kb + 1
        for kb2 in range(p.block_n // 16 if p.mma not in WGMMA_BOTH else 0):
            pa = [
                self.pack(pv[2 * kb2][0], pv[2 * kb2][1]),
                self.pack(pv[2 * kb2][2], pv[2 * kb2][3]),
                self.pack(pv[2 * kb2 + 1][0], pv[2 * kb2 + 1][1]),
                self.pack(pv[2 * kb2 + 1][2], pv[2 * kb2 + 1][3]),
            ]
            row = f.v(f"add i32 {self.ra}, {16 * kb2}")
            for pr in range(self.d // 16):
                fr = self.ldmatrix(self.chunk_addr(vb, row, 2 * pr, self.xa, p.block_n), True)
                for half in range(2):
                    dn = 2 * pr + half
                    o[4 * dn : 4 * dn + 4] = self.mma_op(pa, fr[2 * half : 2 * half + 2],
                                                         o[4 * dn : 4 * dn + 4])  # fmt: skip
        self.store_state("oacc", o)

    def epilogue(self, obase: str) -> None:
        f, p = self.f, self.p
        o = self.load_state("oacc", self.d // 8 * 4)
        lr = self.load_state("lrow", 2)
        inv = []
        for hr in range(2):  # a fully masked row: l = 0 and O = 0, so 0 * (1/0) = NaN
            tot = self.shfl_sum(lr[hr])  # (softmax's 0/0, as unfused; docs/language.md)
            inv.append(f.v(f"fdiv arcp float 1.0, {tot}"))
        col2 = f.v(f"shl i32 {self.col_t}, 1")
        col64 = f.v(f"zext i32 {col2} to i64")
        for hr in range(2):
            row = self.row_g if hr == 0 else f.v(f"add i32 {self.row_g}, 8")
            ok = f.v(f"icmp slt i32 {row}, {p.sq}")
            f.do(f"br i1 {ok}, label %st{hr}, label %sk{hr}")
            f.label(f"st{hr}")
            r64 = f.v(f"sext i32 {row} to i64")
            roff = f.v(f"mul i64 {r64}, {2 * p.o_strides[2]}")
            roff = f.v(f"add i64 {roff}, {col64}")
            for dn in range(self.d // 8):
                x = f.v(f"fmul float {o[4 * dn + 2 * hr]}, {inv[hr]}")
                y = f.v(f"fmul float {o[4 * dn + 2 * hr + 1]}, {inv[hr]}")
                pk = self.pack(x, y)
                off = f.v(f"add i64 {roff}, {16 * dn}")
                gp = f.v(f"getelementptr i8, ptr addrspace(1) {obase}, i64 {off}")
                f.do(f"store {self.opty} {pk}, ptr addrspace(1) {gp}, align 4")
            f.do(f"br label %sk{hr}")
            f.label(f"sk{hr}")


def kernel_ir(p: AttnParams, name: str | None = None) -> tuple[tuple[str, ...], str]:
    """``p``'s kernel as (declarations, body): the body holds its shared-memory symbol and its
    function (``name``, else :func:`kernel_name`), so several kernels share a module
    (:func:`kinac.ir.gpu.kernel_split.kernel_module`)."""
    return tuple(attn_decls(p)), AttnEmitter(p, name).emit()


def attention_llvm_ir(params: tuple[AttnParams, ...]) -> str:
    """One LLVM module holding a kernel per parameter set (names from :func:`kernel_name`)."""
    bodies: dict[str, str] = {}
    decls: dict[str, None] = {}
    for p in params:
        if kernel_name(p) not in bodies:
            d, bodies[kernel_name(p)] = kernel_ir(p)
            decls.update(dict.fromkeys(d))
    head = 'target triple = "nvptx64-nvidia-cuda"\n'
    return head + "\n".join(sorted(decls)) + "\n\n" + "\n".join(bodies.values())


def split_kv(p: AttnParams) -> bool:
    """K and V tiles on barriers of their own (``wgmma_ovl`` with ``ws``, as FA3's two
    pipelines): a step reads tile j + 1's K and tile j's V, so each is released and refilled
    apart (the producer runs two K tiles and two V tiles ahead, not one K/V pair)."""
    return p.ws and p.mma == "wgmma_ovl"


def smem_bytes(p: AttnParams) -> int:
    """Dynamic shared memory of one block: the Q tile and ``stages`` stages of K and V tiles,
    then the stages' mbarriers (8 bytes each: full and empty, per K and V with
    :func:`split_kv`)."""
    return 2 * p.head_dim * (p.block_m + 2 * p.stages * p.block_n) + (
        (32 if split_kv(p) else 16) * p.stages if p.mbar else 0
    )


def flops(p: AttnParams) -> float:
    """The useful FLOPs (causal: the lower triangle, as FlashAttention counts)."""
    full = 4.0 * p.batch * p.heads * p.sq * p.sk * p.head_dim
    return full / 2 if p.causal else full


def grid(p: AttnParams) -> tuple[int, int, int]:
    return (math.ceil(p.sq / p.block_m), p.heads, p.batch)
