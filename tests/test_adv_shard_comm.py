"""The simulator's collectives attacked with odd buffers (bug round 2026-12-02e): a read-only
receive buffer (a broadcast view) was numpy's bare ``ValueError: assignment destination is
read-only`` from inside the round; now the call's ``KinaRuntimeError`` naming the rank, the
collective and the span, before any rank moves data. Odd sizes that were already right are
kept as regression tests: 3 ranks, empty sends, in-place reduce-scatter and all-gather."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from kinac.artifacts.sharded import MeshSpec
from kinac.errors import KinaRuntimeError
from kinac.rt.comm import simulate

MESH3 = MeshSpec("m", (3,), ("m",))


def test_read_only_receive_buffer_is_a_runtime_error() -> None:
    def body(c: Any) -> Any:
        frozen = np.broadcast_to(np.zeros(2, np.float32), (2,))
        return c.all_reduce(np.ones(2, np.float32), frozen, tag=("all-reduce", "m.kina:3:5"))

    with pytest.raises(KinaRuntimeError, match=r"all-reduce over m at m\.kina:3:5: .*read-only"):
        simulate(MESH3, body, timeout_s=10)


def test_empty_sends_on_three_ranks() -> None:
    rs = simulate(MESH3, lambda c: c.reduce_scatter(np.zeros((0, 2), np.float32)), timeout_s=10)
    ag = simulate(MESH3, lambda c: c.all_gather(np.zeros((0, 5), np.float64)), timeout_s=10)
    assert [r.shape for r in rs] == [(0, 2)] * 3 and [a.shape for a in ag] == [(0, 5)] * 3


def test_in_place_reduce_scatter_and_all_gather_on_three_ranks() -> None:
    def rs(c: Any) -> Any:
        b = np.arange(6, dtype=np.float32) + c.rank
        c.reduce_scatter(b, b[2 * c.rank : 2 * c.rank + 2])
        return b[2 * c.rank : 2 * c.rank + 2].copy()

    got = simulate(MESH3, rs, timeout_s=10)
    total = np.sum([np.arange(6, dtype=np.float32) + r for r in range(3)], axis=0)
    for r in range(3):
        np.testing.assert_array_equal(got[r], total[2 * r : 2 * r + 2])

    def ag(c: Any) -> Any:
        b = np.zeros(6, np.float32)
        b[2 * c.rank : 2 * c.rank + 2] = c.rank + 1
        c.all_gather(b[2 * c.rank : 2 * c.rank + 2], b)
        return b

    for b in simulate(MESH3, ag, timeout_s=10):
        np.testing.assert_array_equal(b, [1, 1, 2, 2, 3, 3])


def test_rank_0_all_reduce_in_place_over_the_process_group() -> None:
    """The TCP process group made a 0-d send ``[1]`` (``np.ascontiguousarray``), so an in-place
    all-reduce of a rank-0 buffer, a launched trainer's gradient of a scalar weight, failed
    ("the receive buffer is f32[], expected f32[1]") on every rank; the simulator took it."""
    from test_comm_tcp import on_processes

    def body(c: Any) -> Any:
        b = np.array(c.rank + 1.5, np.float32)
        c.all_reduce(b, b, op="avg", tag=("all-reduce", "data-parallel gradient"))
        return b

    for got in (on_processes(MESH3, body), simulate(MESH3, body, timeout_s=10)):
        assert all(isinstance(b, np.ndarray) and b.shape == () and b == 2.5 for b in got), got
