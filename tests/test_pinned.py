"""The page-locked host pool and the host-input stager, without a GPU (issue 17 item 3).

The pool's bookkeeping runs over ordinary host memory (its driver calls are injectable). The
stager runs against a fake driver that executes copies at once and logs every stream and event
call, so the protocol is checked: a slot's pinned block is rewritten only after its previous
copy is done, its device buffer only after the compute that read it, and the compute waits on
the device (an event), never the host, for this call's copies. ``tests/test_pinned_gpu.py``
runs the same on a GPU.
"""

from __future__ import annotations

import ctypes
from typing import Any

import numpy as np
import pytest

from kinac.rt.cuda import device, driver, pinned, staging
from kinac.rt.cuda.pinned import MiB, PinnedBuffer, PinnedPool, size_class


class HostMemory:
    """``alloc``/``free`` over ctypes buffers, recording the calls."""

    def __init__(self) -> None:
        self.live: dict[int, Any] = {}
        self.allocs = 0
        self.frees = 0

    def alloc(self, n: int) -> int:
        buf = ctypes.create_string_buffer(n)
        self.live[ctypes.addressof(buf)] = buf
        self.allocs += 1
        return ctypes.addressof(buf)

    def free(self, p: int) -> None:
        del self.live[p]
        self.frees += 1


def test_size_classes() -> None:
    assert size_class(1) == 4096
    assert size_class(4097) == 8192
    assert size_class(3 * MiB) == 4 * MiB
    assert size_class(64 * MiB) == 64 * MiB
    assert size_class(64 * MiB + 1) == 66 * MiB  # past 64 MiB: multiples of 2 MiB


def test_pool_reuses_blocks_and_counts_like_the_device_pool() -> None:
    mem = HostMemory()
    pool = PinnedPool(alloc=mem.alloc, free=mem.free)
    a = pool.allocate(5000)
    b = pool.allocate(100)
    st = pool.memory_stats()
    assert st["allocated_bytes.all.current"] == 8192 + 4096
    assert st["requested_bytes.all.current"] == 5100
    assert st["reserved_bytes.all.current"] == 8192 + 4096 and st["segment.all.current"] == 2
    pool.deallocate(a)
    c = pool.allocate(6000)  # same class: the cached block, no driver call
    assert c == a and mem.allocs == 2 and pool.hits == 1 and pool.misses == 2
    pool.deallocate(b)
    pool.deallocate(c)
    pool.check()
    st = pool.memory_stats()
    assert st["allocated_bytes.all.current"] == 0 and st["cached_bytes"] == 8192 + 4096
    assert st["allocated_bytes.all.peak"] == 8192 + 4096
    # fragmentation at the peak: 1 - requested / reserved = 1 - 6100 / 12288
    assert st["fragmentation_pct"] == pytest.approx(100 * (1 - 6100 / 12288))
    assert pool.release() == 8192 + 4096 and mem.frees == 2 and not mem.live
    pool.check()
    assert pool.memory_stats()["reserved_bytes.all.current"] == 0


def test_cache_is_bounded() -> None:
    mem = HostMemory()
    pool = PinnedPool(max_cached_bytes=8192, alloc=mem.alloc, free=mem.free)
    ps = [pool.allocate(4096) for _ in range(3)]
    for p in ps:
        pool.deallocate(p)
    assert mem.frees == 1 and pool.memory_stats()["cached_bytes"] == 8192
    pool.check()


def test_no_growth_over_a_steady_pattern() -> None:
    mem = HostMemory()
    pool = PinnedPool(alloc=mem.alloc, free=mem.free)
    rng = np.random.default_rng(0)
    sizes = rng.integers(1, 3 * MiB, 40)
    for rnd in range(20):  # the same requests each round: only the first round reserves
        ps = [pool.allocate(int(n)) for n in sizes]
        for p in ps:
            pool.deallocate(p)
        if rnd == 0:
            reserved = pool.memory_stats()["reserved_bytes.all.current"]
    assert pool.memory_stats()["reserved_bytes.all.current"] == reserved
    assert pool.misses == 40 and pool.hits == 19 * 40  # the first round's blocks serve the rest
    pool.check()


