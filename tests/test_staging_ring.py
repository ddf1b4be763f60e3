"""The steady state's one pinned block per parameter, rewritten chunk by chunk (staging_ring).

Without a GPU: the fake driver and fake graph builder of ``tests/test_staging_hot.py`` (a
launch runs the graph's nodes in order over the fake's log). Checked: a hot call stages ``x``
through ONE block (the same address every call) in chunks, each chunk rewritten only after the
flag its previous DMA set was read as set (or after a host wait on *done*); each call computes
on its own data, bit for bit; a flag that never lands makes the host wait on the driver, not
spin forever; a caller's pinned array keeps its in-place DMA; a refused launch leaves the
block free; ``use_ring = False`` keeps the turns' blocks.
"""

from __future__ import annotations

import ctypes
from typing import Any

import numpy as np
import pytest
import test_staging_hot as hot
from test_pinned import FakeDriver
from test_staging_hot import LoggedFlags, _graphed, check_reuse_order, view

from kinac.rt.cuda import pinned, staging_ring

fake, entry, copies_logged = hot.fake, hot.entry, hot.copies_logged  # (the fixtures)

WV = np.arange(1, 5, dtype=np.float32)
X = (3, 4)


@pytest.fixture
def small_chunks(monkeypatch: pytest.MonkeyPatch) -> None:
    """``x`` (48 bytes) in three chunks of 16 bytes."""
    monkeypatch.setattr(staging_ring, "CHUNK_MIN", 16)
    monkeypatch.setattr(staging_ring, "ALIGN", 16)


def _ringed(e: Any, fake: FakeDriver, set_flags: bool = True) -> Any:
    """The entry's stager on the graph path with the ring on (the test copier's threshold
    raised so ``x`` is below it), its chunk copies and ring flag reads logged."""
    st, g = _graphed(e, fake, set_flags)
    st.copier.min_bytes = 1 << 20
    st.use_ring = True

    def chunk_copy(dst: int, src: int, n: int) -> None:
        fake.log.append(("fill", dst))
        ctypes.memmove(dst, src, n)

    st.chunk_copy = chunk_copy
    return st, g


def _log_ring_flags(st: Any, log: list[Any]) -> None:
    if not isinstance(st._ring.flags, LoggedFlags):
        st._ring.flags = LoggedFlags(st._ring.flags, log)


def check_chunk_order(log: list[Any], flag_of: dict[int, int]) -> None:
    """Each ring chunk (address -> its flag's address) is rewritten only after its flag was read
    as set following the flag's write after the chunk's last DMA, or after a host wait on an
    event recorded after that DMA."""
    last_dma: dict[int, int] = {}
    recorded: dict[int, int] = {}
    for k, ev in enumerate(log):
        if ev[0] == "record":
            recorded[ev[1]] = k
        elif ev[0] == "copy" and ev[3] in flag_of:
            last_dma[ev[3]] = k
        elif ev[0] == "fill" and ev[1] in last_dma:
            d, f = last_dma[ev[1]], flag_of[ev[1]]
            since = log[d:k]
            set_at = [d + m for m, e in enumerate(since) if e[0] == "flag-set" and e[1] == f]
            read = any(e[0] == "flag-read" and e[1] == f and e[2] for e in log[min(set_at):k]) if set_at else False  # fmt: skip
            waited = any(e[0] == "host-wait" and recorded.get(e[1], -1) > d for e in since)
            assert read or waited, f"chunk {ev[1]:#x} rewritten at {k} before its DMA was seen done"


def test_hot_calls_stage_through_one_block_in_chunks(
    entry: Any, fake: FakeDriver, copies_logged: None, small_chunks: None
) -> None:
    e, w, _ = entry
    rng = np.random.default_rng(3)
    e(rng.standard_normal(X).astype(np.float32), w)
    st, _ = _ringed(e, fake)
    x = np.empty(X, np.float32)
    srcs: set[int] = set()
    for k in range(8):
        x[...] = rng.standard_normal(X)  # rewritten in place after each call returned
        if st._ring is not None:
            _log_ring_flags(st, fake.log)
        if k == 4:
            fake.log.clear()
        start = len(fake.log)
        y = e(x, w)
        np.testing.assert_array_equal(view(y.ptr, X), x * WV, err_msg=f"call {k}")
        del y
        if k >= 1:  # (call 0 is turn 1's first: the general path captures its graph)
            srcs |= {ev[3] for ev in fake.log[start:] if ev[0] == "copy"}
    blk, chunks = st._ring.blocks[0]
    assert [c[:2] for c in chunks] == [(0, 16), (16, 16), (32, 16)]
    assert srcs == {blk.ptr, blk.ptr + 16, blk.ptr + 32}  # one block, every call
    assert st.graph_calls == 7 and st.hot_calls == 7
    flag_of = {blk.ptr + lo: st._ring.flag_ptr + 4 * f for lo, _, f in chunks}
    check_chunk_order(fake.log, flag_of)
    check_reuse_order(fake.log, st.copy_stream.handle)  # the device slots as before
    # one call: each chunk's flag read, then its copy; the ring's copy graph (a DMA and a flag
    # per chunk, copied, the turn's flag, done); the compute wrapper
    fake.log.clear()
    e(x, w)
    kinds = [ev[0] for ev in fake.log]
    assert kinds == ["flag-read", "flag-read", "fill"] * 1 + ["flag-read", "fill"] * 2 + [
        "graph", "wait", "copy", "flag-set", "copy", "flag-set", "copy", "flag-set", "record",
        "flag-set", "record", "graph", "wait", "compute", "record"]  # fmt: skip
    assert not any(ev[0] in ("host-wait", "sync") for ev in fake.log)


