"""The steady state's copy graphs without the flag, and a DMA in pieces (issue 17, 2026-12-02c
round 3), without a GPU.

``copy_flag`` off: the copy graph of numpy inputs is the wait, the DMA and *copied* (no flag
copy, no *done*), and the host asks the driver whether the turn's *copied* is done when it
reuses the turn's block (``cuEventQuery``), waiting on it only when not. ``direct_flag`` off: a
copy graph reading a caller's pinned array has no flag either, and the call waits on *copied*
(recorded right after the DMA) before it returns. Checked over the fake driver: each call
computes on its own data, the graphs' nodes, which event each wait is on, and the orders
(:func:`test_staging_hot.check_reuse_order`). The pieces of a DMA: ``pieces_of``'s cuts, and
the graph's parallel branches with the bytes landing, in ``tests/test_staging_graphs.py``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from test_pinned import FakeDriver
from test_staging_hot import (  # noqa: F401 - fixtures
    X,
    _graphed,
    check_reuse_order,
    copies_logged,
    entry,
    fake,
    view,
)

from kinac.rt.cuda import pinned
from kinac.rt.cuda.staging_graphs import pieces_of


def test_without_the_flag_the_host_queries_copied_and_pinned_calls_wait_on_copied(
    entry: Any,  # noqa: F811
    fake: FakeDriver,  # noqa: F811
    copies_logged: None,  # noqa: F811
) -> None:
    e, w, _ = entry
    rng = np.random.default_rng(11)
    wv = np.arange(1, 5, dtype=np.float32)
    e(rng.standard_normal(X).astype(np.float32), w)
    st, g = _graphed(e, fake)
    st.copy_flag = st.direct_flag = False
    st.dma_pieces = 4  # (48 bytes: one piece)
    answers = iter([0, 600] * 20)  # done, then not ready (CUDA_ERROR_NOT_READY): a wait

    def query(ev: Any) -> int:
        rc = next(answers)
        fake.log.append(("query", int(ev), rc))
        return rc

    st.calls.query = query
    buf = pinned.pinned_empty(X, "float32")
    x = np.empty(X, np.float32)
    waits = []
    for k in range(10):
        src = buf if k in (6, 7) else x
        src[...] = rng.standard_normal(X)  # rewritten in place once the call returned
        fake.log.clear()
        t = st.turns[st.turn]
        pending = t.copy_pending
        y = e(src, w)
        np.testing.assert_array_equal(view(y.ptr, X), np.asarray(src) * wv, err_msg=f"call {k}")
        del y
        kinds = [ev[0] for ev in fake.log]
        assert "flag-set" not in kinds and "flag-read" not in kinds, (k, fake.log)
        assert not any(ev[0] == "host-wait" and ev[1] == t.done.handle for ev in fake.log)
        if k in (6, 7):  # the caller's array read where it is; the call waits on *copied*
            assert [ev[3] for ev in fake.log if ev[0] == "copy"] == [buf.ctypes.data]
            assert fake.log[-1] == ("host-wait", t.copied.handle) and "fill" not in kinds
        elif pending and k >= 2:  # reusing the turn's block: a query of its *copied* first
            q = fake.log[0]
            assert q[:2] == ("query", t.copied.handle), (k, fake.log)
            waited = fake.log[1] == ("host-wait", t.copied.handle)
            assert waited == (q[2] != 0), (k, fake.log)
            waits.append(waited)
            assert kinds[1 + waited :] == ["fill", "graph", "wait", "copy", "record", "graph",
                                           "wait", "compute", "record"]  # fmt: skip
    assert st.graph_calls >= 8 and st.direct == 2 and True in waits and False in waits
    copies = [ops for ops in g.graphs.values() if ops[0][0] == "wait" and ops[1][0] == "copy"]
    assert copies and all(
        [(op[0], op[-1]) for op in ops] == [("wait", ()), ("copy", (1,)), ("record", (2,))]
        for ops in copies
    )
    check_reuse_order(fake.log, st.copy_stream.handle)


def test_a_dma_is_cut_into_pieces_at_4_kib_of_at_least_the_least() -> None:
    k = 1 << 10
    assert pieces_of([(0, 0, 512 * k)], 2) == [(0, 0, 256 * k), (256 * k, 256 * k, 256 * k)]
    four = pieces_of([(1 << 40, 1 << 20, 512 * k + 8)], 4)
    assert [n for _, _, n in four] == [132 * k, 132 * k, 132 * k, 116 * k + 8]
    assert all(d - (1 << 40) == h - (1 << 20) for d, h, _ in four)  # both sides move together
    assert pieces_of([(0, 0, 200_000)], 4, 64 * k) == [
        (0, 0, 68 * k), (68 * k, 68 * k, 68 * k), (136 * k, 136 * k, 200_000 - 136 * k)]  # fmt: skip
    assert pieces_of([(5, 6, 48)], 4) == [(5, 6, 48)]  # too small to cut
    assert pieces_of([(5, 6, 48), (7, 8, 0)], 1) == [(5, 6, 48), (7, 8, 0)]
