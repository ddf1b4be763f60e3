"""CPU tests of the pool's bookkeeping over a simulated address space (no GPU needed)."""

from __future__ import annotations

import io
import json
import random

import pytest

from kinac.rt.cuda import soak
from kinac.rt.cuda.errors import OutOfMemoryError
from kinac.rt.cuda.pool import GrowthPolicy, PoolResource
from kinac.rt.cuda.resources import LoggingResource, MemoryResource, VirtualResource

KiB = 1 << 10
MiB = 1 << 20
SEG = 32 * MiB
FIXED = GrowthPolicy(min_segment=SEG, max_segment=SEG, factor=0.0)


def make(
    policy: GrowthPolicy = FIXED, **kw: object
) -> tuple[PoolResource, VirtualResource, list[tuple[int, int]]]:
    up = VirtualResource(**kw)  # type: ignore[arg-type]
    orders: list[tuple[int, int]] = []
    pool = PoolResource(up, policy, order=lambda a, b: orders.append((a, b)))
    return pool, up, orders


def test_protocol() -> None:
    pool, up, _ = make()
    assert isinstance(pool, MemoryResource)
    assert isinstance(up, MemoryResource)


def test_alignment_and_first_segment() -> None:
    pool, up, _ = make()
    a = pool.allocate(1)
    b = pool.allocate(513)
    assert a == up.calls[0][1]  # first block at the segment base
    assert b == a + 512
    assert pool.block_size(b) == 1024
    assert [c[0] for c in up.calls] == ["allocate"]
    assert up.calls[0][2] == SEG
    pool.check()


def test_best_fit_prefers_smallest_then_lowest_address() -> None:
    pool, _, _ = make()
    ptrs = [pool.allocate(n) for n in (4096, 512, 8192, 512, 4096, 512, 4096, 512)]
    # free blocks of 4096, 8192, 4096 (each isolated by live 512-byte blocks)
    for i in (0, 2, 4):
        pool.deallocate(ptrs[i])
    pool.check()
    assert pool.allocate(3000) == ptrs[0]  # 4096 fits best; lowest address among the two
    assert pool.allocate(4096) == ptrs[4]
    assert pool.allocate(5000) == ptrs[2]  # only the 8192 block fits
    pool.check()


def test_split_and_coalesce_all_directions() -> None:
    pool, _, _ = make()
    a, b, c = (pool.allocate(KiB) for _ in range(3))
    base = a
    pool.deallocate(b)  # middle: no merge (neighbours live)
    assert pool.memory_stats()["free_blocks"] == 2  # b, and the segment tail
    pool.deallocate(a)  # merges forward with b
    pool.check()
    pool.deallocate(c)  # merges backward with a+b and forward with the tail
    pool.check()
    snap = pool.snapshot()
    assert snap["free"] == [(base, SEG, 0)]
    assert pool.largest_free_block() == SEG


def test_segments_never_merge_even_when_adjacent() -> None:
    pol = GrowthPolicy(min_segment=2 * MiB, max_segment=2 * MiB, factor=0.0, large=64 * MiB)
    pool, up, _ = make(pol, gap=0, align=2 * MiB)
    x = pool.allocate(2 * MiB - 512)
    y = pool.allocate(2 * MiB - 512)
    assert y == x + 2 * MiB  # the second segment starts where the first ends
    pool.deallocate(x)
    pool.deallocate(y)
    pool.check()
    # each segment coalesced to one free block; the two never merge
    assert pool.snapshot()["free"] == [(x, 2 * MiB, 0), (y, 2 * MiB, 0)]
    assert pool.release() == 4 * MiB
    assert pool.memory_stats()["reserved_bytes.all.current"] == 0
    assert up.memory_stats()["allocated_bytes.all.current"] == 0


def test_statistics_exact() -> None:
    pool, _, _ = make()
    a = pool.allocate(1000)  # block 1024
    b = pool.allocate(5000)  # block 5120
    pool.deallocate(a)
    c = pool.allocate(100)  # block 512, reuses a's place
    s = pool.memory_stats()
    assert s["allocation.all.current"] == 2
    assert s["allocation.all.peak"] == 2
    assert s["allocation.all.allocated"] == 3
    assert s["allocation.all.freed"] == 1
    assert s["allocated_bytes.all.current"] == 5120 + 512
    assert s["allocated_bytes.all.peak"] == 1024 + 5120
    assert s["allocated_bytes.all.allocated"] == 1024 + 5120 + 512
    assert s["allocated_bytes.all.freed"] == 1024
    assert s["requested_bytes.all.current"] == 5100
    assert s["requested_bytes.all.peak"] == 6000
    assert s["requested_bytes.all.allocated"] == 6100
    assert s["requested_bytes.all.freed"] == 1000
    assert s["reserved_bytes.all.current"] == SEG
    assert s["reserved_bytes.all.peak"] == SEG
    assert s["segment.all.current"] == 1
    assert s["inactive_split_bytes.all.current"] == SEG - 5632
    assert s["largest_free_block_bytes"] == SEG - 1024 - 5120
    assert s["fragmentation_pct"] == pytest.approx(100 * (1 - 6000 / SEG))
    assert s["overhead_pct"] == pytest.approx(100 * (SEG - 5632) / SEG)
    pool.deallocate(b)
    pool.deallocate(c)
    pool.reset_peak_stats()
    s = pool.memory_stats()
    assert s["allocated_bytes.all.peak"] == 0
    assert s["allocation.all.peak"] == 0
    assert s["allocated_bytes.all.freed"] == s["allocated_bytes.all.allocated"]


