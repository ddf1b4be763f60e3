"""Allocator statistics in the shape of ``torch.cuda.memory_stats()``.

Keys are ``<stat>.all.<current|peak|allocated|freed>`` for the stats ``allocation`` (counts),
``allocated_bytes``, ``requested_bytes``, ``reserved_bytes``, ``segment`` (counts) and
``active_bytes``, plus ``inactive_split_bytes.all.current``, ``num_alloc_retries``,
``num_ooms``, ``largest_free_block_bytes`` and two percentages:

* ``fragmentation_pct``: external fragmentation of the cached free memory,
  ``100 * (1 - largest_free_block / free_bytes)`` (0 when nothing is free): how much of the
  memory the pool holds but does not use could *not* serve one request as large as all of it.
* ``overhead_pct``: ``100 * (reserved - allocated) / reserved``: the share of reserved memory
  not handed out.
"""

from __future__ import annotations

Stats = dict[str, float]


def stat(out: Stats, name: str, current: int, peak: int, allocated: int, freed: int) -> None:
    """Write the four keys of one torch-style statistic into ``out``."""
    out[f"{name}.all.current"] = current
    out[f"{name}.all.peak"] = peak
    out[f"{name}.all.allocated"] = allocated
    out[f"{name}.all.freed"] = freed


def percentages(out: Stats, reserved: int, allocated: int, largest_free: int) -> None:
    """Add ``fragmentation_pct``, ``overhead_pct`` and ``largest_free_block_bytes``."""
    free = reserved - allocated
    out["largest_free_block_bytes"] = largest_free
    out["inactive_split_bytes.all.current"] = free
    out["fragmentation_pct"] = 100.0 * (1.0 - largest_free / free) if free > 0 else 0.0
    out["overhead_pct"] = 100.0 * free / reserved if reserved > 0 else 0.0


class Tracker:
    """Exact counters for resources that hand out what they get from the driver."""

    __slots__ = (
        "sizes",
        "cur",
        "peak",
        "total",
        "n_peak",
        "n_total",
        "num_ooms",
    )

    def __init__(self) -> None:
        self.sizes: dict[int, int] = {}
        self.cur = 0
        self.peak = 0
        self.total = 0
        self.n_peak = 0
        self.n_total = 0
        self.num_ooms = 0

    def on_alloc(self, ptr: int, nbytes: int) -> None:
        """Record an allocation."""
        self.sizes[ptr] = nbytes
        self.cur += nbytes
        self.total += nbytes
        self.n_total += 1
        if self.cur > self.peak:
            self.peak = self.cur
        n = len(self.sizes)
        if n > self.n_peak:
            self.n_peak = n

    def on_free(self, ptr: int) -> int:
        """Record a free; return the size.  Unknown pointers raise ValueError."""
        try:
            nbytes = self.sizes.pop(ptr)
        except KeyError:
            raise ValueError(f"pointer 0x{ptr:x} was not allocated by this resource") from None
        self.cur -= nbytes
        return nbytes

    def stats(self) -> Stats:
        """torch-style statistics; reserved == allocated == requested (no caching)."""
        out: Stats = {}
        n = len(self.sizes)
        for name in ("allocated_bytes", "requested_bytes", "reserved_bytes", "active_bytes"):
            stat(out, name, self.cur, self.peak, self.total, self.total - self.cur)
        stat(out, "allocation", n, self.n_peak, self.n_total, self.n_total - n)
        stat(out, "segment", n, self.n_peak, self.n_total, self.n_total - n)
        percentages(out, self.cur, self.cur, 0)
        out["num_alloc_retries"] = 0
        out["num_ooms"] = self.num_ooms
        return out

    def reset_peak(self) -> None:
        """Peaks restart from the current values."""
        self.peak = self.cur
        self.n_peak = len(self.sizes)