def test_pinned_buffer_views_the_block_and_gives_it_back() -> None:
    mem = HostMemory()
    pool = PinnedPool(alloc=mem.alloc, free=mem.free)
    buf = PinnedBuffer(pool, (3, 5), "float32")
    buf.array[...] = np.arange(15, dtype=np.float32).reshape(3, 5)
    raw = np.ctypeslib.as_array((ctypes.c_float * 15).from_address(buf.ptr))
    np.testing.assert_array_equal(raw, np.arange(15, dtype=np.float32))
    assert pool.memory_stats()["allocated_bytes.all.current"] == 4096
    del buf
    assert pool.memory_stats()["allocated_bytes.all.current"] == 0


# ---- the stager against a fake driver ---------------------------------------------------------
class FakeDriver:
    """The few driver calls the stager makes. Copies happen at once; events and waits are
    logged (event ids and stream ids are small ints)."""

    class CUstream_flags:  # noqa: N801 - the bindings' names
        CU_STREAM_NON_BLOCKING = 1

    class CUevent_flags:  # noqa: N801
        CU_EVENT_DISABLE_TIMING = 2

    CUstream = int

    def __init__(self) -> None:
        self.log: list[tuple[Any, ...]] = []
        self.n = 100

    def _new(self) -> int:
        self.n += 1
        return self.n

    def cuCtxGetStreamPriorityRange(self) -> tuple[int, int, int]:  # noqa: N802
        return 0, 0, -5

    def cuCtxGetDevice(self) -> tuple[int, int]:  # noqa: N802
        return 0, 0

    def cuStreamCreateWithPriority(self, flags: int, prio: int) -> tuple[int, int]:  # noqa: N802
        s = self._new()
        self.log.append(("stream", s, prio))
        return 0, s

    def cuEventCreate(self, flags: int) -> tuple[int, int]:  # noqa: N802
        return 0, self._new()

    def cuEventRecord(self, ev: int, s: int) -> tuple[int]:  # noqa: N802
        self.log.append(("record", ev, int(s)))
        return (0,)

    def cuStreamWaitEvent(self, s: int, ev: int, flags: int) -> tuple[int]:  # noqa: N802
        self.log.append(("wait", int(s), ev))
        return (0,)

    def cuEventSynchronize(self, ev: int) -> tuple[int]:  # noqa: N802
        self.log.append(("host-wait", ev))
        return (0,)

    def cuStreamSynchronize(self, s: int) -> tuple[int]:  # noqa: N802
        self.log.append(("stream-sync", int(s)))
        return (0,)

    def cuMemcpyHtoDAsync(self, dst: int, src: int, n: int, s: int) -> tuple[int]:  # noqa: N802
        ctypes.memmove(dst, src, n)
        self.log.append(("copy", dst, int(s)))
        return (0,)

    def cuMemcpyHtoD(self, dst: int, src: int, n: int) -> tuple[int]:  # noqa: N802
        ctypes.memmove(dst, src, n)
        return (0,)

    def cuMemcpyDtoDAsync(self, dst: int, src: int, n: int, s: int) -> tuple[int]:  # noqa: N802
        ctypes.memmove(dst, src, n)
        self.log.append(("dtod", dst, int(s)))
        return (0,)

    def cuEventDestroy(self, ev: int) -> tuple[int]:  # noqa: N802
        return (0,)

    def cuStreamDestroy(self, s: int) -> tuple[int]:  # noqa: N802
        return (0,)


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> FakeDriver:
    f = FakeDriver()
    monkeypatch.setattr(driver, "_api", f)
    monkeypatch.setattr(driver, "OK", 0)
    monkeypatch.setattr(driver, "_initialised", True)
    monkeypatch.setattr(device, "_devices", {0: object()})
    return f