def test_growth_policy_sizes() -> None:
    pol = GrowthPolicy(min_segment=32 * MiB, max_segment=256 * MiB, factor=0.5)
    assert pol.segment_size(KiB, 0) == 32 * MiB
    assert pol.segment_size(KiB, 128 * MiB) == 64 * MiB
    assert pol.segment_size(KiB, 4096 * MiB) == 256 * MiB
    assert pol.segment_size(300 * MiB + 1, 0) == 302 * MiB
    pool, up, _ = make(
        GrowthPolicy(min_segment=4 * MiB, max_segment=64 * MiB, factor=1.0, large=64 * MiB)
    )
    sizes = []
    for n in (4, 4, 8, 16):
        pool.allocate(n * MiB)  # each fills a new segment exactly
        sizes.append(up.calls[-1][2])
    assert sizes == [4 * MiB, 4 * MiB, 8 * MiB, 16 * MiB]  # geometric: factor x reserved


def test_initial_segment() -> None:
    pool, up, _ = make(GrowthPolicy(initial=100 * MiB))
    assert pool.memory_stats()["reserved_bytes.all.current"] == 100 * MiB
    pool.allocate(MiB)
    assert len(up.calls) == 1


def test_large_blocks_dedicated_cached_and_released_on_miss() -> None:
    pool, up, _ = make(GrowthPolicy(large_cache_min=0, large_cache_frac=0.0))
    a = pool.allocate(10 * MiB)
    assert pool.block_size(a) == 10 * MiB
    pool.deallocate(a)
    b = pool.allocate(9 * MiB + 1)  # rounds to 10 MiB: reuses the cached segment
    assert b == a
    pool.deallocate(b)
    n_up = len(up.calls)
    c = pool.allocate(20 * MiB)  # miss: the cached 10 MiB segment is given back first
    assert up.calls[n_up][0] == "deallocate" and up.calls[n_up][1] == a
    assert pool.memory_stats()["reserved_bytes.all.current"] == 20 * MiB
    pool.deallocate(c)
    d = pool.allocate(18 * MiB)  # 18 MiB <= 20 MiB <= 18 MiB * 9/8: reuse
    assert d == c
    pool.check()