def test_a_flag_that_does_not_land_is_waited_for_on_done(
    entry: Any, fake: FakeDriver, copies_logged: None, small_chunks: None
) -> None:
    e, w, _ = entry
    e(np.ones(X, np.float32), w)
    st, _ = _ringed(e, fake, set_flags=False)
    for k in range(5):
        x = np.full(X, k, np.float32)
        fake.log.clear()
        j = st.turn
        y = e(x, w)
        np.testing.assert_array_equal(view(y.ptr, X), x * WV, err_msg=f"call {k}")
        del y
        if k >= 2:  # the block's last DMA set no flag: a host wait on its turn's done
            done = st.turns[(j - 1) % st.slots].done.handle
            waits = [ev[1] for ev in fake.log if ev[0] == "host-wait"]
            assert done in waits, (k, fake.log)
            assert [ev[0] for ev in fake.log].index("host-wait") < [ev[0] for ev in fake.log].index("fill")  # fmt: skip
    assert st.graph_calls == 4  # (call 0: the general path captures turn 1's graph)


def test_a_pinned_array_keeps_its_path_and_the_ring_stays_right(
    entry: Any, fake: FakeDriver, copies_logged: None, small_chunks: None
) -> None:
    e, w, _ = entry
    e(np.ones(X, np.float32), w)
    st, _ = _ringed(e, fake)
    for _ in range(2):  # (turn 1's first call: the general path captures its graph)
        e(np.ones(X, np.float32), w)
    buf = pinned.pinned_empty(X, "float32")
    for k in range(6):
        pinned_call = k in (2, 3)
        if pinned_call:
            buf[...] = k
        x = buf if pinned_call else np.full(X, 10 + k, np.float32)
        fake.log.clear()
        y = e(x, w)
        np.testing.assert_array_equal(view(y.ptr, X), np.asarray(x) * WV, err_msg=f"call {k}")
        del y
        copies = [ev[3] for ev in fake.log if ev[0] == "copy"]
        if pinned_call:  # DMA'd in place, the call waits for it; no staging copy
            assert copies == [buf.ctypes.data] and not any(ev[0] == "fill" for ev in fake.log)
            assert fake.log[-1][0] == "host-wait"
        else:
            assert copies == [st._ring.blocks[0][0].ptr + lo for lo in (0, 16, 32)]
    assert st.direct == 2 and st.graph_calls == 7


def test_a_refused_ring_launch_leaves_the_block_free(
    entry: Any, fake: FakeDriver, copies_logged: None
) -> None:
    e, w, _ = entry
    e(np.ones(X, np.float32), w)
    st, _ = _ringed(e, fake)
    for k in range(4):  # both turns' graphs captured, both ring graphs built
        e(np.full(X, k, np.float32), w)
    assert len(st._ring_built) == 2
    for b in st._ring_built.values():
        b.launch = lambda ex, s: 999
    with pytest.warns(UserWarning, match="the copy graph"):
        y = e(np.full(X, 3, np.float32), w)
    np.testing.assert_array_equal(view(y.ptr, X), np.full(X, 3, np.float32) * WV)
    flags = st._ring.flags
    assert all(flags[f] for _, _, f in st._ring.blocks[0][1])  # nothing will read the block
    assert not st.use_graphs


def test_use_ring_false_keeps_the_turns_blocks(
    entry: Any, fake: FakeDriver, copies_logged: None
) -> None:
    e, w, _ = entry
    e(np.ones(X, np.float32), w)
    st, _ = _ringed(e, fake)
    st.use_ring = False
    for k in range(4):
        x = np.full(X, k, np.float32)
        np.testing.assert_array_equal(view(e(x, w).ptr, X), x * WV)
    assert st._ring is None
    assert {ev[3] for ev in fake.log if ev[0] == "copy"} >= {st.params[0].host[0].ptr, st.params[0].host[1].ptr}  # fmt: skip


def test_chunks_cover_the_block_in_aligned_pieces() -> None:
    for n in (1, 4095, 1 << 16, 200_000, 1 << 20, 3 * (1 << 20) + 7):
        ch = staging_ring.chunks_of(n, 5)
        assert sum(c[1] for c in ch) == n and ch[0][0] == 0
        assert all(a[0] + a[1] == b[0] for a, b in zip(ch, ch[1:], strict=False))
        assert all(c[0] % staging_ring.ALIGN == 0 for c in ch) and len(ch) <= staging_ring.CHUNKS
        assert [c[2] for c in ch] == list(range(5, 5 + len(ch)))
