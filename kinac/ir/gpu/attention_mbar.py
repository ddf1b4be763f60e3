"""The fused attention kernel's per-stage mbarriers and warp specialisation (``p.mbar``,
``p.ws``, ``p.pingpong``): the barriers of the shared-memory ring, the producer warpgroup's
K/V loads, the ring's step, and the named barriers that order two warpgroups.

Why a module of its own: these are the Hopper scheduling variants of
:mod:`kinac.ir.gpu.attention_kernel` (its emitter mixes this class in); the kernel's tiles,
products and online softmax stay there.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from kinac.ir.gpu.attention_wgmma import WS_REGS, asm_void, setmaxnreg

if TYPE_CHECKING:
    from kinac.ir.gpu.attention_kernel import StraightLineIr
    from kinac.ir.gpu.attention_params import AttnParams


class MbarMixin:
    """Methods of :class:`kinac.ir.gpu.attention_kernel.AttnEmitter` (its state and tile
    helpers declared here for the type checker)."""

    if TYPE_CHECKING:
        f: StraightLineIr
        p: AttnParams
        name: str
        d: int
        nt: int
        q_bytes: int
        tile_bytes: int
        split_kv: bool
        warp: str
        kbase: str
        vbase: str
        ld_row: str
        ld_cc: str
        ld_scol: str
        ld_gcol: str

        def sptr(self, byte_off: str) -> str: ...
        def stage_bases(self, j: str) -> tuple[str, str]: ...
        def load_kv(self, j: str, commit: bool = True) -> None: ...
        def body(self, j: str, masked: bool) -> None: ...

    def bar(self, kind: str, slot: int | str) -> str:
        """The ``full`` / ``empty`` mbarrier of ring stage ``slot`` (after the tiles); with
        :func:`kinac.ir.gpu.attention_kernel.split_kv`, ``full`` / ``empty`` are the K tile's and ``fullv`` / ``emptyv`` the
        V tile's."""
        f, p = self.f, self.p
        kinds = ("full", "empty", "fullv", "emptyv")
        base = self.q_bytes + 2 * p.stages * self.tile_bytes + 8 * p.stages * kinds.index(kind)
        off = f.v(f"add i32 {f.v(f'shl i32 {slot}, 3')}, {base}")
        return self.sptr(off)

    def mb(self, what: str, *args: str) -> None:
        self.f.do(f"call void @{self.name}_mb_{what}({', '.join(args)})")

    def producer(self, tid: str, ntot: str) -> None:
        """ws: threads from ``nt`` on (the producer warp) load K/V tile t = 0, 1, ... into
        stage t % stages once its "empty" phase for tile t - stages completed, arrive on its
        "full" barrier, and return; the others continue at ``%consumer``."""
        f, p = self.f, self.p
        isp = f.v(f"icmp uge i32 {tid}, {self.nt}")
        f.do(f"br i1 {isp}, label %producer, label %consumer")
        f.label("producer")
        f.do(setmaxnreg(False, WS_REGS[self.split_kv][0]))
        saved = (self.nt, self.ld_row, self.ld_cc, self.ld_scol, self.ld_gcol)
        self.nt = 128
        ptid = f.v(f"sub i32 {tid}, {saved[0]}")
        cpr = self.d // 8
        self.ld_row = f.v(f"udiv i32 {ptid}, {cpr}")
        cc = self.ld_cc = f.v(f"urem i32 {ptid}, {cpr}")
        r7 = f.v(f"and i32 {self.ld_row}, 7")
        sc = f.v(f"xor i32 {f.v(f'and i32 {cc}, 7')}, {r7}")
        self.ld_scol = f.v(f"shl i32 {sc}, 4")
        self.ld_gcol = f.v(f"shl i64 {f.v(f'zext i32 {cc} to i64')}, 4")
        f.do("br label %prod_loop")
        f.label("prod_loop")
        last = "pl_kv_done" if not self.split_kv else "pl_v_done"
        f.do(f"%pt = phi i32 [0, %producer], [%pt_next, %{last}]")
        go = f.v(f"icmp slt i32 %pt, {ntot}")
        f.do(f"br i1 {go}, label %prod_body, label %prod_done")
        f.label("prod_body")
        st = f.v(f"urem i32 %pt, {p.stages}")
        rnd = f.v(f"udiv i32 %pt, {p.stages}")
        par = f.v(f"and i32 {f.v(f'add i32 {rnd}, 1')}, 1")
        pred = "prod_body"
        for which in ("kv",) if not self.split_kv else ("k", "v"):
            sfx = "v" if which == "v" else ""
            self.mb("wait_empty", f"ptr addrspace(3) {self.bar('empty' + sfx, st)}", f"i32 {par}")
            pred = self.producer_load("%pt", which, pred)
            self.mb("cp_arrive", f"ptr addrspace(3) {self.bar('full' + sfx, st)}")
        f.do("%pt_next = add i32 %pt, 1")
        f.do("br label %prod_loop")
        f.label("prod_done")
        f.do("call void @llvm.nvvm.cp.async.commit.group()")
        f.do("call void @llvm.nvvm.cp.async.wait.group(i32 0)")
        f.do("ret void")
        f.label("consumer")
        f.do(setmaxnreg(True, WS_REGS[self.split_kv][1]))
        self.nt, self.ld_row, self.ld_cc, self.ld_scol, self.ld_gcol = saved

    def producer_load(self, t: str, which: str, pred: str) -> str:
        """ws: the cp.async of key tile ``t`` (``which``: "kv", "k" or "v") as a loop over this
        thread's chunks (a chunk of each an iteration, ``128 / (head_dim / 8)`` rows apart, so
        the swizzle column stays the thread's): few registers live, as ``setmaxnreg`` leaves
        the producer few. The trip count comes through an empty asm so LLVM neither unrolls
        the loop nor hoists every chunk's address out of the tile loop. ``pred``: the block
        the loop is entered from; returns the block it leaves by."""
        f, p = self.f, self.p
        cpr = self.d // 8
        per, step = p.block_n * cpr // 128, 128 // cpr
        kb, vb = self.stage_bases(t)
        n0 = f.v(f"mul i32 {t}, {p.block_n}")
        if p.sk % p.block_n == 0:  # every tile whole: no clamp, constant offsets
            self.producer_whole(n0, which, kb, vb, per, step)
            f.do(f"br label %pl_{which}_done")  # the block the tile loop's phi names
            f.label(f"pl_{which}_done")
            return f"pl_{which}_done"
        n = f.v(f'call i32 asm sideeffect "mov.u32 $0, {per};", "=r"()')
        half = f.v(f"mul i32 {f.v(f'lshr i32 {self.ld_cc}, 3')}, {p.block_n * 128}")
        srow = f.v(f"add i32 {f.v(f'add i32 {half}, {self.ld_scol}')}, "
                   f"{f.v(f'shl i32 {self.ld_row}, 7')}")  # fmt: skip
        lab = f"pl_{which}"
        i = f"%{lab}_i"
        f.do(f"br label %{lab}")
        f.label(lab)
        f.do(f"{i} = phi i32 [0, %{pred}], [%{lab}_next, %{lab}]")
        r = f.v(f"add i32 {self.ld_row}, {f.v(f'mul i32 {i}, {step}')}")
        grow = f.v(f"add i32 {n0}, {r}")
        ok = f.v(f"icmp slt i32 {grow}, {p.sk}")
        crow = f.v(f"select i1 {ok}, i32 {grow}, i32 {p.sk - 1}")
        size = f.v(f"select i1 {ok}, i32 16, i32 0")
        g64 = f.v(f"sext i32 {crow} to i64")
        soff = f.v(f"add i32 {srow}, {f.v(f'mul i32 {i}, {step * 128}')}")
        kv = {"k": (kb, self.kbase, p.k_strides[2]), "v": (vb, self.vbase, p.v_strides[2])}
        for sb, gb, stride in (kv[x] for x in which):
            goff = f.v(f"add i64 {f.v(f'mul i64 {g64}, {2 * stride}')}, {self.ld_gcol}")
            gp = f.v(f"getelementptr i8, ptr addrspace(1) {gb}, i64 {goff}")
            sp = self.sptr(f.v(f"add i32 {soff}, {sb}"))
            f.do("call void @llvm.nvvm.cp.async.cg.shared.global.16.s("
                 f"ptr addrspace(3) {sp}, ptr addrspace(1) {gp}, i32 {size})")  # fmt: skip
        f.do(f"%{lab}_next = add i32 {i}, 1")
        more = f.v(f"icmp slt i32 %{lab}_next, {n}")
        f.do(f"br i1 {more}, label %{lab}, label %{lab}_done")
        f.label(f"{lab}_done")
        return f"{lab}_done"

    def producer_whole(self, n0: str, which: str, kb: str, vb: str, per: int, step: int) -> None:
        """ws, ``sk`` a multiple of ``block_n`` (every key tile whole): this thread's ``per``
        chunks of the tile from key row ``n0`` as straight-line cp.async, each at a constant
        offset from one global and one shared address per tile (the rolled loop's clamp,
        select and wide multiply per chunk were ~6 producer instructions a chunk, on the
        schedulers the computing warps share)."""
        f, p = self.f, self.p
        grow = f.v(f"add i32 {n0}, {self.ld_row}")
        g64 = f.v(f"zext i32 {grow} to i64")
        half = f.v(f"mul i32 {f.v(f'lshr i32 {self.ld_cc}, 3')}, {p.block_n * 128}")
        srow = f.v(f"add i32 {f.v(f'add i32 {half}, {self.ld_scol}')}, "
                   f"{f.v(f'shl i32 {self.ld_row}, 7')}")  # fmt: skip
        kv = {"k": (kb, self.kbase, p.k_strides[2]), "v": (vb, self.vbase, p.v_strides[2])}
        for sb, gb, stride in (kv[x] for x in which):
            goff = f.v(f"add i64 {f.v(f'mul i64 {g64}, {2 * stride}')}, {self.ld_gcol}")
            g0 = f.v(f"getelementptr i8, ptr addrspace(1) {gb}, i64 {goff}")
            s0 = self.sptr(f.v(f"add i32 {srow}, {sb}"))
            for i in range(per):
                gp = f.v(f"getelementptr i8, ptr addrspace(1) {g0}, i64 {i * step * 2 * stride}")
                sp = f.v(f"getelementptr i8, ptr addrspace(3) {s0}, i32 {i * step * 128}")
                f.do("call void @llvm.nvvm.cp.async.cg.shared.global.16.s("
                     f"ptr addrspace(3) {sp}, ptr addrspace(1) {gp}, i32 16)")  # fmt: skip

    def mbar_init(self, tid: str) -> None:
        """Thread 0 initialises every stage's barriers ("full": an arrival per loading
        thread, "empty": per computing thread, a phase), then the block barrier."""
        f, p = self.f, self.p
        is0 = f.v(f"icmp eq i32 {tid}, 0")
        f.do(f"br i1 {is0}, label %mb_init, label %mb_init_c")
        f.label("mb_init")
        for s in range(p.stages):
            for kind in ("full", "empty", "fullv", "emptyv")[: 4 if self.split_kv else 2]:
                n = 128 if p.ws and kind.startswith("full") else self.nt
                self.mb("init", f"ptr addrspace(3) {self.bar(kind, s)}", f"i32 {n}")
        f.do("br label %mb_init_c")
        f.label("mb_init_c")
        f.do("call void @llvm.nvvm.barrier0()")

    def wg_only(self, wg: int, lab: str, emit: Callable[[], None]) -> None:
        """``emit``'s code run by warpgroup ``wg`` only."""
        f = self.f
        me = f.v(f"icmp eq i32 {f.v(f'lshr i32 {self.warp}, 2')}, {wg}")
        f.do(f"br i1 {me}, label %{lab}, label %{lab}_c")
        f.label(lab)
        emit()
        f.do(f"br label %{lab}_c")
        f.label(f"{lab}_c")

    def nb(self, what: str, bar_id: str) -> None:
        """Named barrier ``bar_id`` (1 or 2) of 256 threads: ``sync`` or ``arrive``."""
        self.f.do(f"call void @{self.name}_nb_{what}(i32 {bar_id})")

    def stage_load(self, t: str, more: str, lab: str, after: str) -> None:
        """If ``more``: key/value tile ``t`` into stage ``t % stages`` once that stage's
        ``empty`` phase (tile ``t - stages`` consumed) completed, this thread's copies handed
        to the stage's ``full`` barrier; then on at label ``after``. Shared by the mbarrier
        ring's step and the overlapped kernel's prefetch."""
        f, p = self.f, self.p
        f.do(f"br i1 {more}, label %{lab}_pf, label %{after}")
        f.label(f"{lab}_pf")
        st = f.v(f"urem i32 {t}, {p.stages}")
        rnd = f.v(f"udiv i32 {t}, {p.stages}")
        par = f.v(f"and i32 {f.v(f'add i32 {rnd}, 1')}, 1")
        self.mb("wait_empty", f"ptr addrspace(3) {self.bar('empty', st)}", f"i32 {par}")
        self.load_kv(t, commit=False)
        self.mb("cp_arrive", f"ptr addrspace(3) {self.bar('full', st)}")
        f.do(f"br label %{after}")
        f.label(after)

    def mbar_step(self, lab: str, j: str, ntot: str, masked: bool) -> None:
        """Step ``j``: tile ``j + 1`` into its stage once that stage's ``empty`` phase (tile
        ``j - 2`` consumed by every thread) completed (a fresh barrier's parity-1 wait returns
        at once: tiles 1 and 2), then wait for tile ``j``'s ``full`` phase, compute, arrive on
        its ``empty``. No block barrier: warpgroups only meet through the stages."""
        f, p = self.f, self.p
        f.do(f"%jn_{lab} = add i32 {j}, 1")
        t = f"%jn_{lab}"
        more = "false" if p.ws else f.v(f"icmp slt i32 {t}, {ntot}")  # ws: the producer loads
        self.stage_load(t, more, lab, f"{lab}_cmp")
        sj = f.v(f"urem i32 {j}, {p.stages}")
        par = f.v(f"and i32 {f.v(f'udiv i32 {j}, {p.stages}')}, 1")
        self.mb("wait_full", f"ptr addrspace(3) {self.bar('full', sj)}", f"i32 {par}")
        f.do(asm_void("proxy"))  # other threads' cp.async writes, read by the async proxy
        self.body(j, masked)
        self.mb("arrive", f"ptr addrspace(3) {self.bar('empty', sj)}")
        f.do(f"br label %{lab}_tail")
        f.label(f"{lab}_tail")
        f.do(f"br label %{lab}")
