"""The steady state of GPU entry calls fed host arrays, without a GPU (issue 17 item 3).

An MLP-like entry (a host ``x``, device weights, one output) runs over the fake driver of
``tests/test_pinned.py`` (copies executed at once, every stream and event call logged) and a
fake captured graph whose launch runs the bound sequence (a Python kernel that reads the staged
``x``). Checked: which path each call takes (general, then hot; back to the general path for a
cast, another weight, a dead weight), that each call computes on its own data, and, from the
log, that no pinned block is rewritten before the DMA that read it is done and no device slot
before the compute that read it is (events; never a stream or device synchronisation);
``pinned_empty`` arrays are DMA'd from where they are, and the call waits for that DMA.
"""

from __future__ import annotations

import ctypes
import gc
from collections.abc import Callable, Iterator
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest
from staging_fakes import W, X, mul_entry
from test_pinned import FakeDriver, HostMemory

from kinac.errors import KinaCallError
from kinac.rt.cuda import device, pinned, staging_bound, staging_hot, staging_nt
from kinac.rt.cuda import graph as graph_mod
from kinac.rt.cuda.pinned import PinnedPool
from kinac.rt.cuda.tensor import KDL_CUDA, Tensor
from kinac.rt.hot import MISS


class Weight:
    """A torch-like CUDA array in fake device memory (host memory)."""

    def __init__(self, mem: HostMemory, values: np.ndarray) -> None:
        self.ptr = mem.alloc(values.nbytes)
        view(self.ptr, values.shape)[...] = values

    def data_ptr(self) -> int:
        return self.ptr


def view(ptr: int, shape: tuple[int, ...]) -> np.ndarray:
    n = int(np.prod(shape))
    return np.ctypeslib.as_array((ctypes.c_float * n).from_address(ptr)).reshape(shape)


class Graph:
    """A captured graph whose launch runs the sequence it was bound to."""

    captured = True

    def __init__(self, seq: Any, log: list[Any]) -> None:
        self.fast_launch = (lambda ex, stream: seq(stream) or 0, None)
        self.log = log
        self.seq = seq

    def replay(self, stream: Any) -> None:
        self.seq(stream)

    def close(self) -> None:
        pass


class Copier:
    """The stager's host copy, logged (which pinned block is written when)."""

    min_bytes = 0  # torch tensors come through here too (not ctypes.memmove)

    def __init__(self, log: list[Any]) -> None:
        self.log = log

    def __call__(self, dst: np.ndarray, src: Any) -> None:
        self.log.append(("fill", dst.ctypes.data))
        np.copyto(dst, src, casting="unsafe")


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> FakeDriver:
    """The fake driver of tests/test_pinned.py in place of cuda-python."""
    from kinac.rt.cuda import driver

    f = FakeDriver()
    monkeypatch.setattr(driver, "_api", f)
    monkeypatch.setattr(driver, "OK", 0)
    monkeypatch.setattr(driver, "_initialised", True)
    monkeypatch.setattr(device, "_devices", {0: object()})
    return f


