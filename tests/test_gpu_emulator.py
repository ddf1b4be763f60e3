"""The CPU emulator of generated GPU kernels (``gpu_support``) is itself sound: a kernel whose
threads meet (a shuffle, a barrier) runs with one OS thread per GPU thread, a map runs its
threads one after another (the fast path), and a barrier that some thread never reaches is
reported after its timeout instead of hanging the suite."""

from __future__ import annotations

import threading

import numpy as np
import pytest
from gpu_support import _Barrier, _meeting, emulated, run_emulated

from kinac.ir.testing import GraphBuilder


def test_only_kernels_that_shuffle_or_wait_get_threads() -> None:
    g = GraphBuilder("meet")
    x = g.param("x", "f32", (4, 96))
    graph = g.build(g.reduce("reduce_sum", x, 1), g.unary("exp", x))
    lw = emulated(graph)
    kinds = {ln.function: s.kind for s in lw.steps for ln in s.launches}
    meet = _meeting(lw.llvm_ir)
    assert sorted(kinds[f] for f in meet) == ["reduce"], kinds
    assert any(k == "map" and f not in meet for f, k in kinds.items()), kinds
    a = np.random.default_rng(0).standard_normal((4, 96)).astype(np.float32)
    total, ex = run_emulated(graph, a)
    np.testing.assert_allclose(total, a.sum(1), rtol=1e-5)
    np.testing.assert_allclose(ex, np.exp(a), rtol=1e-6)


def test_a_barrier_missed_by_a_thread_times_out_and_stays_broken() -> None:
    bar = _Barrier(3, timeout=0.2)
    errors: list[str] = []

    def wait() -> None:
        try:
            bar.wait()
        except RuntimeError as e:
            errors.append(str(e))

    ts = [threading.Thread(target=wait) for _ in range(2)]  # the third never comes
    for t in ts:
        t.start()
    for t in ts:
        t.join(5)
    assert not any(t.is_alive() for t in ts) and len(errors) == 2, errors
    assert any("timed out" in e for e in errors), errors
    with pytest.raises(RuntimeError, match="broken"):
        bar.wait()
    ok = _Barrier(2, timeout=5)  # and a healthy one is reusable, round after round
    rounds = [threading.Thread(target=lambda: [ok.wait() for _ in range(50)]) for _ in range(2)]  # type: ignore[func-returns-value]
    for t in rounds:
        t.start()
    for t in rounds:
        t.join(10)
    assert not any(t.is_alive() for t in rounds)
