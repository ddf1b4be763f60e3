"""One pinned block per host parameter in the steady state, rewritten chunk by chunk (issue 17).

Why: the H200 probe (``benches/runtime_overlap_probe.py``,
``docs/measurements/runtime_overlap_2026-12-02c.md``) found the host-input MLP loop at
x = 1 MiB host-bound, and its staging ``memcpy`` the reason: 51 us per call in the loop
against 33 us into one block, because the two turns' blocks (2 MiB) and ``x`` (1 MiB) do not
fit the core's 2 MiB L2, so each call's copy writes back the block of two calls ago and reads
``x`` from L3 (the no-GPU "alternating blocks" memcpy measured the same 51 us; with the
``memcpy`` skipped the loop ran at the device-input speed). Here the steady state stages each
host parameter (smaller than the copier's threshold; bigger ones keep the turns' blocks and
the threaded copier) through ONE pinned block, which stays in the cache.

The block may be rewritten only once the previous call's DMA has read it. The copy graph DMAs
it in up to :data:`CHUNKS` pieces in order, each followed by a flag (a 4-byte copy of a device
word holding 1 into pinned memory); the host clears the flags before each launch and rewrites
chunk ``c`` as soon as flag ``c`` is set, so it waits only for the first chunk's DMA, not for
the whole copy. A flag not set after :data:`SPIN_S` of spinning (the DMA waits for a compute
still running: the device is the limit then) is waited for on the *done* event of the turn that
last DMA'd the block (recorded after every flag's write, so all have landed).

The device slots, *copied*, *consumed* and the turn's own flag stay as in
:mod:`~kinac.rt.cuda.staging_graphs`: the ring changes only which pinned memory the DMA reads.
A caller's pinned array (``pinned_empty``, ``pin_memory()``) keeps its path (DMA'd in place).
``KINAC_STAGING_RING=0`` (or :attr:`HostStager.use_ring` false) keeps the turns' blocks.
"""

from __future__ import annotations

import ctypes
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from kinac.rt.cuda.pinned import PinnedBuffer, _handed, handed_out
from kinac.rt.cuda.staging import FLAG_STRIDE

if TYPE_CHECKING:
    from kinac.rt.cuda.staging import HostStager, Param

CHUNKS = 4  # DMA pieces (and flags) per parameter
CHUNK_MIN = 64 << 10  # bytes: smaller parameters are one piece
ALIGN = 4096  # chunk offsets are multiples of this
MAX_FLAGS = 64  # flag words of the ring's block (16 parameters of 4 chunks)
SPIN_S = 50e-6  # how long the host reads a flag before it waits on the driver


class Ring:
    """The stager's ring state: per parameter its block and chunks ``(offset, bytes, flag)``;
    the flags (pinned, host-read; 1 = the block's chunk is free); the turn whose copy graph
    last read the blocks (its *done* event is the fallback wait)."""

    __slots__ = ("blocks", "flags", "flag_ptr", "used", "last")

    def __init__(self, flags_block: PinnedBuffer) -> None:
        self.blocks: dict[int, tuple[PinnedBuffer, tuple[tuple[int, int, int], ...]]] = {}
        self.flag_ptr = flags_block.ptr
        self.flags = (ctypes.c_uint32 * MAX_FLAGS).from_address(flags_block.ptr)
        self.used = 0  # flag words handed to parameters
        self.last: Any = None  # a Turn


