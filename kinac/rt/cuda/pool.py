"""A stream-aware caching pool: coalescing best fit over segments, dedicated large blocks.

Two tiers, as in PyTorch's caching allocator, with RMM's stream-ordered semantics:

* **Small** requests (rounded size below ``policy.large``) are cut out of segments obtained
  from the upstream resource.  Free blocks are kept per stream (the stream of ``deallocate``)
  in a list sorted by (size, address): ``allocate`` takes the smallest block that fits (best
  fit, lowest address on ties) and splits off the rest; ``deallocate`` merges the block with
  free neighbours of the same stream in the same segment (segments never merge, even when
  their addresses touch).  A new segment is ``factor`` x what the small tier reserves, clamped
  to [``min_segment``, ``max_segment``], at least the request, rounded to ``granularity``.
* **Large** requests get a segment of their own (rounded to ``granularity``), cached when
  freed and reused, unsplit, by a later large request at most 1/8 smaller.  On a miss the
  cache is trimmed first (``release_large_on_miss``): cached large segments go back upstream,
  largest first, until at most ``max(large_cache_min, large_cache_frac * reserved)`` bytes
  stay cached.  So the pool does not hoard one segment per size ever seen (reserved memory
  follows live memory closely), yet a few alternating large sizes stay cached.

Streams: a block freed on stream A may still be used by work queued on A, so later
allocations on A reuse it at once.  An allocation on B that finds nothing in B's lists but a
fit in A's makes B wait for A's queued work (``order(A, B)``: one event record and one stream
wait) and adopts A's free blocks.  Only then does the pool grow.

Out of memory (upstream failure or ``max_reserved``): the pool gives back all fully free
segments and retries once, then raises OutOfMemoryError with its statistics.

The hot path is a dict lookup, a ``bisect`` and a few integer updates: no driver call and no
object per block.  Not thread-safe: one pool per thread, or a lock around it.
"""

from __future__ import annotations

from bisect import bisect_left, insort
from collections.abc import Callable
from dataclasses import dataclass

from kinac.rt.cuda.errors import OutOfMemoryError
from kinac.rt.cuda.pool_stats import PoolStatsMixin
from kinac.rt.cuda.resources import MemoryResource

MiB = 1 << 20
Order = Callable[[int, int], None]
Bins = list[tuple[int, int]]


