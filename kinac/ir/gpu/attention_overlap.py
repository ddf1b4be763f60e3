"""FlashAttention-3's intra-warpgroup overlap for the fused attention kernel (``wgmma_ovl``).

The other wgmma variants run each key tile's products back to back with the softmax between
them: ``S = Q K^T`` (wait), softmax, ``O += P V`` (wait). While the softmax runs (its ``ex2``
alone is about half the tensor cores' time for a 128x128 tile) the tensor cores of the
warpgroup idle unless the other warpgroup fills them. Here a step issues two products at
once, tile ``j + 1``'s scores and tile ``j``'s ``P V`` (P packed at the end of the previous
step), waits for the scores only (``wgmma.wait_group 1``), runs tile ``j + 1``'s softmax while
``P V`` is still on the tensor cores, then waits for it and rescales ``O`` by the row factor
(FA3's ``IntraWGOverlap``; the rescale comes after the wait: ``O`` belongs to the wgmma until
then). The K/V ring (``mbar``, three stages) runs one tile further ahead than the plain mbar
step: tile ``j + 2`` loads during step ``j`` into tile ``j - 1``'s stage, whose ``P V`` ended
in step ``j - 1``. With ``pingpong`` both products of a step are issued inside the named
barrier turn, as FA3 does, so one warpgroup's softmax runs under the other's two products.

Step count: tile 0's scores and softmax before the loops, ``ntot - 1`` steps (unmasked key
tiles first, then the masked ones: a step's mask is the one of the tile it scores), then the
last tile's ``P V`` alone. With ``pingpong`` each of the ``ntot + 1`` issues is a turn.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from kinac.ir.gpu.attention_lean import rescale_if_moved
from kinac.ir.gpu.attention_wgmma import asm_void

if TYPE_CHECKING:
    from kinac.ir.gpu.attention_kernel import AttnEmitter


def _turn(e: AttnEmitter, issue: Callable[[], None]) -> None:
    """With ``pingpong``: wait for this warpgroup's turn, run ``issue`` (a callable that emits
    wgmmas), hand the turn over; else just ``issue``."""
    if not e.p.pingpong:
        issue()
        return
    wg = e.f.v(f"lshr i32 {e.warp}, 2")
    e.nb("sync", e.f.v(f"add i32 {wg}, 1"))
    issue()
    e.nb("arrive", e.f.v(f"sub i32 2, {wg}"))


def _load_p(e: AttnEmitter) -> list[list[str]]:
    """P's packed A fragments (four registers per 16 keys) from the loop-carried state."""
    f, p = e.f, e.p
    n = p.block_n // 4
    regs = []
    for i in range(n):
        ptr = f.v(f"getelementptr [{n} x i32], ptr %pst, i32 0, i32 {i}")
        x = f.v(f"load i32, ptr {ptr}")
        regs.append(x if e.opty == "i32" else f.v(f"bitcast i32 {x} to {e.opty}"))
    return [regs[4 * i : 4 * i + 4] for i in range(p.block_n // 16)]


def _pack_p(e: AttnEmitter, pv: list[list[str]]) -> list[str]:
    """P packed to 16 bits (the A fragments of ``O += P V``), as i32."""
    regs = []
    for kb2 in range(e.p.block_n // 16):
        a, b = pv[2 * kb2], pv[2 * kb2 + 1]
        regs += [e.pack(a[0], a[1]), e.pack(a[2], a[3]), e.pack(b[0], b[1]), e.pack(b[2], b[3])]
    return [e.as_i32(x) for x in regs]


def _store_p(e: AttnEmitter, regs: list[str]) -> None:
    """Keep packed P for the next step's ``P V``. Packed after that step's wait: the
    loop-carried registers are the ones the running ``P V`` reads, and ptxas serialises every
    wgmma of the kernel (C7513) when they are written before it is done (also through the
    ``pack_p`` pin, whose outputs are tied to its inputs): ``pack_p`` changes nothing here."""
    f, p = e.f, e.p
    n = p.block_n // 4
    for i, x in enumerate(regs):
        ptr = f.v(f"getelementptr [{n} x i32], ptr %pst, i32 0, i32 {i}")
        f.do(f"store i32 {x}, ptr {ptr}")


def _issue_pv(e: AttnEmitter, vb: str, pa: list[list[str]], o: list[str]) -> list[str]:
    """Issue (and commit, not wait for) ``O += P V`` of the V tile at ``vb``."""
    f, p = e.f, e.p
    f.do(asm_void("fence"))
    for kb2 in range(p.block_n // 16):
        desc = e.desc(f.v(f"add i32 {vb}, {kb2 * 16 * 128}"), p.block_n * 128, 1024)
        o = e.wg_call(f"{e.name}_wg_o", pa[kb2], desc, o)
    f.do(asm_void("commit"))
    return o


def _wait_full(e: AttnEmitter, t: str, kind: str = "full", fence: bool = True) -> None:
    """Wait for key tile ``t``'s "full" phase (its K and V landed; split: ``kind`` "full" for
    K, "fullv" for V); ``fence``: then the proxy fence (one after the last of back-to-back
    waits covers every tile they waited for)."""
    f, p = e.f, e.p
    st = f.v(f"urem i32 {t}, {p.stages}")
    par = f.v(f"and i32 {f.v(f'udiv i32 {t}, {p.stages}')}, 1")
    e.mb("wait_full", f"ptr addrspace(3) {e.bar(kind, st)}", f"i32 {par}")
    if fence:  # other threads' cp.async writes, read by the async proxy
        f.do(asm_void("proxy"))


def _arrive_empty(e: AttnEmitter, t: str, kind: str = "empty") -> None:
    st = e.f.v(f"urem i32 {t}, {e.p.stages}")
    e.mb("arrive", f"ptr addrspace(3) {e.bar(kind, st)}")


def _prefetch(e: AttnEmitter, lab: str, t: str, ntot: str) -> None:
    """If ``t < ntot``: key tile ``t`` into its stage (:meth:`AttnEmitter.stage_load`)."""
    e.stage_load(t, e.f.v(f"icmp slt i32 {t}, {ntot}"), lab, f"{lab}_pfc")


def _quads(acc: list[str]) -> list[list[str]]:
    return [acc[4 * i : 4 * i + 4] for i in range(len(acc) // 4)]


def _step(e: AttnEmitter, lab: str, j: str, ntot: str, masked: bool) -> None:
    """Step ``j``: tile ``j + 2`` loads; tile ``j + 1``'s scores and tile ``j``'s ``P V``
    issued together; tile ``j + 1``'s softmax under ``P V``; ``O`` rescaled after its wait."""
    f = e.f
    jn = f.v(f"add i32 {j}, 1")
    if not e.p.ws:  # else the producer warpgroup loads every tile
        _prefetch(e, lab, f.v(f"add i32 {j}, 2"), ntot)
    _wait_full(e, jn, fence=not e.split_kv)
    if e.split_kv:  # tile j's V (its own barrier); one fence for both waits
        _wait_full(e, j, "fullv")
    kb1, _ = e.stage_bases(jn)
    _, vb = e.stage_bases(j)
    pa = _load_p(e)
    o = e.load_state("oacc", e.d // 8 * 4)
    issued: dict[str, list[str]] = {}

    def issue() -> None:
        issued["s"] = e.issue_scores(kb1, zero=True)
        issued["o"] = _issue_pv(e, vb, pa, o)

    _turn(e, issue)
    f.do(asm_void("wait1"))  # the scores (the older group); P V still running
    s = e.wg_fence(f"{e.name}_fence_s", issued["s"])
    if e.split_kv:  # tile j + 1's K is done with: the producer may refill it
        _arrive_empty(e, jn)
    pv, alphas = e.softmax_rows(_quads(s), jn, masked)
    f.do(asm_void("wait"))
    o = e.wg_fence(f"{e.name}_fence_o", issued["o"])
    _store_p(e, _pack_p(e, pv))
    _arrive_empty(e, j, "emptyv" if e.split_kv else "empty")  # tile j's K (scored a step
    # ago) and V are done with
    e.store_state("oacc", o)
    _rescale_if_needed(e, lab, o, alphas)


def _rescale_if_needed(e: AttnEmitter, lab: str, o: list[str], alphas: list[str]) -> None:
    """``O *= alpha`` only where a row's max moved (FA3/FA4): the factor is exactly 1 when
    ``m_new == m_old``, so skipping it changes no bit; the branch is taken per thread."""
    if e.p.lazy:  # warp-uniform, factors exactly 1 unless the max moved (attention_lean)
        rescale_if_moved(e, o, alphas)
        return
    f = e.f
    c0 = f.v(f"fcmp une float {alphas[0]}, 1.0")
    c1 = f.v(f"fcmp une float {alphas[1]}, 1.0")
    moved = f.v(f"or i1 {c0}, {c1}")
    f.do(f"br i1 {moved}, label %{lab}_rs, label %{lab}_rsc")
    f.label(f"{lab}_rs")
    e.store_state("oacc", e.rescale(o, alphas))
    f.do(f"br label %{lab}_rsc")
    f.label(f"{lab}_rsc")


def _loop(e: AttnEmitter, lab: str, start: str, pred: str, stop: str, ntot: str,
          masked: bool, nxt: str) -> str:  # fmt: skip
    """``for j in [start, stop)`` of :func:`_step`; returns the header's ``j`` (its value on
    exit)."""
    f = e.f
    j = f"%j_{lab}"
    f.label(lab)
    f.do(f"{j} = phi i32 [{start}, %{pred}], [%jn_{lab}, %{lab}_tail]")
    go = f.v(f"icmp slt i32 {j}, {stop}")
    f.do(f"br i1 {go}, label %{lab}_body, label %{nxt}")
    f.label(f"{lab}_body")
    _step(e, lab, j, ntot, masked)
    f.do(f"%jn_{lab} = add i32 {j}, 1")
    f.do(f"br label %{lab}_tail")
    f.label(f"{lab}_tail")
    f.do(f"br label %{lab}")
    return j


def overlap_main(e: AttnEmitter, ntot: str, nfull: str) -> None:
    """Everything between the prologue (Q and tile 0 landed, tile 0's "full" arrival made, the
    barriers set up) and the epilogue: see the module doc."""
    f, p = e.f, e.p
    if not p.ws:
        _prefetch(e, "ovp", "1", ntot)
    _wait_full(e, "0")
    kb0, _ = e.stage_bases("0")
    issued: dict[str, list[str]] = {}

    def issue0() -> None:
        issued["s"] = e.issue_scores(kb0, zero=True)

    _turn(e, issue0)
    f.do(asm_void("wait"))
    s = e.wg_fence(f"{e.name}_fence_s", issued["s"])
    if e.split_kv:
        _arrive_empty(e, "0")
    # tile 0 may need the mask (causal diagonal, short sequence): the masked copy, once
    pv, _ = e.softmax_rows(_quads(s), "0", True)  # O is zero: no rescale
    _store_p(e, _pack_p(e, pv))
    last = f.v(f"sub i32 {ntot}, 1")
    stop0 = f.v(f"sub i32 {nfull}, 1")  # steps scoring unmasked tiles: j + 1 < nfull
    f.do("br label %ovl0_pre")
    f.label("ovl0_pre")
    f.do("br label %ovl0")
    j0 = _loop(e, "ovl0", "0", "ovl0_pre", stop0, ntot, False, "ovl1")
    jl = _loop(e, "ovl1", j0, "ovl0", last, ntot, True, "ovl_done")
    f.label("ovl_done")
    # the last tile's P V (its V landed: waited for when its scores were issued)
    _, vb = e.stage_bases(jl)
    if e.split_kv:
        _wait_full(e, jl, "fullv")
    pa = _load_p(e)
    o = e.load_state("oacc", e.d // 8 * 4)

    def issue_last() -> None:
        issued["o"] = _issue_pv(e, vb, pa, o)

    _turn(e, issue_last)
    f.do(asm_void("wait"))
    o = e.wg_fence(f"{e.name}_fence_o", issued["o"])
    _arrive_empty(e, jl, "emptyv" if e.split_kv else "empty")
    e.store_state("oacc", o)
    if p.pingpong:  # warpgroup 1's last arrival on barrier 1 is matched
        e.wg_only(0, "pp_end", lambda: e.nb("sync", "1"))