def test_stager_double_buffers_and_orders_with_events(fake: FakeDriver) -> None:
    mem = HostMemory()
    pool = PinnedPool(alloc=mem.alloc, free=mem.free)
    dev = HostMemory()  # "device" buffers: host memory, so copies can be read back
    st = staging.HostStager(dev.alloc, pool)
    assert st.priority == -5 and ("stream", st.copy_stream.handle, -5) in fake.log
    compute = device.Stream.wrap(7)  # the entry's compute stream
    cs = st.copy_stream.handle
    addrs = []
    for k in range(4):
        fake.log.clear()
        x = np.full((2, 3), k, np.float64)  # cast to the parameter's f32 on the way
        p = st.stage(0, x, (2, 3), "float32")
        st.before_run(compute)
        st.after_run(compute)
        addrs.append(p)
        got = np.ctypeslib.as_array((ctypes.c_float * 6).from_address(p))
        np.testing.assert_array_equal(got, np.full(6, k, np.float32))
        kinds = [e[0] for e in fake.log]
        if k < 2:  # a fresh slot: nothing to wait for
            assert kinds == ["copy", "record", "wait", "record"]
        else:  # a reused slot: the host waits for its old copy, the copy for the old compute
            assert kinds == ["host-wait", "wait", "copy", "record", "wait", "record"]
            assert fake.log[1][1] == cs  # the copy stream waits ...
            assert fake.log[4][1] == 7  # ... and the compute waits on the device, not the host
        assert ("copy", p, cs) in fake.log
    assert addrs[0] == addrs[2] and addrs[1] == addrs[3] and addrs[0] != addrs[1]
    assert st.copies == 4 and st.bytes == 4 * 24
    assert pool.memory_stats()["allocated_bytes.all.current"] == 2 * 4096
    assert not any(e[0] == "stream-sync" for e in fake.log)  # never a device-wide wait
    st.close()
    assert pool.memory_stats()["allocated_bytes.all.current"] == 0
    assert ("stream-sync", cs) in fake.log  # closing waits for queued copies first
    pool.check()


def test_metrics_show_the_pinned_pool_beside_the_device_pool() -> None:
    """One family per metric name, the pinned pool as ``pool="pinned"`` samples of it."""
    from types import SimpleNamespace

    from kinac.metrics import RunMetrics, parse, render

    mem = HostMemory()
    pool = PinnedPool(alloc=mem.alloc, free=mem.free)
    keep = [pool.allocate(5000), pool.allocate(100)]
    stager = SimpleNamespace(pool=pool, copies=6, bytes=6 * 5000)
    device_pool = SimpleNamespace(
        memory_stats=lambda: {
            "reserved_bytes.all.current": 1 << 20,
            "allocated_bytes.all.current": 1 << 19,
            "fragmentation_pct": 2.5,
        }  # fmt: skip
    )
    lowered = SimpleNamespace(steps=(), arena_bytes=0)
    entry = SimpleNamespace(lowered=lowered, resource=device_pool, _stager=stager)
    text = render(RunMetrics("e", "cuda", entry=entry))
    assert text.count("# HELP kinac_alloc_reserved_bytes ") == 1
    m = parse(text)
    assert m["kinac_alloc_reserved_bytes"] == 1 << 20  # the device pool's, first
    lab = 'entry="e",pool="pinned",target="cuda"'
    pinned = {k: v for k, v in m.items() if 'pool="pinned"' in k}
    assert pinned[f"kinac_alloc_reserved_bytes{{{lab}}}"] == 8192 + 4096
    assert pinned[f"kinac_alloc_allocated_bytes{{{lab}}}"] == 8192 + 4096
    assert m["kinac_host_input_copies_total"] == 6
    assert m["kinac_host_input_bytes_total"] == 30000
    del keep


