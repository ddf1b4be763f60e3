"""The steady state bound for ``kinac.compile``'s memo (issue 17 item 3; moved out of
:mod:`~kinac.rt.cuda.staging_hot` on 2026-12-02e, which had grown past the size guideline).

Why a bound call: ``kinac.compile``'s memo has already checked that a call's arrays are the very
objects of a recent call, unchanged in place, so a staged entry's call can skip the entry's
layers (``__call__``, ``_call``, ``hot_call``) and that identity check (2026-12-02c round 2).
Per turn it then repeats what the last call of that turn did, as :func:`steady_call
<kinac.rt.cuda.staging_hot.steady_call>` recorded it, while everything that call depended on still
holds: a numpy ``x`` copied into the turn's block (:func:`_turn_call`), or a caller's pinned
array (``pinned_empty``, ``pin_memory()``) read where it is with its DMA queued before any other
work of the call (:func:`~kinac.rt.cuda.staging_direct.direct_call`, 2026-12-02e). Anything
else is :func:`steady_call`, or the entry's own call.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from kinac.rt import hot
from kinac.rt.cuda import staging_direct
from kinac.rt.cuda.entry_hot import FREE_O, FREE_T, kept_lists
from kinac.rt.cuda.pinned import HANDED
from kinac.rt.cuda.staging import SLOTS
from kinac.rt.cuda.staging_hot import (
    Memo,
    finish_call,
    launch_compute,
    note_refused,
    queue_by_driver_calls,
    steady_call,
)
from kinac.rt.cuda.tensor import Tensor
from kinac.rt.hot import MISS

if TYPE_CHECKING:
    from kinac.rt.cuda.staging import HostStager

__all__ = ["bind"]


def bind(st: HostStager, entry: Any, arrays: tuple[Any, ...]) -> Callable[..., Any] | None:
    """A call of ``entry`` for ``kinac.compile``'s memo, which checks that its arrays are the
    very objects of this call, unchanged in place (:func:`~kinac.rt.cuda.entry_hot.bind_hot`'s
    contract): it skips the entry's layers (``__call__``, ``_call``, ``hot_call``) and the
    identity check, and keeps what the caller cannot see: the stager's memo still one of these
    device arrays, each still at its address (torch's ``x.data = y`` moves a tensor without
    counting a change), the entry's state, its context current, and the host arrays' form.
    Anything else is a plain call. None unless the stager's memo is of ``arrays``."""
    m0 = st.memo[0]
    if m0 is None or len(arrays) != m0.n or entry._ctx_get is None or entry.updates_inputs:
        return None  # (no cheap context check: every call would be a plain one anyway)
    devs = m0.get(arrays)
    if tuple(map(id, devs)) != m0.ids or (m0.dp is not None and tuple(map(m0.dp, devs)) != m0.dps):
        return None
    box, ids, hostpos = st.memo, m0.ids, tuple([i for i, _ in m0.host])
    get, ref, cur, mine = entry._ctx_get, entry._ctx_ref, entry._ctx_cur, entry._ctx_mine
    bound = [m0]
    # the common case, one numpy input and one output, per turn as the last call of that turn
    # ran it (:func:`steady_call` records it in ``turns``): see :func:`_turn_call`
    kept = kept_lists(entry)
    one = len(m0.host) == 1 and len(kept) == 1 and hot.LEAN
    turns: list[Any] = [None] * SLOTS if one else []
    # a caller's pinned array per turn as the last call of that turn read it (recorded by
    # steady_call, repeated by staging_direct.direct_call: its DMA queued first)
    direct: list[Any] = [None] * SLOTS if one else []
    kept0 = kept[0] if turns else []
    xi, p0 = m0.host[0]
    shape, dtype, nd = p0.shape, p0.dtype, m0.nd
    free_t, free_o, rc_of = FREE_T, FREE_O, sys.getrefcount  # read as entry_hot.take reads them

    forms0 = _forms(hostpos, arrays)

    def plain(arrays: tuple[Any, ...]) -> Any:
        """The entry's own call, or :data:`MISS` when a host array changed form since the bind
        (the caller, which does not read their state, binds the call again)."""
        if _forms(hostpos, arrays) != forms0:
            return MISS
        return entry(*arrays)

    def run(arrays: tuple[Any, ...]) -> Any:
        m = box[0]
        if entry._stager is not st:  # replaced (closed): the entry's own path
            return plain(arrays)
        if m is not bound[0]:
            if m is None or m.ids != ids or tuple([i for i, _ in m.host]) != hostpos:
                return plain(arrays)  # (the entry builds the memo again; the next is ours)
            bound[0] = m
            turns[:] = [None] * len(turns)  # (recorded for the memo before)
            direct[:] = [None] * len(direct)
        if (
            entry.use_graphs
            and not entry.volatile
            and not entry.status
            and not st._pending
            and not get(ref)
            and cur.value == mine
        ):
            x = arrays[xi]
            if (
                direct
                and st.early_dma
                and (dc := direct[st.turn]) is not None
                and staging_direct.reads(st, m, x, p0, dc[7])
            ):  # a caller's pinned array as this turn last read it: its DMA first
                out = staging_direct.direct_call(st, entry, m, dc, kept0, arrays, direct)
                if out is not None:  # (the device arrays' addresses checked after the DMA)
                    return out if out is not staging_direct.MOVED else plain(arrays)
            if m.dp is not None and tuple(map(m.dp, m.get(arrays))) != m.dps:
                return plain(arrays)  # a device array moved in place: the entry's path
            tc = turns[st.turn] if turns else None
            if (
                tc is not None
                and type(x) is nd
                and id(x) not in HANDED  # (not a caller's pinned array: DMA'd where it is)
                and x.shape == shape
                and (x.dtype is dtype or x.dtype == dtype)
                and m.plans[tc[0]] is tc[1]
                and tc[3].fast_launch is tc[4]
                and st.use_graphs
                and st.compute_wrapper
            ):
                for t in kept0:  # (entry_hot.take, inline)
                    if rc_of(t) == free_t and rc_of(t.owner) == free_o and t.__weakref__ is None:
                        if t.ptr == tc[2]:
                            return _turn_call(st, entry, m, tc, arrays, t)
                        break
                t = None  # type: ignore[assignment]  # (not held while steady_call takes it)
            out = steady_call(st, entry, m, arrays, turns, direct)
            if out is not None:
                return out
        return plain(arrays)

    def call(*arrays: Any) -> Any:
        return run(arrays)

    call.run = run  # type: ignore[attr-defined]  # (kinac.compile calls it with the tuple)
    if hot.LEAN:
        call.vouched = frozenset(hostpos)  # type: ignore[attr-defined]  # (kinac.rt.hot)
    return call