@dataclass(frozen=True)
class GrowthPolicy:
    """Segment sizes, the large-block threshold and the cap on reserved memory."""

    initial: int = 0
    min_segment: int = 32 * MiB
    max_segment: int = 256 * MiB
    factor: float = 0.125
    granularity: int = 2 * MiB
    large: int = 4 * MiB
    max_reserved: int | None = None
    release_large_on_miss: bool = True
    large_cache_min: int = 128 * MiB
    large_cache_frac: float = 0.03

    def round(self, n: int) -> int:
        """``n`` rounded up to the granularity."""
        g = self.granularity
        return -(-n // g) * g

    def segment_size(self, request: int, reserved: int) -> int:
        """Size of the next small-tier segment for a ``request``-byte block."""
        want = min(self.max_segment, max(self.min_segment, int(reserved * self.factor)))
        return self.round(max(request, want))


class PoolResource(PoolStatsMixin):
    """Stream-aware caching pool; see the module docstring."""

    def __init__(
        self,
        upstream: MemoryResource,
        policy: GrowthPolicy | None = None,
        *,
        alignment: int = 512,
        order: Order | None = None,
        name: str = "pool",
    ) -> None:
        if alignment & (alignment - 1):
            raise ValueError("alignment must be a power of two")
        self.upstream = upstream
        self.ordinal: int = getattr(upstream, "ordinal", 0)
        self.policy = pol = policy or GrowthPolicy()
        self.name = name
        self._align = alignment
        self._mask = alignment - 1
        self._large = max(pol.large, alignment)
        self._order = order
        self._used: dict[int, tuple[int, int]] = {}  # small ptr -> (block size, requested)
        self._fstart: dict[int, tuple[int, int]] = {}  # free ptr -> (size, stream)
        self._fend: dict[int, int] = {}  # free block end -> ptr
        self._bins: dict[int, Bins] = {}  # stream -> sorted (size, ptr)
        self._segs: dict[int, int] = {}  # small-tier segment base -> size
        self._lused: dict[int, tuple[int, int]] = {}  # large ptr -> (segment size, requested)
        self._lfree: dict[int, Bins] = {}  # stream -> sorted cached large (size, ptr)
        self._lsegs: dict[int, int] = {}  # large segment base -> size
        self._init_stats()
        if pol.initial:
            base, seg = self._upstream([pol.round(pol.initial)], pol.round(pol.initial), 0)
            self._add_segment(base, seg, 0)

    # ---- hot path -------------------------------------------------------------------------
    def allocate(self, nbytes: int, stream: int = 0) -> int:
        """A pointer to ``nbytes`` bytes (rounded up to the alignment) for use on ``stream``."""
        size = (nbytes + self._mask) & ~self._mask if nbytes > 0 else self._align
        if size >= self._large:
            return self._allocate_large(size, nbytes, stream)
        bins = self._bins.get(stream)
        if bins:
            i = bisect_left(bins, (size,))
            if i < len(bins):
                # inlined _take and _count_alloc (a call costs as much as the rest of this path)
                bsize, ptr = bins.pop(i)
                fs = self._fstart
                del fs[ptr]
                rem = bsize - size
                if rem >= self._align:
                    r = ptr + size
                    fs[r] = (rem, stream)
                    self._fend[ptr + bsize] = r
                    insort(bins, (rem, r))
                    bsize = size
                else:
                    del self._fend[ptr + bsize]
                self._used[ptr] = (bsize, nbytes)
                cur = self._cur = self._cur + bsize
                if cur > self._peak:
                    self._peak = cur
                self._total += bsize
                req = self._req_cur = self._req_cur + nbytes
                if req > self._req_peak:
                    self._req_peak = req
                self._req_total += nbytes
                self._n_total += 1
                return ptr
        return self._allocate_slow(size, nbytes, stream)

    def _take(self, ptr: int, bsize: int, size: int, nbytes: int, stream: int, bins: Bins) -> int:
        fs = self._fstart
        del fs[ptr]
        rem = bsize - size
        if rem >= self._align:
            r = ptr + size
            fs[r] = (rem, stream)
            self._fend[ptr + bsize] = r
            insort(bins, (rem, r))
            bsize = size
        else:
            del self._fend[ptr + bsize]
        self._used[ptr] = (bsize, nbytes)
        self._count_alloc(bsize, nbytes)
        return ptr

    def deallocate(self, ptr: int, nbytes: int = 0, stream: int = 0) -> None:
        """Return ``ptr``; work queued on ``stream`` before this call may still use it."""
        blk = self._used.pop(ptr, None)
        if blk is None:
            return self._deallocate_large(ptr, stream)
        n = len(self._used) + len(self._lused) + 1
        if n > self._n_peak:
            self._n_peak = n
        bsize, req = blk
        self._cur -= bsize
        self._req_cur -= req
        fs = self._fstart
        fe = self._fend
        segs = self._segs
        bins = self._bins.get(stream)
        if bins is None:
            bins = self._bins[stream] = []
        end = ptr + bsize
        nxt = fs.get(end)
        if nxt is not None and nxt[1] == stream and end not in segs:
            nsz = nxt[0]
            del fs[end]
            del bins[bisect_left(bins, (nsz, end))]
            end += nsz
            bsize += nsz
        p = fe.get(ptr)
        if p is not None and ptr not in segs:
            psz, pst = fs[p]
            if pst == stream:
                del fs[p]
                del fe[ptr]
                del bins[bisect_left(bins, (psz, p))]
                ptr = p
                bsize += psz
        fs[ptr] = (bsize, stream)
        fe[end] = ptr
        insort(bins, (bsize, ptr))
        return None

    # ---- small tier, slow paths -----------------------------------------------------------
    def _allocate_slow(self, size: int, nbytes: int, stream: int) -> int:
        best: tuple[tuple[int, int], int] | None = None
        for s, lst in self._bins.items():
            if s != stream and lst:
                i = bisect_left(lst, (size,))
                if i < len(lst) and (best is None or lst[i] < best[0]):
                    best = (lst[i], s)
        if best is not None:
            bins = self._adopt(best[1], stream)
        else:
            pol = self.policy
            want = pol.segment_size(size, sum(self._segs.values()))
            base, seg = self._upstream([want], pol.round(size), stream)
            bins = self._add_segment(base, seg, stream)
        bsize, ptr = bins.pop(bisect_left(bins, (size,)))
        return self._take(ptr, bsize, size, nbytes, stream, bins)

    def _add_segment(self, base: int, seg: int, stream: int) -> Bins:
        self._segs[base] = seg
        self._fstart[base] = (seg, stream)
        self._fend[base + seg] = base
        bins = self._bins.setdefault(stream, [])
        insort(bins, (seg, base))
        return bins

    def _adopt(self, src: int, dst: int) -> Bins:
        """Order ``dst`` after ``src``; move ``src``'s free blocks to ``dst``, coalescing."""
        if self._order is not None:
            self._order(src, dst)
        self.num_adoptions += 1
        fs = self._fstart
        fe = self._fend
        moved = self._bins.pop(src, [])
        bins = self._bins.setdefault(dst, [])
        for sz, p in moved:
            fs[p] = (sz, dst)
        bins += moved
        bins.sort()
        for p in sorted(p for _, p in moved):
            if p not in fs:
                continue  # already merged into a lower neighbour
            q = p
            while q not in self._segs:
                r = fe.get(q)
                if r is None or fs[r][1] != dst:
                    break
                q = r
            self._merge_forward(q, dst, bins)
        return bins

    def _merge_forward(self, q: int, stream: int, bins: Bins) -> None:
        """Merge the free block at ``q`` with the free blocks of ``stream`` that follow it."""
        fs = self._fstart
        fe = self._fend
        sz = total = fs[q][0]
        end = q + sz
        while end not in self._segs:
            nb = fs.get(end)
            if nb is None or nb[1] != stream:
                break
            del bins[bisect_left(bins, (nb[0], end))]
            del fs[end]
            del fe[end]
            total += nb[0]
            end += nb[0]
        if total != sz:
            del bins[bisect_left(bins, (sz, q))]
            insort(bins, (total, q))
            fs[q] = (total, stream)
            fe[end] = q

    # ---- large tier -----------------------------------------------------------------------
    def _allocate_large(self, size: int, nbytes: int, stream: int) -> int:
        size = self.policy.round(size)
        limit = size + (size >> 3)
        hit: tuple[tuple[int, int], int] | None = None
        for s, lst in self._lfree.items():
            i = bisect_left(lst, (size,))
            if i < len(lst) and lst[i][0] <= limit:
                if hit is None or s == stream or (hit[1] != stream and lst[i] < hit[0]):
                    hit = (lst[i], s)
        if hit is not None:
            (bsize, ptr), s = hit
            lst = self._lfree[s]
            del lst[bisect_left(lst, (bsize, ptr))]
            if s != stream and self._order is not None:
                self._order(s, stream)
        else:
            if self.policy.release_large_on_miss:
                self._trim_large_cache()
            ptr, bsize = self._upstream([size], size, stream)
            self._lsegs[ptr] = bsize
        self._lused[ptr] = (bsize, nbytes)
        self._count_alloc(bsize, nbytes)
        return ptr

    def _deallocate_large(self, ptr: int, stream: int) -> None:
        try:
            bsize, req = self._lused.pop(ptr)
        except KeyError:
            raise ValueError(f"pointer 0x{ptr:x} was not allocated by {self.name}") from None
        n = len(self._used) + len(self._lused) + 1
        if n > self._n_peak:
            self._n_peak = n
        self._cur -= bsize
        self._req_cur -= req
        insort(self._lfree.setdefault(stream, []), (bsize, ptr))

    def _trim_large_cache(self) -> None:
        """On a large-tier miss: give back cached large segments, largest first, until what
        stays cached is within ``max(large_cache_min, large_cache_frac * reserved)``."""
        pol = self.policy
        limit = max(pol.large_cache_min, int(pol.large_cache_frac * self._reserved))
        cached = sorted(
            ((sz, p, s) for s, lst in self._lfree.items() for sz, p in lst), reverse=True
        )
        total = sum(c[0] for c in cached)
        for sz, p, s in cached:
            if total <= limit:
                break
            lst = self._lfree[s]
            del lst[bisect_left(lst, (sz, p))]
            del self._lsegs[p]
            self._give_back(p, sz, s)
            total -= sz

    def _release_large(self) -> int:
        freed = 0
        for stream, lst in self._lfree.items():
            for size, ptr in lst:
                del self._lsegs[ptr]
                self._give_back(ptr, size, stream)
                freed += size
            lst.clear()
        return freed

    # ---- upstream -------------------------------------------------------------------------
    def _upstream(self, tries: list[int], exact: int, stream: int) -> tuple[int, int]:
        """(base, size) of a new upstream segment: ``tries`` in order, then ``exact`` after a
        release of everything cached; OutOfMemoryError if that fails too."""
        cause = ""
        if exact not in tries:
            tries = [*tries, exact]
        for attempt in range(2):
            for seg in tries:
                try:
                    return self._upstream_allocate(seg, stream), seg
                except MemoryError as e:
                    cause = str(e)
            if attempt == 0:
                self.num_alloc_retries += 1
                self.release()
                tries = [exact]
        self.num_ooms += 1
        raise OutOfMemoryError(exact, self.name, self.memory_stats(), cause)

    def _upstream_allocate(self, seg: int, stream: int) -> int:
        cap = self.policy.max_reserved
        if cap is not None and self._reserved + seg > cap:
            raise MemoryError(f"max_reserved {cap} bytes reached ({self._reserved} reserved)")
        base = self.upstream.allocate(seg, stream)
        self._reserved += seg
        self._res_total += seg
        self._seg_total += 1
        if self._reserved > self._res_peak:
            self._res_peak = self._reserved
        nseg = len(self._segs) + len(self._lsegs) + 1
        if nseg > self._seg_peak:
            self._seg_peak = nseg
        return base

    def _give_back(self, base: int, size: int, stream: int) -> None:
        self._reserved -= size
        self.upstream.deallocate(base, size, stream)

    def release(self) -> int:
        """Give every fully free segment back upstream (``empty_cache``); return bytes freed.

        The small tier's free lists of all streams are first merged into one (each stream
        ordered after the others), so blocks freed on different streams coalesce.
        """
        freed = self._release_large()
        streams = [s for s, lst in self._bins.items() if lst]
        for s in streams[1:]:
            self._adopt(s, streams[0])
        for base, seg in list(self._segs.items()):
            blk = self._fstart.get(base)
            if blk is None or blk[0] != seg:
                continue
            del self._fstart[base]
            del self._fend[base + seg]
            bins = self._bins[blk[1]]
            del bins[bisect_left(bins, (seg, base))]
            del self._segs[base]
            self._give_back(base, seg, blk[1])
            freed += seg
        return freed