def test_a_gpu_entry_stages_host_arrays_and_orders_its_compute(
    fake: FakeDriver, monkeypatch: pytest.MonkeyPatch
) -> None:
    """GpuEntry.prepare/_call with host arrays, driverless: "device" memory is host memory,
    the kernel a Python function reading the staged buffer. Each call's result uses that
    call's data; the compute stream (0) waits for this call's copies before it runs and
    records that it is done with them after."""
    from collections import OrderedDict
    from types import SimpleNamespace

    from kinac.artifacts.gpu import GpuLoweredEntry
    from kinac.artifacts.host import BufferSpec
    from kinac.rt.cuda import pinned
    from kinac.rt.cuda.entry import GpuEntry
    from kinac.rt.cuda.tensor import DTYPES, Allocation

    mem = HostMemory()
    monkeypatch.setattr(pinned, "_pool", PinnedPool(alloc=mem.alloc, free=mem.free))
    dev = HostMemory()
    res = SimpleNamespace(ordinal=0, allocate=lambda n, s=0: dev.alloc(n),
                          deallocate=lambda p, n=0, s=0: dev.free(p))  # fmt: skip
    lw = GpuLoweredEntry("e", "", (BufferSpec("x", "f32", (4,)),), (BufferSpec("o", "f32", (4,)),),
                         ("cpu",), ("cuda:0",), 0, 0, (), ())  # fmt: skip
    e = GpuEntry.__new__(GpuEntry)
    e.lowered, e.ordinal, e.pinned, e.resource = lw, 0, True, res
    e._out_specs = [((4,), DTYPES["float32"], 16, (1,))]
    e._host_outputs, e.use_graphs, e.max_graphs, e.status = [], False, 8, 0
    e.stream = device.Stream.wrap(0)
    e._imports, e._last_box, e._stager, e._allocs = {}, [None], None, []
    e._seen, e.volatile, e._stage, e._bound = [set(), set()], set(), {}, OrderedDict()
    e.captures = e.replays = 0

    def bind(key: tuple[int, ...]) -> Any:
        x, out = (p if p else e._staging(pos) for pos, p in enumerate(key))  # as GpuEntry._bind

        def seq(stream: Any) -> None:
            fake.log.append(("compute", x))
            src = np.ctypeslib.as_array((ctypes.c_float * 4).from_address(x))
            np.ctypeslib.as_array((ctypes.c_float * 4).from_address(out))[:] = 2 * src

        return seq, []

    e._bind = bind  # type: ignore[method-assign]
    outs = []
    for k in range(5):
        fake.log.clear()
        outs.append(e._call((np.full(4, k, np.float64),)))  # cast to f32 on the way
        kinds = [(ev[0], ev[1]) if ev[0] == "wait" else ev[0] for ev in fake.log]
        staged = fake.log[kinds.index("copy")][1]
        assert ("compute", staged) in fake.log  # the kernel read the staged buffer
        assert kinds.index(("wait", 0)) < kinds.index("compute")  # after the copy, on device
        consumed = [i for i, ev in enumerate(fake.log) if ev[0] == "record" and ev[2] == 0]
        assert consumed and consumed[-1] > kinds.index("compute")  # on the compute stream, after
        assert not any(ev[0] in ("stream-sync",) for ev in fake.log)
    for k, o in enumerate(outs):
        assert isinstance(o, Allocation) or hasattr(o, "ptr")
        got = np.ctypeslib.as_array((ctypes.c_float * 4).from_address(o.ptr))
        np.testing.assert_array_equal(got, np.full(4, 2 * k, np.float32))
    assert e._stager.copies == 5 and len(set(e._stager.device_buffers())) == 2


def test_stager_reports_pinned_bytes_as_the_pool_accounts_them(fake: FakeDriver) -> None:
    """A 24-byte parameter's two slots hold two 4 KiB blocks: the stager says 8 KiB, as the
    pool's statistics do (the H200 run compared the two and found them 6 KiB apart)."""
    mem = HostMemory()
    pool = PinnedPool(alloc=mem.alloc, free=mem.free)
    st = staging.HostStager(HostMemory().alloc, pool)
    compute = device.Stream.wrap(7)
    for k in range(2):
        st.stage(0, np.full((2, 3), k, np.float32), (2, 3), "float32")
        st.before_run(compute)
        st.after_run(compute)
    assert st.pinned_bytes() == pool.memory_stats()["allocated_bytes.all.current"] == 2 * 4096
    st.close()


def test_staging_blocks_write_combined_when_asked(
    fake: FakeDriver, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``KINAC_STAGING_WC=1``: a new stager's blocks come from the write-combined pool
    (``cuMemHostAlloc`` with PORTABLE | WRITECOMBINED); without it, from the process's pool."""
    mem, flags = HostMemory(), []

    def alloc(n: int, f: int = pinned.PORTABLE) -> int:
        flags.append(f)
        return mem.alloc(n)

    monkeypatch.setattr(pinned, "_driver_alloc", alloc)
    monkeypatch.setattr(pinned, "_wc_pool", None)
    monkeypatch.setenv("KINAC_STAGING_WC", "1")
    st = staging.HostStager(HostMemory().alloc)
    assert st.pool is pinned.write_combined_pool()
    st.stage(0, np.ones((2, 3), np.float32), (2, 3), "float32")
    st.before_run(device.Stream.wrap(7))
    st.after_run(device.Stream.wrap(7))
    assert flags == [pinned.PORTABLE | pinned.WRITECOMBINED] and pinned.WRITECOMBINED == 4
    st.close()
    monkeypatch.delenv("KINAC_STAGING_WC")
    other = staging.HostStager(HostMemory().alloc, PinnedPool(alloc=mem.alloc, free=mem.free))
    assert other.pool is not pinned.write_combined_pool()
    other.close()
