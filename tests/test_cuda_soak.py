"""Soak test: a million allocate/free operations of mixed sizes through the pool on the GPU.

Checks: no leak (reserved memory back to its baseline, nothing left upstream), fragmentation
under 15% (Johnstone-Wilson: peak requested vs peak reserved), the pool's invariants and the
contents of a sample of live blocks at every checkpoint.  Prints a one-line summary.
"""

from __future__ import annotations

import json
import os
import random

import pytest

from kinac.rt import cuda
from kinac.rt.cuda import soak
from kinac.rt.cuda.testing import TestKernels, verify_blocks

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not cuda.available(), reason=f"no CUDA GPU: {cuda.unavailable_reason()}"),
]

NOPS = int(os.environ.get("KINAC_SOAK_OPS", "1000000"))


def test_pool_soak_million_ops() -> None:
    k = TestKernels()
    s = cuda.Stream()
    upstream = cuda.CudaResource()
    pool = cuda.PoolResource(upstream, order=cuda.order_streams)
    ops = soak.generate(NOPS, seed=11)
    rng = random.Random(0)
    value = [1]

    def checkpoint(live: list[tuple[int, int]]) -> None:
        pool.check()
        sample = rng.sample(live, min(64, len(live)))
        blocks = []
        for ptr, n in sample:
            value[0] += 1
            k.fill(ptr, n // 4, value[0], s)
            blocks.append((ptr, n, value[0]))
        bad = verify_blocks(blocks, s)
        assert not bad, bad[:3]

    r = soak.run(pool, ops, stream=s.handle, every=100_000, checkpoint=checkpoint)
    st = r.stats_at_end_of_ops
    summary = {
        "ops": r.ops,
        "seconds": round(r.seconds, 2),
        "us_per_op": round(r.us_per_op, 3),
        "fragmentation_pct": round(st["fragmentation_pct"], 2),
        "reserved_peak_MiB": st["reserved_bytes.all.peak"] / 2**20,
        "requested_peak_MiB": round(st["requested_bytes.all.peak"] / 2**20, 1),
        "segments_allocated": st["segment.all.allocated"],
        "reserved_baseline": r.reserved_baseline,
        "reserved_after_release": r.reserved_after_release,
        "upstream_current": upstream.memory_stats()["allocated_bytes.all.current"],
    }
    print("SOAK", json.dumps(summary))
    out = os.environ.get("OUT")
    if out:
        with open(os.path.join(out, "soak.json"), "w", encoding="utf-8") as f:
            json.dump(summary, f, indent=1)
    assert r.checkpoints == -(-NOPS // 100_000)
    assert r.allocated_after_free == 0
    assert r.reserved_after_release == r.reserved_baseline == 0
    assert summary["upstream_current"] == 0
    assert st["fragmentation_pct"] < 15.0
    s.synchronize()
