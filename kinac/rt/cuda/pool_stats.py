"""Statistics and self-checks of :class:`~kinac.rt.cuda.pool.PoolResource`.

Kept apart from the allocation paths so that ``pool.py`` reads as the algorithm.  The counters
are updated inline by the pool's hot path (attribute arithmetic is the cheapest bookkeeping
Python has) and through ``_count_alloc`` on its slow paths; this mixin turns them into
``torch.cuda.memory_stats``-shaped dictionaries and verifies the pool's invariants in tests.
"""

from __future__ import annotations

from bisect import bisect_left
from typing import Any

from kinac.rt.cuda.stats import Stats, percentages, stat


class PoolStatsMixin:
    """Counters, ``memory_stats()`` and ``check()`` for the pool."""

    _used: dict[int, tuple[int, int]]
    _lused: dict[int, tuple[int, int]]
    _fstart: dict[int, tuple[int, int]]
    _fend: dict[int, int]
    _bins: dict[int, list[tuple[int, int]]]
    _lfree: dict[int, list[tuple[int, int]]]
    _segs: dict[int, int]
    _lsegs: dict[int, int]

    def _init_stats(self) -> None:
        self._reserved = 0
        self._cur = self._peak = self._total = 0
        self._req_cur = self._req_peak = self._req_total = 0
        self._n_peak = self._n_total = 0
        self._res_peak = self._res_total = 0
        self._seg_peak = self._seg_total = 0
        self.num_alloc_retries = 0
        self.num_ooms = 0
        self.num_adoptions = 0

    def _count_alloc(self, bsize: int, nbytes: int) -> None:
        """Count one allocation: a ``bsize``-byte block for an ``nbytes``-byte request.

        Used by the pool's slow paths; ``PoolResource.allocate``'s hot path does the same
        inline (a method call costs as much as the rest of that path).
        """
        cur = self._cur = self._cur + bsize
        if cur > self._peak:
            self._peak = cur
        self._total += bsize
        req = self._req_cur = self._req_cur + nbytes
        if req > self._req_peak:
            self._req_peak = req
        self._req_total += nbytes
        self._n_total += 1

    def largest_free_block(self) -> int:
        """Size of the largest cached free block (any stream, either tier)."""
        small = max((lst[-1][0] for lst in self._bins.values() if lst), default=0)
        large = max((lst[-1][0] for lst in self._lfree.values() if lst), default=0)
        return max(small, large)

    def memory_stats(self) -> Stats:
        """torch.cuda.memory_stats-shaped statistics (see ``stats.py``).

        ``fragmentation_pct`` here is Johnstone and Wilson's measure at the peak:
        ``100 * (1 - peak requested bytes / peak reserved bytes)``, the memory the pool needed
        beyond what the program asked for at its high-water mark (since the last
        ``reset_peak_stats``).  ``external_fragmentation_pct`` is the current
        ``1 - largest free block / free bytes``.
        """
        out: Stats = {}
        n = len(self._used) + len(self._lused)
        cur, tot = self._cur, self._total
        stat(out, "allocation", n, max(self._n_peak, n), self._n_total, self._n_total - n)
        stat(out, "allocated_bytes", cur, self._peak, tot, tot - cur)
        stat(out, "active_bytes", cur, self._peak, tot, tot - cur)
        rc, rt = self._req_cur, self._req_total
        stat(out, "requested_bytes", rc, self._req_peak, rt, rt - rc)
        res, rtot = self._reserved, self._res_total
        stat(out, "reserved_bytes", res, self._res_peak, rtot, rtot - res)
        ns = len(self._segs) + len(self._lsegs)
        stat(out, "segment", ns, self._seg_peak, self._seg_total, self._seg_total - ns)
        percentages(out, res, cur, self.largest_free_block())
        out["external_fragmentation_pct"] = out["fragmentation_pct"]
        peak_res = self._res_peak
        out["fragmentation_pct"] = 100.0 * (1 - self._req_peak / peak_res) if peak_res else 0.0
        out["num_alloc_retries"] = self.num_alloc_retries
        out["num_ooms"] = self.num_ooms
        out["num_adoptions"] = self.num_adoptions
        out["free_blocks"] = len(self._fstart) + sum(len(v) for v in self._lfree.values())
        out["large_segment.all.current"] = len(self._lsegs)
        return out

    def reset_peak_stats(self) -> None:
        """Peaks restart from the current values."""
        self._peak = self._cur
        self._req_peak = self._req_cur
        self._n_peak = len(self._used) + len(self._lused)
        self._res_peak = self._reserved
        self._seg_peak = len(self._segs) + len(self._lsegs)

    def block_size(self, ptr: int) -> int:
        """The size of the block behind an allocated pointer (its rounded size)."""
        blk = self._used.get(ptr) or self._lused[ptr]
        return blk[0]

    def check(self) -> None:
        """Verify the bookkeeping (tiling, coalescing, indexes, counters); AssertionError if off."""
        seen_used = seen_free = 0
        for base, seg in self._segs.items():
            p, end, prev_free = base, base + seg, None
            while p < end:
                if p in self._used:
                    p += self._used[p][0]
                    seen_used += 1
                    prev_free = None
                    continue
                sz, st = self._fstart[p]  # KeyError: a hole in the segment
                assert self._fend[p + sz] == p, f"end index wrong for 0x{p:x}"
                assert prev_free != st, f"free neighbours not merged at 0x{p:x}"
                lst = self._bins[st]
                i = bisect_left(lst, (sz, p))
                assert i < len(lst) and lst[i] == (sz, p), f"0x{p:x} missing from its bin"
                p += sz
                seen_free += 1
                prev_free = st
            assert p == end, f"blocks overrun segment 0x{base:x}"
        assert seen_used == len(self._used), "allocated block outside every segment"
        assert seen_free == len(self._fstart) == len(self._fend), "free index size mismatch"
        assert seen_free == sum(len(v) for v in self._bins.values()), "bins size mismatch"
        for lst in [*self._bins.values(), *self._lfree.values()]:
            assert lst == sorted(lst), "a free list is out of order"
        cached = [p for lst in self._lfree.values() for _, p in lst]
        assert len(cached) == len(set(cached)), "a large segment is cached twice"
        assert set(cached).isdisjoint(self._lused), "a large segment is cached and in use"
        assert set(cached) | set(self._lused) == set(self._lsegs), "large segments lost"
        for lst in self._lfree.values():
            assert all(self._lsegs[p] == s for s, p in lst), "large cache size mismatch"
        used = sum(b for b, _ in self._used.values()) + sum(b for b, _ in self._lused.values())
        assert self._cur == used, "allocated bytes mismatch"
        req = sum(r for _, r in self._used.values()) + sum(r for _, r in self._lused.values())
        assert self._req_cur == req, "requested bytes mismatch"
        total = sum(self._segs.values()) + sum(self._lsegs.values())
        assert self._reserved == total, "reserved bytes mismatch"

    def snapshot(self) -> dict[str, Any]:
        """Segments and blocks, for debugging and tests (addresses as ints)."""
        return {
            "segments": sorted(self._segs.items()),
            "large_segments": sorted(self._lsegs.items()),
            "used": sorted((p, b) for p, (b, _) in {**self._used, **self._lused}.items()),
            "free": sorted((p, s, st) for p, (s, st) in self._fstart.items()),
        }