def chunks_of(nbytes: int, first_flag: int) -> tuple[tuple[int, int, int], ...]:
    """``(offset, bytes, flag)`` of each piece: up to :data:`CHUNKS` of at least
    :data:`CHUNK_MIN` bytes, at :data:`ALIGN`-aligned offsets."""
    k = max(1, min(CHUNKS, nbytes // CHUNK_MIN))
    step = -(-nbytes // k)
    step = -(-step // ALIGN) * ALIGN
    out: list[tuple[int, int, int]] = []
    lo = 0
    while lo < nbytes:
        n = min(step, nbytes - lo)
        out.append((lo, n, first_flag + len(out)))
        lo += n
    return tuple(out)


def _ring(st: HostStager) -> Ring | None:
    r = st._ring
    if r is None:
        import numpy as np

        blk = PinnedBuffer(st.pool, (MAX_FLAGS,), np.uint32)
        st._extra.append(blk)
        blk.array[...] = 1  # every chunk free
        r = st._ring = Ring(blk)
    return r


def param_block(st: HostStager, i: int, p: Param) -> tuple[PinnedBuffer, tuple] | None:
    """Parameter ``i``'s ring block and chunks (made at first use); None when the flags are
    used up (that plan keeps the turns' blocks)."""
    r = _ring(st)
    if r is None:
        return None
    hit = r.blocks.get(i)
    if hit is None:
        chunks = chunks_of(p.nbytes, r.used)
        if r.used + len(chunks) > MAX_FLAGS:
            return None
        import numpy as np

        blk = PinnedBuffer(st.pool, (max(p.nbytes, 1),), np.uint8)
        st._extra.append(blk)
        r.used += len(chunks)
        hit = r.blocks[i] = (blk, chunks)
    return hit


def build(api: Any, params: Sequence[tuple[int, int, tuple]], flag_ptr: int, turn_flag: int,
          one: int, events: Any) -> Any:  # fmt: skip
    """The ring copy graph of a turn: wait for *consumed*; per ``(device slot, block, chunks)``
    one memcpy node per chunk, chained in order, each followed by its flag's copy; *copied*
    after the last DMA; the turn's flag after every chunk flag, then *done*."""
    from kinac.rt.cuda.staging_graphs import Built, memcpy_params

    consumed, copied, done = events
    g = api.create()
    try:
        prev = api.wait(g, [], consumed)
        flags = []
        for dev, host, chunks in params:
            for lo, n, k in chunks:
                prev = api.memcpy(g, [prev], memcpy_params(dev + lo, False, host + lo, True, n))
                flags.append(api.memcpy(g, [prev], memcpy_params(flag_ptr + 4 * k, True, one,
                                                                 False, 4)))  # fmt: skip
        api.record(g, [prev], copied)
        f = api.memcpy(g, flags, memcpy_params(turn_flag, True, one, False, 4))
        api.record(g, [f], done)
        return Built(api.launch, api.instantiate(g), g)
    except BaseException:
        api.destroy(g, None)
        raise


def plan(st: HostStager, host: tuple[tuple[int, Param], ...], j: int) -> Any:
    """``(copy graph, fills)`` of turn ``j`` through the ring, or None (the turns' blocks):
    the ring is off, a parameter is at least the copier's threshold (its threaded copy into
    the turn's block is faster), the flags are used up, or the graph could not be built. Each
    fill is ``(position, param, block address, chunks, block's bytes as a numpy array)``."""
    from kinac.rt.cuda import staging_graphs

    if not st.use_ring or any(p.nbytes >= st.copier.min_bytes or not p.nbytes for _, p in host):
        return None
    fills = []
    for i, p in host:
        hit = param_block(st, i, p)
        if hit is None:
            return None
        fills.append((i, p, hit[0].ptr, hit[1], hit[0].array))
    key = (j, tuple([i for i, _ in host]))
    cp = st._ring_built.get(key, False)
    if cp is False:
        t, r = st.turns[j], st._ring
        params = [(p.dev[j], ptr, chunks) for _, p, ptr, chunks, _ in fills]
        flag = st._flag_ptr + 4 * j * FLAG_STRIDE
        events = (t.consumed.handle, t.copied.handle, t.done.handle)
        cp = staging_graphs._built(
            st, lambda: build(st.graphs, params, r.flag_ptr, flag, st._one, events)
        )
        st._ring_built[key] = cp
    return None if cp is None else (cp, tuple(fills))


def _wait(st: HostStager, k: int) -> bool:
    """Flag ``k`` is not set: read it for up to :data:`SPIN_S`, then wait on the *done* event of
    the turn that last DMA'd the blocks. True when that wait happened (every flag has landed:
    no further reads needed this call)."""
    r = st._ring
    flags, end, now = r.flags, time.perf_counter() + SPIN_S, time.perf_counter
    while not flags[k]:
        if now() > end:
            t = r.last
            if t is not None:
                rc = st.calls.sync(t.done_arg)
                if rc:
                    from kinac.rt.cuda import driver

                    driver.fail("cuEventSynchronize", rc)
            return True
    return False


def fill(st: HostStager, fills: tuple[Any, ...], arrays: tuple[Any, ...], nd: Any) -> bool:
    """Copy each host argument into its ring block, chunk by chunk as the last DMA frees it.
    False (nothing copied) when a caller's pinned array is among them (its own path)."""
    least = st.direct_min
    srcs = []
    for i, p, _, _, _ in fills:
        a = arrays[i]
        if type(a) is nd:
            if _handed and p.nbytes >= least and handed_out(a)[0]:
                return False
            srcs.append(a.ctypes.data if a.flags.c_contiguous else None)
        else:  # a contiguous CPU torch tensor (the caller checked)
            if p.nbytes >= least and a.is_pinned():
                return False
            srcs.append(a.data_ptr())
    flags, copy = st._ring.flags, st.chunk_copy
    done = False
    for (i, p, ptr, chunks, arr), src in zip(fills, srcs, strict=True):
        if src is None:  # strided: every chunk free first, then one numpy copy
            for _, _, k in chunks:
                if not done and not flags[k]:
                    done = _wait(st, k)
            import numpy as np

            np.copyto(arr.view(p.dtype).reshape(p.shape), arrays[i])
            continue
        for lo, n, k in chunks:
            if not done and not flags[k]:
                done = _wait(st, k)
            copy(ptr + lo, src + lo, n)
    return True


def clear(st: HostStager, fills: tuple[Any, ...], value: int) -> None:
    """Set the flags of ``fills``' chunks (0 before the ring's copy graph is launched; 1 again
    when the launch was refused: nothing will read the blocks)."""
    flags = st._ring.flags
    for _, _, _, chunks, _ in fills:
        for _, _, k in chunks:
            flags[k] = value
