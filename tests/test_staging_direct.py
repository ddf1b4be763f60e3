"""A caller's pinned ``x`` with its DMA queued first in the bound call (``staging_direct``,
2026-12-02e), without a GPU: the MLP-like entry of ``tests/test_staging_hot.py`` over the fake
driver and fake graphs. Checked from the log: the copy graph is the call's first driver work,
the output is taken after it, the compute follows, and the call's last act is the host's wait
for the DMA (the caller may refill its array once the call returns); a record that no longer
holds (another array, the output held, a destroyed graph, the switch off) never launches a
stale graph and still gives the right result; a torch tensor's pinnedness is asked once per
storage, and again for a new storage at a freed one's address."""

from __future__ import annotations

import gc
import weakref
from typing import Any

import numpy as np
import pytest
from staging_fakes import W, X
from test_pinned import FakeDriver
from test_staging_hot import (  # noqa: F401 - fixtures
    Weight,
    _cheap_context,
    _graphed,
    check_reuse_order,
    copies_logged,
    entry,
    fake,
    view,
)

from kinac.rt.cuda import pinned, staging_direct
from kinac.rt.cuda.tensor import KDL_CUDA, Tensor

WV = np.arange(1, 5, dtype=np.float32)


def _bound(e: Any, drv: FakeDriver, x: Any, w: Any) -> tuple[Any, Any, Any]:
    """The stager on fake graphs, the context check cheap, two calls of ``x`` (the memo, then
    both turns' records): ``(stager, graphs, bound call)``."""
    rng = np.random.default_rng(0)
    e(rng.standard_normal(X).astype(np.float32), w)
    st, g = _graphed(e, drv)
    st.direct_by_calls, st.pin_cache = False, True  # (the copy graph; each case sets its own)
    _cheap_context(e)
    e(x, w)
    call = e.hot_path((x, w))
    assert call is not None
    return st, g, call


def _counted(monkeypatch: pytest.MonkeyPatch, log: list[Any]) -> list[Any]:
    """Each direct_call's outcome (True: it ran the call; "moved": a device array moved), and ``("take",)`` in the log when
    the call takes its output."""
    runs: list[Any] = []
    direct_call, take = staging_direct.direct_call, staging_direct.take

    def counted(*a: Any) -> Any:
        out = direct_call(*a)
        runs.append("moved" if out is staging_direct.MOVED else out is not None)  # type: ignore[arg-type]
        return out

    def logged(kept: Any) -> Any:
        log.append(("take",))
        return take(kept)

    monkeypatch.setattr(staging_direct, "direct_call", counted)
    monkeypatch.setattr(staging_direct, "take", logged)
    return runs