@pytest.fixture
def entry(fake: FakeDriver, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """``y = x * w`` with ``x`` on the host; its weights; the device memory. The stager is
    closed after the test (its finaliser must not run under another test's fake)."""
    monkeypatch.setattr(graph_mod, "capture", lambda seq, stream, name="": Graph(seq, fake.log))
    monkeypatch.setattr(pinned, "_pool", PinnedPool(alloc=HostMemory().alloc, free=lambda p: None))
    dev = HostMemory()
    res = SimpleNamespace(ordinal=0, allocate=lambda n, s=0: dev.alloc(n),
                          deallocate=lambda p, n=0, s=0: None)  # fmt: skip
    e = mul_entry(res)

    def bind(key: tuple[int, ...]) -> Any:
        x, w, y = (p if p else e._staging(pos) for pos, p in enumerate(key))  # as _bind

        def seq(stream: Any) -> None:
            fake.log.append(("compute", x))
            view(y, X)[...] = view(x, X) * view(w, W)

        return seq, []

    e._bind = bind
    w = Weight(dev, np.arange(1, 5, dtype=np.float32))
    e._remember(1, w, Tensor(w.ptr, W, "float32", device=(KDL_CUDA, 0)))
    yield e, w, dev
    if e._stager is not None:
        e._stager.close()


def _staged(e: Any, log: list[Any]) -> Any:
    """The entry's stager, with its host copies logged."""
    if e._stager is None:
        e._staging_for()
    e._stager.copier = Copier(log)
    return e._stager


def check_reuse_order(log: list[Any], cs: int) -> None:
    """From the log: a pinned block is rewritten (``fill``) only after a host wait on an event
    recorded after the last DMA out of it (or a query of one that answered done); a device slot is copied into only after the copy
    stream waited on an event recorded after the last compute that read it. (The only stream
    synchronisation in the log is the entry's warm-up before it captures a graph.)"""
    dma_from: dict[int, int] = {}  # pinned block -> log index of the last DMA out of it
    read_at: dict[int, int] = {}  # device slot -> log index of the last compute reading it
    recorded: dict[int, tuple[int, int]] = {}  # event -> (stream, log index of its record)
    for k, ev in enumerate(log):
        if ev[0] == "record":
            recorded[ev[1]] = (ev[2], k)
        elif ev[0] == "fill" and ev[1] in dma_from:
            since = log[dma_from[ev[1]] : k]
            waits = [recorded[e[1]][1] for e in since if e[0] == "host-wait"]
            waits += [recorded[e[1]][1] for e in since if e[0] == "query" and e[2] == 0]
            # or the copy graph's flag, set after that DMA, read as set by the stager
            flags = {e[1] for e in since if e[0] == "flag-set"}
            read = any(e[0] == "flag-read" and e[2] and e[1] in flags for e in since)
            assert read or any(r > dma_from[ev[1]] for r in waits), f"block rewritten at {k}"
        elif ev[0] == "copy":
            dst, src = ev[1], ev[3]
            dma_from[src] = k
            if dst in read_at:
                seen = [recorded[e[2]] for e in log[read_at[dst] : k] if e[0] == "wait" and e[1] == cs]  # fmt: skip
                assert any(s == 0 and r > read_at[dst] for s, r in seen), f"slot reused at {k}"
        elif ev[0] == "compute":
            read_at[ev[1]] = k


@pytest.fixture
def copies_logged(fake: FakeDriver, monkeypatch: pytest.MonkeyPatch) -> None:
    """The fake's DMAs log their source too (the reuse check follows blocks)."""

    def copy(dst: int, src: int, n: int, s: int) -> tuple[int]:
        ctypes.memmove(dst, src, n)
        fake.log.append(("copy", dst, int(s), src))
        return (0,)

    monkeypatch.setattr(fake, "cuMemcpyHtoDAsync", copy)


def test_calls_go_hot_and_each_computes_on_its_own_data(
    entry: Any, fake: FakeDriver, copies_logged: None
) -> None:
    e, w, _ = entry
    rng = np.random.default_rng(0)
    xs = [rng.standard_normal(X).astype(np.float32) for _ in range(8)]
    paths, outs = [], []
    for k, x in enumerate(xs):
        if k == 1:
            _staged(e, fake.log)
        before = e.hot_calls
        y = e(x, w)
        outs.append(view(y.ptr, X).copy())
        del y  # dropped: its block serves the next call's output (one graph per turn)
        paths.append("hot" if e.hot_calls > before else "general")
    # two general calls (one per turn: each captures its graph), then hot
    assert paths == ["general"] * 2 + ["hot"] * 6 and e._stager.hot_calls == 6
    for x, y in zip(xs, outs, strict=True):  # bit for bit what numpy computes
        np.testing.assert_array_equal(y, x * np.arange(1, 5, dtype=np.float32))
    st = e._stager
    check_reuse_order(fake.log, st.copy_stream.handle)
    assert st.copies == 8 and len(set(st.device_buffers())) == 2 and e.captures == 2
    # a hot call's driver calls: the turn's two waits, one DMA, copied, the compute's wait,
    # the launch (the compute), consumed
    fake.log.clear()
    e(xs[0], w)
    kinds = [ev[0] if ev[0] != "wait" else ("wait", ev[1]) for ev in fake.log]
    cs = st.copy_stream.handle
    assert kinds == ["host-wait", ("wait", cs), "fill", "copy", "record", ("wait", 0), "compute", "record"]  # fmt: skip


def test_other_arguments_take_the_general_path(
    entry: Any, fake: FakeDriver, copies_logged: None
) -> None:
    e, w, dev = entry
    x = np.ones(X, np.float32)
    for _ in range(3):
        e(x, w)
    assert e._stager.hot_calls == 1
    hot = e.hot_calls
    y = e(x.astype(np.float64), w)  # a cast: the general path reads it (same result)
    assert e.hot_calls == hot
    np.testing.assert_array_equal(view(y.ptr, X), x * np.arange(1, 5, dtype=np.float32))
    w2 = Weight(dev, np.full(W, 2, np.float32))
    e._remember(1, w2, Tensor(w2.ptr, W, "float32", device=(KDL_CUDA, 0)))
    y = e(x, w2)  # another weight: general (the memo is rebuilt for it: no graph yet) ...
    assert e.hot_calls == hot and e._stager.memo[0].ids == (id(w2),)
    np.testing.assert_array_equal(view(y.ptr, X), np.full(X, 2, np.float32))
    del y  # (dropped: the next output reuses its block)
    for _ in range(4):  # the graphs of these addresses are captured, then hot on them
        np.testing.assert_array_equal(view(e(x, w2).ptr, X), np.full(X, 2, np.float32))
    assert e.hot_calls >= hot + 2  # (after a graph per turn and output block for w2)
    del w2
    gc.collect()
    assert e._stager.memo[0] is None  # a dead weight empties the memo before its id is reused
    w.ptr = dev.alloc(16)  # moved in place (torch's set_): imported again, general path
    view(w.ptr, W)[...] = 3
    e._imports.clear()
    e._remember(1, w, Tensor(w.ptr, W, "float32", device=(KDL_CUDA, 0)))
    y = e(x, w)
    np.testing.assert_array_equal(view(y.ptr, X), np.full(X, 3, np.float32))
    check_reuse_order(fake.log, e._stager.copy_stream.handle)


def test_a_pinned_empty_array_is_copied_from_where_it_is(
    entry: Any, fake: FakeDriver, copies_logged: None
) -> None:
    e, w, _ = entry
    buf = pinned.pinned_empty(X, "float32")
    addr = buf.ctypes.data
    for k in range(5):
        buf[...] = k  # refilled in place after each call returned
        fake.log.clear()
        if k == 1:
            _staged(e, fake.log)
        y = e(buf, w)
        want = np.full(X, k, np.float32) * np.arange(1, 5, dtype=np.float32)
        np.testing.assert_array_equal(view(y.ptr, X), want)
        del y
        copies = [ev for ev in fake.log if ev[0] == "copy"]
        assert [c[3] for c in copies] == [addr]  # the DMA reads the caller's array itself
        assert not any(ev[0] == "fill" for ev in fake.log)  # no staging copy
        # the call returns after a host wait on the event recorded after that DMA
        rec = max(i for i, ev in enumerate(fake.log) if ev[0] == "record" and ev[2] != 0)
        assert fake.log[-1] == ("host-wait", fake.log[rec][1])
    st = e._stager
    assert st.direct == 5 and st.hot_calls == 3 and st.pinned_bytes() == 0
    e(buf[...], w)  # a view of it: an ordinary host array, staged through a block
    assert st.direct == 5 and st.pinned_bytes() > 0


@pytest.mark.parametrize("graphs", [False, True])
def test_a_pinned_array_below_direct_min_is_copied_and_not_waited_for(
    entry: Any, fake: FakeDriver, copies_logged: None, graphs: bool
) -> None:
    """``direct_min`` above the array's size: a ``pinned_empty`` array is staged like any host
    array (copied into the turn's block, the DMA reads the block), and the call returns with
    no host wait for that DMA; refilling the array after each call is still right."""
    e, w, _ = entry
    e(np.ones(X, np.float32), w)
    st = _graphed(e, fake)[0] if graphs else _staged(e, fake.log)
    st.direct_min = 1 << 20
    buf = pinned.pinned_empty(X, "float32")
    for k in range(5):
        buf[...] = k
        fake.log.clear()
        y = e(buf, w)
        np.testing.assert_array_equal(view(y.ptr, X), np.full(X, k, np.float32) * np.arange(1, 5, dtype=np.float32))  # fmt: skip
        del y
        copies = [ev[3] for ev in fake.log if ev[0] == "copy"]
        assert copies and buf.ctypes.data not in copies  # the block, not the caller's array
        assert any(ev[0] == "fill" for ev in fake.log)
        assert fake.log[-1][0] == "record"  # the call ends with *consumed*: no host wait
    assert st.direct == 0 and st.hot_calls == 4
    if graphs:
        assert st.graph_calls == 4
    check_reuse_order(fake.log, st.copy_stream.handle)


def test_a_failed_call_leaves_the_turn_usable(entry: Any, fake: FakeDriver) -> None:
    e, w, _ = entry
    x = np.ones(X, np.float32)
    e(x, w)
    st = e._stager
    st.stage(0, x, X, "float32")  # a call that failed after staging, before running
    fake.log.clear()
    st.discard()
    assert [ev[0] for ev in fake.log] == ["record", "host-wait"] and not st._pending
    turn = st.turn
    y = e(x * 2, w)
    assert st.turn != turn  # the turn was used again, then advanced
    np.testing.assert_array_equal(view(y.ptr, X), 2 * np.arange(1, 5, dtype=np.float32) * x)


def test_kinac_tensors_as_device_arguments_go_hot(entry: Any, fake: FakeDriver) -> None:
    """kinac's own CUDA tensors are used in place (never imported): the memo checks them."""
    e, w, _ = entry
    t = Tensor(w.ptr, W, "float32", device=(KDL_CUDA, 0))
    x = np.full(X, 2, np.float32)
    for _ in range(4):
        y = e(x, t)
        np.testing.assert_array_equal(view(y.ptr, X), x * np.arange(1, 5, dtype=np.float32))
        del y
    assert e._stager.hot_calls == 2 and e._stager.memo[0].ids == (id(t),)
    other = Tensor(w.ptr, (2, 2), "float32", device=(KDL_CUDA, 0))  # not the parameter's shape
    assert staging_hot.build(e._stager, e, (x, other)) is None


def test_cpu_torch_tensors_go_hot_and_strided_ones_take_the_general_path(
    entry: Any, fake: FakeDriver, copies_logged: None
) -> None:
    torch = pytest.importorskip("torch")
    e, w, _ = entry
    rng = np.random.default_rng(5)
    wv = np.arange(1, 5, dtype=np.float32)
    for k in range(5):
        x = torch.from_numpy(rng.standard_normal(X).astype(np.float32))
        if k == 1:
            _staged(e, fake.log)
        y = e(x, w)
        np.testing.assert_array_equal(view(y.ptr, X), x.numpy() * wv)
        del y
    st = e._stager
    assert st.hot_calls == 3 and st.direct == 0  # not pinned: copied into the blocks
    check_reuse_order(fake.log, st.copy_stream.handle)
    xt = torch.from_numpy(rng.standard_normal(X[::-1]).astype(np.float32)).t()  # strided
    y = e(xt, w)
    assert st.hot_calls == 3 and st.memo[0] is None
    np.testing.assert_array_equal(view(y.ptr, X), xt.numpy() * wv)


# ---- the steady state as two graph launches (staging_graphs) ----------------------------------
class FakeGraphs:
    """``staging_graphs.Graphs`` over the fake driver: a graph is its nodes in the order added
    (with their dependencies, checked below); launching it runs them on the launch stream
    through the fake (so the log reads as the driver-call path's). ``set_flags=False``: the
    flag copies do not land (a DMA still running), so the stager must wait on *done*."""

    def __init__(self, fake: FakeDriver, set_flags: bool = True) -> None:
        self.fake, self.set_flags = fake, set_flags
        self.graphs: dict[int, list[tuple[Any, ...]]] = {}
        self.destroyed: list[int] = []
        self.launch: Callable[[int, Any], int] = self._launch

    def create(self) -> int:
        g = len(self.graphs) + 1
        self.graphs[g] = []
        return g

    def _add(self, g: int, deps: Any, *op: Any) -> int:
        self.graphs[g].append((*op, tuple(deps)))
        return len(self.graphs[g])  # node ids: 1, 2, ... within the graph

    def wait(self, g: int, deps: Any, ev: int) -> int:
        return self._add(g, deps, "wait", ev)

    def record(self, g: int, deps: Any, ev: int) -> int:
        return self._add(g, deps, "record", ev)

    def memcpy(self, g: int, deps: Any, prm: Any) -> int:
        src = prm.srcHost if prm.srcMemoryType == 1 else prm.srcDevice
        dst = prm.dstHost if prm.dstMemoryType == 1 else prm.dstDevice
        kind = "flag" if prm.dstMemoryType == 1 else "copy"
        return self._add(g, deps, kind, dst, src, prm.WidthInBytes)

    def child(self, g: int, deps: Any, captured: Any) -> int:
        return self._add(g, deps, "child", captured)

    def instantiate(self, g: int) -> int:
        return g

    def destroy(self, g: int, ex: Any) -> None:
        self.destroyed.append(g)

    def _launch(self, ex: int, stream: Any) -> int:
        s, f = int(stream), self.fake
        f.log.append(("graph", ex))
        for op in self.graphs[ex]:
            if op[0] == "wait":
                f.cuStreamWaitEvent(s, op[1], 0)
            elif op[0] == "record":
                f.cuEventRecord(op[1], s)
            elif op[0] == "copy":
                f.cuMemcpyHtoDAsync(op[1], op[2], op[3], s)
            elif op[0] == "flag" and self.set_flags:
                ctypes.memmove(op[1], op[2], op[3])
                f.log.append(("flag-set", op[1]))
            elif op[0] == "child":
                op[1].replay(s)
        return 0


class LoggedFlags:
    """The stager's flags, each read logged as ``("flag-read", address, value)``."""

    def __init__(self, flags: Any, log: list[Any]) -> None:
        self.flags, self.log = flags, log
        self.base = ctypes.addressof(flags)

    def __getitem__(self, k: int) -> int:
        v = self.flags[k]
        self.log.append(("flag-read", self.base + 4 * k, v))
        return int(v)

    def __setitem__(self, k: int, v: int) -> None:
        self.flags[k] = v


def _cheap_context(e: Any) -> SimpleNamespace:
    """Gives ``e`` the cheap context check a bound call needs (``mul_entry`` has none): context
    5 is current and is the entry's own. Returns the current-context cell: a test sets its
    ``value`` to make another context current."""
    cur = SimpleNamespace(value=5)
    e._ctx_get, e._ctx_ref, e._ctx_cur, e._ctx_mine = (lambda r: 0), None, cur, 5
    return cur


def _graphed(e: Any, fake: FakeDriver, set_flags: bool = True) -> tuple[Any, FakeGraphs]:
    from kinac.rt.cuda import staging_graphs

    st = _staged(e, fake.log)
    st.graphs = g = FakeGraphs(fake, set_flags)
    st.use_graphs = True
    assert staging_graphs._flags_ready(st)
    st.flags = LoggedFlags(st.flags, fake.log)
    return st, g


def test_steady_state_calls_are_two_graph_launches_and_no_host_wait(
    entry: Any, fake: FakeDriver, copies_logged: None
) -> None:
    e, w, _ = entry
    rng = np.random.default_rng(1)
    e(rng.standard_normal(X).astype(np.float32), w)
    st, g = _graphed(e, fake)
    wv = np.arange(1, 5, dtype=np.float32)
    x = np.empty(X, np.float32)
    for k in range(8):
        x[...] = rng.standard_normal(X)  # rewritten in place after each call returns
        y = e(x, w)
        np.testing.assert_array_equal(view(y.ptr, X), x * wv, err_msg=f"call {k}")
        del y
    assert st.graph_calls == 7 and st.hot_calls == 7 and st.graph_error is None
    check_reuse_order(fake.log, st.copy_stream.handle)
    # one call: the flag read (set: no driver call), the staging copy, two launches
    fake.log.clear()
    e(x, w)
    t = st.turns[(st.turn + 1) % 2]
    cs = st.copy_stream.handle
    copied, consumed, done = t.copied.handle, t.consumed.handle, t.done.handle
    kinds = [ev[0] for ev in fake.log]
    assert kinds == ["flag-read", "fill", "graph", "wait", "copy", "record", "flag-set", "record",
                     "graph", "wait", "compute", "record"]  # fmt: skip
    assert fake.log[3] == ("wait", cs, consumed) and fake.log[5] == ("record", copied, cs)
    assert fake.log[7] == ("record", done, cs) and fake.log[9] == ("wait", 0, copied)
    assert fake.log[11] == ("record", consumed, 0)
    # the copy graph: the flag after the DMAs, *done* after the flag; the compute wrapper a chain
    copy_g, compute_g = fake.log[2][1], fake.log[8][1]
    assert [(op[0], op[-1]) for op in g.graphs[copy_g]] == [
        ("wait", ()), ("copy", (1,)), ("record", (2,)), ("flag", (2,)), ("record", (4,))]  # fmt: skip
    assert [(op[0], op[-1]) for op in g.graphs[compute_g]] == [
        ("wait", ()), ("child", (1,)), ("record", (2,))]  # fmt: skip
    assert len(g.graphs) == 4  # a copy graph and a compute wrapper per turn, built once
    torch = pytest.importorskip("torch")
    for _ in range(3):  # CPU torch tensors: copied into the blocks, the same graphs
        xt = torch.from_numpy(rng.standard_normal(X).astype(np.float32))
        np.testing.assert_array_equal(view(e(xt, w).ptr, X), xt.numpy() * wv)
    assert st.graph_calls == 11 and len(g.graphs) == 4
    from kinac.rt.cuda import staging_graphs

    staging_graphs._drop_compute(st)  # (at 16 wrappers): the memo's plans go with them
    assert st.memo[0].plans == [None, None] and sorted(g.destroyed) == [2, 4]
    for _ in range(2):  # new wrappers, the same copy graphs
        np.testing.assert_array_equal(view(e(x, w).ptr, X), x * wv)
    assert st.graph_calls == 13 and len(g.graphs) == 6
    check_reuse_order(fake.log, st.copy_stream.handle)
    st.close()
    assert sorted(g.destroyed) == [1, 2, 3, 4, 5, 6]


def test_a_flag_not_set_yet_is_waited_for_on_done_and_mixed_paths_stay_ordered(
    entry: Any, fake: FakeDriver, copies_logged: None
) -> None:
    """A copy graph whose flag has not landed: the host waits on *done* (recorded after the
    flag's copy), never clears the flag under a write still coming; a ``pinned_empty`` array
    in between is read where it is by a copy graph of its own, without the flag (the call
    returns after a wait on *copied*: 2026-12-02c round 3), and the orders hold throughout."""
    e, w, _ = entry
    rng = np.random.default_rng(2)
    wv = np.arange(1, 5, dtype=np.float32)
    e(rng.standard_normal(X).astype(np.float32), w)
    st, _ = _graphed(e, fake, set_flags=False)
    buf = pinned.pinned_empty(X, "float32")
    by_graph = [False, False]  # whether the turn's last DMAs were a copy graph's
    for k in range(9):
        x = buf if k in (4, 5) else rng.standard_normal(X).astype(np.float32)
        if k in (4, 5):
            buf[...] = k
        fake.log.clear()
        j = st.turn
        t = st.turns[j]
        y = e(x, w)
        np.testing.assert_array_equal(view(y.ptr, X), np.asarray(x) * wv, err_msg=f"call {k}")
        del y
        hw = [ev[1] for ev in fake.log if ev[0] == "host-wait"]
        if by_graph[j]:  # the flag is not set: the host waits on *done* first
            assert hw[:1] == [t.done.handle], (k, fake.log)
        else:  # a direct DMA was waited for when its call returned
            assert t.done.handle not in hw[:1] or k in (4, 5), (k, fake.log)
        if k in (4, 5):  # the caller's array DMA'd where it is, waited for before returning
            assert [ev[3] for ev in fake.log if ev[0] == "copy"] == [buf.ctypes.data]
            assert fake.log[-1] == ("host-wait", t.copied.handle)  # (no flag in its graph)
            assert not any(ev[0] in ("fill", "flag-set") for ev in fake.log)
        by_graph[j] = k not in (0, 4, 5)
    assert st.graph_calls == 8 and st.direct == 2 and st.hot_calls == 8
    check_reuse_order(fake.log, st.copy_stream.handle)


@pytest.mark.parametrize("which", ["copy", "compute"])
def test_a_refused_graph_launch_falls_back_to_driver_calls(
    entry: Any, fake: FakeDriver, copies_logged: None, which: str
) -> None:
    """A launch the driver refuses (the copy graph: nothing queued; the compute wrapper: the
    copies are): that call is completed with driver calls, right, and later ones use them."""
    e, w, _ = entry
    wv = np.arange(1, 5, dtype=np.float32)
    e(np.ones(X, np.float32), w)
    st, g = _graphed(e, fake)
    launch = g._launch
    refuse = 0 if which == "copy" else 1  # graphs 1, 3: turn 0's, 2, 4: its compute wrapper
    g.launch = lambda ex, s: 999 if len(g.graphs) >= 2 and (ex - 1) % 2 == refuse else launch(ex, s)
    with pytest.warns(UserWarning, match=f"the {which}"):
        for k in range(5):
            x = np.full(X, k, np.float32)
            np.testing.assert_array_equal(view(e(x, w).ptr, X), x * wv, err_msg=f"call {k}")
    assert not st.use_graphs and "999" in (st.graph_error or "")
    assert st.graph_calls == 0 and st.hot_calls == 4
    check_reuse_order(fake.log, st.copy_stream.handle)


@pytest.mark.skipif(not staging_nt.available(), reason="no llvmlite host target")
def test_hot_calls_stream_into_the_block_only_at_stream_min(
    entry: Any, fake: FakeDriver, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``stream_min`` 0: every contiguous numpy ``x`` goes through the streaming copy (counted),
    results bit-identical; a Fortran-ordered ``x`` of the same shape is copied by numpy; the
    default (a third of the core's L2) not at this size."""
    e, w, _ = entry
    keep: list[Any] = []

    def alloc(n: int) -> int:  # page-aligned, as cuMemHostAlloc's blocks
        buf = ctypes.create_string_buffer(n + 4096)
        keep.append(buf)
        return ctypes.addressof(buf) + (-ctypes.addressof(buf) % 4096)

    monkeypatch.setattr(pinned, "_pool", PinnedPool(alloc=alloc, free=lambda p: None))
    rng = np.random.default_rng(5)
    wv = np.arange(1, 5, dtype=np.float32)
    e(rng.standard_normal(X).astype(np.float32), w)
    st, _ = _graphed(e, fake)
    assert st.stream_min > 48  # the default (a third of the L2): not at this size
    for _ in range(3):
        x = rng.standard_normal(X).astype(np.float32)
        np.testing.assert_array_equal(view(e(x, w).ptr, X), x * wv)
    assert st.streamed == 0 and st.graph_calls >= 2
    st.stream_min = 0
    st.memo[0] = None  # (the plans are made with the knob's value)
    x = np.empty(X, np.float32)
    for k in range(6):
        x[...] = rng.standard_normal(X)  # refilled in place once each call returned
        np.testing.assert_array_equal(view(e(x, w).ptr, X), x * wv, err_msg=f"call {k}")
    streamed = st.streamed
    assert streamed >= 5  # (the first call after the memo's reset: the general path)
    fake.log.clear()  # a streamed call: two launches, no host wait added
    e(x, w)
    kinds = [ev[0] for ev in fake.log]
    assert kinds.count("graph") == 2 and "host-wait" not in kinds and "stream-sync" not in kinds
    assert st.streamed == streamed + 1
    streamed += 1
    xf = np.asfortranarray(rng.standard_normal(X).astype(np.float32))
    np.testing.assert_array_equal(view(e(xf, w).ptr, X), xf * wv)
    assert st.streamed == streamed and st.hot_calls == st.graph_calls
    from kinac.rt.cuda.staging_copy import HostCopier

    st.copier = HostCopier(workers=2, min_bytes=16)  # at the copier's threshold: its threads
    st.memo[0] = None
    for k in range(4):
        x[...] = rng.standard_normal(X)
        np.testing.assert_array_equal(view(e(x, w).ptr, X), x * wv, err_msg=f"call {k}")
    assert st.streamed >= streamed + 3


def test_the_bound_call_for_the_api_memo_goes_hot_and_falls_back_right(
    entry: Any, fake: FakeDriver, copies_logged: None
) -> None:
    """``entry.hot_path(arrays)`` (what ``kinac.compile``'s memo calls) of a staged entry: a
    bound call that runs the steady state without the entry's layers (two graph launches, no
    host wait), bit-identical with ``x`` refilled after each call returns; the memo dropped,
    a moved weight, another context: the plain call (the memo rebuilt, the bound call taken
    again after); no bound call while the entry cannot check its context cheaply."""
    e, w, dev = entry
    rng = np.random.default_rng(7)
    wv = np.arange(1, 5, dtype=np.float32)
    x = rng.standard_normal(X).astype(np.float32)
    e(x, w)
    st, g = _graphed(e, fake)
    e(x, w)  # (the memo)
    assert e.hot_path((x, w)) is None  # mul_entry has no cheap context check
    cur = _cheap_context(e)
    assert e.hot_path((np.ones(X, np.float32), w)) is not None  # (host arrays: any, same form)
    call = e.hot_path((x, w))
    assert call is not None
    layers: list[int] = []
    call_ = type(e).__call__
    type(e).__call__ = lambda self, *a, **k: layers.append(1) or call_(self, *a, **k)  # type: ignore[func-returns-value]
    try:
        h0, g0 = st.hot_calls, st.graph_calls
        for k in range(6):
            x[...] = rng.standard_normal(X)  # refilled in place once the call returned
            np.testing.assert_array_equal(view(call(x, w).ptr, X), x * wv, err_msg=f"call {k}")
        assert st.hot_calls - h0 == 6 and st.graph_calls - g0 == 6 and not layers
        fake.log.clear()
        call(x, w)
        kinds = [ev[0] for ev in fake.log]
        assert kinds.count("graph") == 2 and "host-wait" not in kinds and "stream-sync" not in kinds
        st.memo[0] = None  # dropped (a device argument died, other arguments came): plain
        call(x, w)
        assert layers == [1] and st.memo[0] is not None  # the entry built it again
        call(x, w)
        assert layers == [1]  # and the bound call is ours again
        cur.value = 6  # another context current: the entry's own path (it makes its current)
        call(x, w)
        assert layers == [1, 1]
        cur.value = 5
        moved = Weight(dev, 2 * wv)  # other values: a stale address would show
        w.ptr = moved.ptr  # the tensor moved without a new object (torch's x.data = y)
        inp = e._input
        e._input = lambda a, i: (  # (the general path re-imports it: as torch's DLPack would)
            Tensor(a.ptr, W, "float32", device=(KDL_CUDA, 0)) if i == 1 else inp(a, i)
        )
        np.testing.assert_array_equal(view(call(x, w).ptr, X), x * (2 * wv))
        assert layers == [1, 1, 1]
        check_reuse_order(fake.log, st.copy_stream.handle)
        e._stager = None  # replaced (as a bench may): the bound call is the entry's
        st.close()
        e._staging_for()
        _graphed(e, fake)
        np.testing.assert_array_equal(view(call(x, w).ptr, X), x * (2 * wv))
        assert layers == [1, 1, 1, 1] and st.memo[0] is None
    finally:
        type(e).__call__ = call_


def test_the_compute_by_driver_calls_after_the_copy_graph(
    entry: Any, fake: FakeDriver, copies_logged: None
) -> None:
    """``compute_wrapper`` off (the bench's A/B): the copy graph, then the compute's wait for
    *copied*, the captured graph and *consumed* as driver calls; right results, orders kept."""
    e, w, _ = entry
    rng = np.random.default_rng(9)
    wv = np.arange(1, 5, dtype=np.float32)
    e(rng.standard_normal(X).astype(np.float32), w)
    st, _ = _graphed(e, fake)
    st.compute_wrapper = False
    x = np.empty(X, np.float32)
    for k in range(6):
        x[...] = rng.standard_normal(X)
        np.testing.assert_array_equal(view(e(x, w).ptr, X), x * wv, err_msg=f"call {k}")
    assert st.hybrid_calls >= 5 and st.graph_calls == 0
    fake.log.clear()
    e(x, w)
    t = st.turns[(st.turn + 1) % 2]
    kinds = [ev[0] for ev in fake.log]
    assert kinds == ["flag-read", "fill", "graph", "wait", "copy", "record", "flag-set", "record",
                     "wait", "compute", "record"]  # fmt: skip
    assert fake.log[8] == ("wait", 0, t.copied.handle)
    assert fake.log[10] == ("record", t.consumed.handle, 0)
    check_reuse_order(fake.log, st.copy_stream.handle)


def test_the_bound_calls_turn_path_sees_every_change_between_calls(
    entry: Any, fake: FakeDriver, copies_logged: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The bound call repeats a turn as its last call ran it (no plan, graph or output lookup:
    ``staging_bound._turn_call``) only while nothing it skipped could differ: ``x`` refilled in
    place is copied each call; ``x`` reshaped or retyped in place, a caller's pinned array, the
    caller still holding the last output, a closed graph, a moved weight or graphs turned off
    each take the checked path, and every result is right."""
    e, w, dev = entry
    rng = np.random.default_rng(11)
    wv = np.arange(1, 5, dtype=np.float32)
    x = rng.standard_normal(X).astype(np.float32)
    e(x, w)
    st, g = _graphed(e, fake)
    _cheap_context(e)
    e(x, w)
    call = e.hot_path((x, w))
    assert call is not None
    turned: list[int] = []
    turn_call = staging_bound._turn_call

    def counted(*a: Any) -> Any:
        turned.append(1)
        return turn_call(*a)

    monkeypatch.setattr(staging_bound, "_turn_call", counted)

    def check(what: str, arr: Any = None, weights: Any = wv, keep: bool = False) -> Any:
        a = x if arr is None else arr
        y = call(a, w)
        np.testing.assert_array_equal(
            view(y.ptr, X), np.asarray(a).reshape(X) * weights, err_msg=what
        )
        return y if keep else None

    def warm(what: str, weights: Any = wv) -> int:
        """Calls until both turns are recorded and repeated; the count of repeated turns."""
        n = len(turned)
        for k in range(6):
            x[...] = rng.standard_normal(X)
            check(f"{what} {k}", weights=weights)
        assert len(turned) >= n + 2, what
        return len(turned)

    n = warm("refilled")
    x.shape = (4, 3)  # reshaped in place: not run, the caller's full path binds it again
    assert call(x, w) is MISS and call.vouched == {0}
    with pytest.raises(KinaCallError, match=r"argument `x` has shape \[4, 3\], expected \[3, 4\]"):
        e(x, w)  # (what the entry itself says of it)
    x.shape = X
    assert len(turned) == n
    n = warm("shape back")
    x.dtype = np.int32  # type: ignore[misc,assignment]  # retyped in place: its int32 values
    assert call(x, w) is MISS
    y = e(x, w)  # (the entry itself casts it)
    np.testing.assert_array_equal(view(y.ptr, X), x.astype(np.float32) * wv)
    del y
    x.dtype = np.float32  # type: ignore[misc,assignment]
    assert len(turned) == n
    n = warm("dtype back")
    kept = check("holding the output", keep=True)
    n = len(turned)
    check("while the last output is held")  # the next output is another block
    assert len(turned) == n
    warm("the first output held")  # both turns recorded with the second block
    del kept
    n = len(turned)
    check("the first output dropped")  # taken back first: not at the recorded address
    assert len(turned) == n
    n = warm("output dropped")
    buf = pinned.pinned_empty(X, np.float32)  # a caller's pinned array: DMA'd in place
    buf[...] = rng.standard_normal(X)
    check("pinned array", buf)
    assert len(turned) == n
    n = warm("numpy while a pinned array lives")  # (other arrays still repeat turns)
    check("pinned array again", buf)
    assert len(turned) == n
    del buf
    gc.collect()
    n = warm("pinned array gone")
    from kinac.rt.cuda import staging_graphs

    staging_graphs._drop_compute(st)  # the compute wrappers destroyed (the entry let go 16)
    since = len(fake.log)
    n = warm("compute wrappers rebuilt")
    launched = {ev[1] for ev in fake.log[since:] if ev[0] == "graph"}
    assert launched and not launched & set(g.destroyed)
    st.use_graphs = False
    for k in range(3):
        x[...] = rng.standard_normal(X)
        check(f"driver calls {k}")
    assert len(turned) == n
    st.use_graphs = True
    n = warm("graphs again")
    for _, _, cg in list(e._bound.values()):  # closed graphs (an eviction): never launched
        cg.fast_launch = None
    for k in range(3):
        x[...] = rng.standard_normal(X)
        check(f"graph closed {k}")
    assert len(turned) == n
    moved = Weight(dev, 3 * wv)
    w.ptr = moved.ptr  # torch's x.data = y: moved without a new object
    inp = e._input
    e._input = lambda a, i: (
        Tensor(a.ptr, W, "float32", device=(KDL_CUDA, 0)) if i == 1 else inp(a, i)
    )
    for k in range(3):
        check(f"moved weight {k}", weights=3 * wv)
    check_reuse_order(fake.log, st.copy_stream.handle)