def test_large_cache_keeps_alternating_sizes_within_its_limit() -> None:
    pool, up, _ = make(GrowthPolicy(large_cache_min=40 * MiB, large_cache_frac=0.0))
    for _ in range(5):  # two alternating sizes: both stay cached, no upstream traffic
        for n in (10 * MiB, 20 * MiB):
            pool.deallocate(pool.allocate(n))
    assert [c[2] for c in up.calls] == [10 * MiB, 20 * MiB]
    pool.deallocate(pool.allocate(30 * MiB))  # a miss with 30 MiB cached: no trim needed
    pool.deallocate(pool.allocate(50 * MiB))  # a miss with 60 MiB cached: trim to <= 40 MiB
    ops = [(c[0], c[2] // MiB) for c in up.calls[2:]]
    assert ops == [("allocate", 30), ("deallocate", 30), ("allocate", 50)]  # largest first
    assert pool.memory_stats()["reserved_bytes.all.current"] == 80 * MiB
    pool.check()


def test_max_reserved_oom_releases_and_retries_once() -> None:
    pol = GrowthPolicy(min_segment=SEG, max_segment=SEG, factor=0.0, max_reserved=41 * MiB)
    pool, _, _ = make(pol)
    big = pool.allocate(40 * MiB)  # large tier
    pool.deallocate(big)  # cached, 40 MiB reserved
    # small: a 32 MiB segment, then a 2 MiB one, are over the cap -> release, retry 2 MiB
    x = pool.allocate(KiB)
    s = pool.memory_stats()
    assert s["num_alloc_retries"] == 1
    assert s["reserved_bytes.all.current"] == 2 * MiB
    with pytest.raises(OutOfMemoryError) as ei:
        pool.allocate(60 * MiB)
    e = ei.value
    assert isinstance(e, MemoryError)
    assert e.stats["num_ooms"] == 1 and e.stats["num_alloc_retries"] == 2
    msg = str(e)
    assert (
        "62914560 bytes" in msg and "reserved_bytes.all.current=" in msg and "max_reserved" in msg
    )
    pool.deallocate(x)
    pool.check()


def test_upstream_oom_is_retried_after_release() -> None:
    pool, up, _ = make(capacity=48 * MiB)
    a = pool.allocate(KiB)
    pool.deallocate(a)  # one 32 MiB segment cached, fully free
    b = pool.allocate(40 * MiB)  # upstream has 16 MiB left: release the segment, retry
    assert pool.memory_stats()["num_alloc_retries"] == 1
    assert up.memory_stats()["allocated_bytes.all.current"] == 40 * MiB
    pool.deallocate(b)


def test_streams_reuse_order_and_adoption() -> None:
    pool, _, orders = make()
    a = pool.allocate(KiB, stream=1)
    b = pool.allocate(KiB, stream=1)
    pool.deallocate(a, stream=1)
    assert pool.allocate(KiB, stream=1) == a  # same stream: immediate reuse, no ordering
    assert orders == []
    pool.deallocate(a, stream=1)
    pool.deallocate(b, stream=1)
    c = pool.allocate(KiB, stream=2)  # stream 2 has nothing: adopts stream 1's blocks
    assert orders == [(1, 2)]
    assert c == a
    pool.check()
    assert pool.memory_stats()["num_adoptions"] == 1
    pool.deallocate(c, stream=2)
    pool.check()
    assert pool.snapshot()["free"] == [(a, SEG, 2)]  # fully coalesced on stream 2


def test_cross_stream_neighbours_merge_on_release() -> None:
    pool, up, orders = make()
    a = pool.allocate(KiB, stream=1)
    b = pool.allocate(KiB, stream=1)
    pool.deallocate(a, stream=1)
    pool.deallocate(b, stream=2)  # freed on another stream: not merged with a or the tail
    pool.check()
    assert [st for _, _, st in pool.snapshot()["free"]] == [1, 2, 1]
    assert pool.release() == SEG  # streams merged (ordered), whole segment returned
    assert orders and up.memory_stats()["allocated_bytes.all.current"] == 0


def test_invalid_free() -> None:
    pool, _, _ = make()
    a = pool.allocate(KiB)
    pool.deallocate(a)
    with pytest.raises(ValueError, match="not allocated"):
        pool.deallocate(a)
    with pytest.raises(ValueError, match="not allocated"):
        pool.deallocate(12345)


def test_random_interleaved_two_streams_invariants() -> None:
    pool, up, _ = make(GrowthPolicy())
    rng = random.Random(7)
    live: list[tuple[int, int, int]] = []
    for i in range(20_000):
        if live and (rng.random() < 0.5 or len(live) > 300):
            j = rng.randrange(len(live))
            p, n, s = live.pop(j)
            pool.deallocate(p, n, rng.choice((s, 1, 2)))
        else:
            n = soak.mixed_size(rng)
            s = rng.choice((1, 2))
            live.append((pool.allocate(n, s), n, s))
        if i % 2000 == 0:
            pool.check()
            spans = sorted((p, pool.block_size(p)) for p, _, _ in live)
            assert all(p + sz <= q for (p, sz), (q, _) in zip(spans, spans[1:], strict=False))
    for p, n, s in live:
        pool.deallocate(p, n, s)
    pool.check()
    pool.release()
    assert pool.memory_stats()["reserved_bytes.all.current"] == 0
    assert up.memory_stats()["allocated_bytes.all.current"] == 0


def test_soak_small_cpu() -> None:
    pool, up, _ = make(GrowthPolicy())
    ops = soak.generate(200_000, seed=3)
    r = soak.run(pool, ops, every=50_000, checkpoint=lambda live: pool.check())
    s = r.stats_at_end_of_ops
    assert r.checkpoints == 4
    assert r.allocated_after_free == 0
    assert r.reserved_after_release == r.reserved_baseline == 0
    assert up.memory_stats()["allocated_bytes.all.current"] == 0
    assert s["fragmentation_pct"] < 15.0, s


def test_logging_resource_writes_jsonl() -> None:
    pool, _, _ = make()
    buf = io.StringIO()
    log = LoggingResource(pool, buf)
    a = log.allocate(100, 3)
    log.deallocate(a, 100, 3)
    with pytest.raises(OutOfMemoryError):
        LoggingResource(PoolResource(VirtualResource(capacity=MiB)), buf).allocate(8 * MiB)
    lines = [json.loads(x) for x in buf.getvalue().splitlines()]
    assert [x["op"] for x in lines] == ["allocate", "deallocate", "allocate"]
    assert lines[0]["ptr"] == a and lines[0]["nbytes"] == 100 and lines[0]["stream"] == 3
    assert "error" in lines[2] and "out of device memory" in lines[2]["error"]
    assert log.memory_stats() == pool.memory_stats()