def test_the_dma_is_the_calls_first_work_and_its_wait_the_last(
    entry: Any,  # noqa: F811
    fake: FakeDriver,  # noqa: F811
    copies_logged: None,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    e, w, _ = entry
    rng = np.random.default_rng(1)
    buf = pinned.pinned_empty(X, np.float32)
    buf[...] = rng.standard_normal(X)
    st, g, call = _bound(e, fake, buf, w)
    runs = _counted(monkeypatch, fake.log)
    for k in range(8):
        buf[...] = rng.standard_normal(X)  # refilled in place once the call returned
        np.testing.assert_array_equal(view(call(buf, w).ptr, X), buf * WV, err_msg=f"call {k}")
    assert sum(runs) >= 6 and all(runs)
    fake.log.clear()
    call(buf, w)
    t = st.turns[(st.turn + 1) % 2]
    cs = st.copy_stream.handle
    assert [ev[0] for ev in fake.log] == [
        "graph", "wait", "copy", "record", "take", "graph", "wait", "compute", "record",
        "host-wait"]  # fmt: skip
    assert fake.log[2][3] == buf.ctypes.data  # the DMA reads the caller's array itself
    assert fake.log[3] == ("record", t.copied.handle, cs)
    assert fake.log[-1] == ("host-wait", t.copied.handle)
    assert st.direct >= 9 and not any(ev[0] == "fill" for ev in fake.log)
    st.direct_by_calls = True  # the A/B's other DMA: driver calls, still before the rest
    for k in range(3):
        buf[...] = rng.standard_normal(X)
        fake.log.clear()
        np.testing.assert_array_equal(view(call(buf, w).ptr, X), buf * WV, err_msg=f"calls {k}")
        t = st.turns[(st.turn + 1) % 2]
        assert [ev[0] for ev in fake.log] == [
            "wait", "copy", "record", "take", "graph", "wait", "compute", "record", "host-wait"]  # fmt: skip
        assert fake.log[0] == ("wait", cs, t.consumed.handle) and fake.log[1][3] == buf.ctypes.data
        assert fake.log[2] == ("record", t.copied.handle, cs)
    assert runs[-3:] == [True] * 3
    check_reuse_order(fake.log, cs)


def test_a_record_that_no_longer_holds_takes_the_checked_path(
    entry: Any,  # noqa: F811
    fake: FakeDriver,  # noqa: F811
    copies_logged: None,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The output held by the caller (found after the DMA was queued: the call waits for it and
    queues it again), another pinned array, numpy arrays in between, a copy graph destroyed
    (more than 8 sources), the switch off: right results, no destroyed graph launched."""
    e, w, dev = entry
    rng = np.random.default_rng(2)
    bufs = [pinned.pinned_empty(X, np.float32) for _ in range(5)]
    st, g, call = _bound(e, fake, bufs[0], w)
    launch = g.launch

    def checked(ex: int, s: Any) -> int:
        assert ex not in g.destroyed, f"graph {ex} launched after it was destroyed"
        return launch(ex, s)

    g.launch = checked  # (the graphs built from here on launch through it)
    st._direct_built.clear()
    st.memo[0] = None
    runs = _counted(monkeypatch, fake.log)

    def check(a: Any, what: str, keep: bool = False) -> Any:
        a[...] = rng.standard_normal(X)
        y = call(a, w)
        np.testing.assert_array_equal(view(y.ptr, X), np.asarray(a) * WV, err_msg=what)
        return y if keep else None

    for k in range(6):  # (the memo built again, both turns recorded, then repeated)
        check(bufs[0], f"warm {k}")
    assert runs[-2:] == [True, True]
    held = check(bufs[0], "held", keep=True)
    n = len(runs)
    check(bufs[0], "while the output is held")  # the other kept output: not the recorded one
    del held
    other = staging_direct._other_output
    found: list[bool] = []

    def counted_other(*a: Any) -> Any:
        got = other(*a)
        found.append(got is not None)
        return got

    monkeypatch.setattr(staging_direct, "_other_output", counted_other)
    pick = np.random.default_rng(12)
    for k in range(40):  # outputs held for a call or not, at random: every turn meets both
        since, n = len(fake.log), len(runs)
        held = check(bufs[0], f"held at random {k}", keep=bool(pick.integers(2)))
        if runs[n:] == [True]:  # ran by direct_call: one DMA, whichever output it got
            assert sum(ev[0] == "copy" for ev in fake.log[since:]) == 1, k
    del held
    assert sum(found) >= 4  # the other output's graph found after the DMA was queued
    for k in range(4):
        check(bufs[1], f"another array {k}")
    check(np.empty(X, np.float32), "numpy")
    check(bufs[0], "back")
    for k in range(12):  # five arrays, two turns: 10 copy graphs, at most 8 kept
        check(bufs[k % 5], f"rotation {k}")
    assert g.destroyed  # (some records name destroyed graphs now: never launched)
    for k in range(6):
        check(bufs[0], f"after the rotation {k}")
    assert runs[-2:] == [True, True]
    from kinac.rt.cuda import staging_graphs

    gone = {id(b) for b in st._direct_built.values() if b is not None}
    staging_graphs._destroy(st, gone)  # (what the ninth source does to the 8 kept)
    st._direct_built.clear()
    n = len(runs)
    for k in range(4):  # both turns' records name destroyed copy graphs: rebuilt, not launched
        check(bufs[0], f"copy graphs destroyed {k}")
    assert runs[n : n + 2] == [False, False] and runs[-2:] == [True, True]
    moved = Weight(dev, 2 * WV)  # torch's x.data = y: a weight moved without a new object
    w.ptr = moved.ptr
    inp = e._input
    e._input = lambda a, i: (  # (the entry's path imports it again, as torch's DLPack would)
        Tensor(a.ptr, W, "float32", device=(KDL_CUDA, 0)) if i == 1 else inp(a, i)
    )
    n = len(runs)
    for k in range(4):  # noticed after the DMA was queued: that DMA waited for, the entry's path
        bufs[0][...] = rng.standard_normal(X)
        y = call(bufs[0], w)
        np.testing.assert_array_equal(view(y.ptr, X), bufs[0] * (2 * WV), err_msg=f"moved {k}")
        del y
    assert runs[n] == "moved"  # (the entry's path; then the memo is of the moved weight)
    st.early_dma = False
    n = len(runs)
    for k in range(3):
        bufs[0][...] = rng.standard_normal(X)
        y = call(bufs[0], w)
        np.testing.assert_array_equal(view(y.ptr, X), bufs[0] * (2 * WV), err_msg=f"off {k}")
        del y
    assert len(runs) == n
    check_reuse_order(fake.log, st.copy_stream.handle)


def test_a_pinned_torch_tensor_goes_first_and_is_asked_once(
    entry: Any,  # noqa: F811
    fake: FakeDriver,  # noqa: F811
    copies_logged: None,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    torch = pytest.importorskip("torch")
    e, w, _ = entry
    rng = np.random.default_rng(3)
    mem = pinned.pinned_empty(X, np.float32)
    xt = torch.from_numpy(mem)  # in the (fake) pinned pool: taken as pinned below
    asked: list[int] = []

    def is_pinned(self: Any, device: Any = None) -> bool:  # (a CPU build cannot pin)
        asked.append(self.data_ptr())
        return bool(self.data_ptr() == mem.ctypes.data)

    monkeypatch.setattr(torch.Tensor, "is_pinned", is_pinned)
    monkeypatch.setattr(pinned, "_pins", {})
    xt.copy_(torch.from_numpy(rng.standard_normal(X).astype(np.float32)))
    st, _, call = _bound(e, fake, xt, w)
    runs = _counted(monkeypatch, fake.log)
    for k in range(6):
        xt.copy_(torch.from_numpy(rng.standard_normal(X).astype(np.float32)))
        np.testing.assert_array_equal(view(call(xt, w).ptr, X), xt.numpy() * WV, err_msg=str(k))
    assert sum(runs) >= 4 and set(asked) == {mem.ctypes.data}  # (the entry's path asks too)
    asked.clear()
    for _ in range(4):
        call(xt, w)
    assert not asked  # the bound call's: remembered for this storage
    fake.log.clear()
    call(xt, w)
    assert [ev[0] for ev in fake.log][:4] == ["graph", "wait", "copy", "record"]
    assert fake.log[2][3] == mem.ctypes.data
    st.pin_cache = False  # the path before: asked each call
    n = len(asked)
    for _ in range(3):
        call(xt, w)
    assert len(asked) == n + 3
    st.pin_cache = True
    other = torch.from_numpy(rng.standard_normal(X).astype(np.float32))  # not pinned: copied
    np.testing.assert_array_equal(view(call(other, w).ptr, X), other.numpy() * WV)
    assert not any(ev[0] == "copy" and ev[3] == other.data_ptr() for ev in fake.log)
    check_reuse_order(fake.log, st.copy_stream.handle)


class _Storage:
    """A storage object (weak references allowed)."""


class _T:
    """A torch-like CPU tensor: its data address, its storage object, pinnedness (counted)."""

    def __init__(self, ptr: int, storage: Any, pinned_: bool, asked: list[int]) -> None:
        self.ptr, self.storage, self.pinned, self.asked = ptr, storage, pinned_, asked

    def data_ptr(self) -> int:
        return self.ptr

    def untyped_storage(self) -> Any:
        return self.storage

    def is_pinned(self) -> bool:
        self.asked.append(self.ptr)
        return self.pinned


def test_torch_pinned_is_remembered_per_storage_never_across_a_reused_address(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(pinned, "_pins", {})
    asked: list[int] = []
    s1 = _Storage()
    t = _T(0x1000, s1, True, asked)
    assert all(pinned.torch_pinned(t) for _ in range(5)) and asked == [0x1000]
    ref = weakref.ref(s1)
    del s1, t
    gc.collect()
    assert ref() is None  # the storage freed: the cache holds no memory
    t2 = _T(0x1000, _Storage(), False, asked)  # another allocation at the freed address
    assert not pinned.torch_pinned(t2) and asked == [0x1000, 0x1000]
    assert not pinned.torch_pinned(t2) and len(asked) == 2
    t2.ptr = 0x2000  # the same storage's memory moved (share_memory_, resize_): asked again
    pinned.torch_pinned(t2)
    assert len(asked) == 3
    assert not pinned.torch_pinned(t2, cache=False) and len(asked) == 4  # the A/B's path
    t3 = _T(0x3000, 7, True, asked)  # a storage without weak references: asked each time
    assert pinned.torch_pinned(t3) and pinned.torch_pinned(t3) and len(asked) == 6
    keep = [_Storage() for _ in range(pinned.PIN_CACHE_MAX + 3)]
    for k, s in enumerate(keep):  # more storages than the cache holds: it starts again
        pinned.torch_pinned(_T(0x10000 + 64 * k, s, True, asked))
    assert len(pinned._pins) <= pinned.PIN_CACHE_MAX