def _forms(pos: tuple[int, ...], arrays: tuple[Any, ...]) -> tuple[Any, ...] | None:
    """The type, shape and dtype of the arrays at ``pos`` (None where one has none)."""
    try:
        return tuple([(type(a), a.shape, a.dtype) for a in map(arrays.__getitem__, pos)])
    except (AttributeError, IndexError):
        return None


def _turn_call(
    st: HostStager, entry: Any, m: Memo, tc: tuple[Any, ...], arrays: tuple[Any, ...], out: Tensor
) -> Any:
    """:func:`steady_call`'s common case as the last call of this turn ran it (``tc``, recorded
    there: the plan, the output's address, the captured graph), its checks made by the bound
    call: the host's wait for the turn's last DMAs (none when its flag is set), the numpy input
    copied into the turn's pinned block, the copy graph and the compute wrapper launched."""
    j, _, _, _, fast, turn, fi, xi, copy, blk, cp, cw = tc
    if turn.copy_pending:
        if turn.flagged and st.flags[fi]:
            turn.copy_pending = turn.flagged = False
        else:
            st.begin_host(turn)
    copy(blk, arrays[xi])
    flagged = cp.flag
    if flagged:
        st.flags[fi] = 0
    rc = cp.launch(cp.exec, st.cs_arg)
    if rc:  # nothing queued: this call (and the next ones) by driver calls
        note_refused(st, "the copy graph", rc)
        queue_by_driver_calls(st, entry, m, arrays, j, turn, fast)
        return finish_call(st, entry, m, [out])
    turn.copy_pending, turn.flagged = True, flagged
    launch_compute(st, entry, m, turn, fast, cw, j)
    return out
